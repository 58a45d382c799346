/* The monotonic clock (clock.h). */
#include "util/clock.h"

#include <errno.h>
#include <time.h>

double plait_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double plait_thread_cpu_s(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int plait_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *until) {
  int rc = pthread_cond_timedwait(cv, mu, until);
  if (rc != ETIMEDOUT) return rc;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int reached = now.tv_sec > until->tv_sec ||
                (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec);
  return reached ? ETIMEDOUT : 0;
}
