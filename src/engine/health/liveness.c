#include "engine/health/liveness.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "util/affinity.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

static void *live_main(void *arg) {
  plait_live_t *l = arg;
  pthread_mutex_lock(&l->mu);
  while (!l->stop) {
    /* Not away: look again in a period (plait_live_away does not wake this
     * thread: a wake-up per collective cost two context switches per
     * operation). A wait that began before away began ends before its
     * first heartbeat is due, so that heartbeat is as punctual as ever. */
    double now = plait_now();
    double next = (l->away ? l->last_beat : now) + l->period_s;
    if (now < next) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      double left = next - now;
      ts.tv_sec += (time_t)left;
      ts.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&l->cv, &l->mu, &ts);
      continue; /* re-check stop and away */
    }
    if (plait_control_send_heartbeat(l->ctrl)) l->beats++; /* control.h */
    l->last_beat = plait_now();
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

plait_result_t plait_live_start(plait_live_t *l, plait_control_t *ctrl, double period_s) {
  memset(l, 0, sizeof *l);
  l->ctrl = ctrl;
  l->period_s = period_s;
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
      pthread_cond_init(&l->cv, &ca))
    return plait_error(PLAIT_ERR_SYSTEM, "cannot make the liveness thread's condition variable");
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&l->mu, NULL);
  plait_result_t rc = plait_thread_start(&l->thread, live_main, l, "plait-live", -1);
  if (rc) {
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    return rc;
  }
  l->started = 1;
  return PLAIT_SUCCESS;
}

void plait_live_away(plait_live_t *l) {
  if (!l->started) return;
  pthread_mutex_lock(&l->mu);
  l->away = 1;
  l->last_beat = plait_now(); /* the coordinator was in its loop until now */
  pthread_mutex_unlock(&l->mu);
}

void plait_live_back(plait_live_t *l) {
  if (!l->started) return;
  pthread_mutex_lock(&l->mu); /* waits out a heartbeat being written */
  l->away = 0;
  pthread_mutex_unlock(&l->mu);
}

void plait_live_stop(plait_live_t *l) {
  if (!l->started) return;
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  l->away = 0;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  PLAIT_DEBUG("coord", "liveness thread sent %llu heartbeats", (unsigned long long)l->beats);
  pthread_cond_destroy(&l->cv);
  pthread_mutex_destroy(&l->mu);
  l->started = 0;
}
