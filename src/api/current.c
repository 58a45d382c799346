/* The engine the public API works on (current.h). */
#include "api/current.h"

#include <pthread.h>
#include <unistd.h>

#include "util/error.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* held only to read and swap */
static plait_engine_t *process_engine;

plait_engine_t *plait_api_acquire(void) {
  plait_engine_t *e = plait_engine_bound();
  if (e) {
    plait_engine_ref(e);
    return e;
  }
  pthread_mutex_lock(&mu);
  e = process_engine;
  if (e) plait_engine_ref(e);
  pthread_mutex_unlock(&mu);
  return e;
}

void plait_api_release(plait_engine_t **e) {
  if (*e) plait_engine_unref(*e);
  *e = NULL;
}

plait_result_t plait_api_check(const char *fn, const plait_engine_t *e) {
  if (plait_engine_forked(e))
    return plait_error(PLAIT_ERR_NOT_INITIALIZED, "%s: this process (pid %d) is a fork of process "
                       "%d, which initialized plait; a forked child cannot use its parent's "
                       "plait (its connections belong to the parent)", fn, (int)getpid(),
                       (int)e->pid);
  if (!plait_engine_running(e))
    return plait_error(PLAIT_ERR_NOT_INITIALIZED, "%s: plait is not initialized (call plait_init "
                       "first)", fn);
  return PLAIT_SUCCESS;
}

/* A child forked while another thread held mu would wait on it forever. */
static void reinit_in_child(void) { pthread_mutex_init(&mu, NULL); }
static void register_fork_handler(void) { pthread_atfork(NULL, NULL, reinit_in_child); }

void plait_api_publish(plait_engine_t *e) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_fork_handler);
  pthread_mutex_lock(&mu);
  process_engine = e;
  pthread_mutex_unlock(&mu);
}

int plait_api_is_process_engine(const plait_engine_t *e) {
  pthread_mutex_lock(&mu);
  int yes = e && e == process_engine;
  pthread_mutex_unlock(&mu);
  return yes;
}

plait_engine_t *plait_api_unpublish(void) {
  pthread_mutex_lock(&mu);
  plait_engine_t *e = process_engine;
  process_engine = NULL;
  pthread_mutex_unlock(&mu);
  return e;
}
