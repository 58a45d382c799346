/*
 * Shared by the tests/core/test_ops_*.c files: running a job whose ranks
 * plait_init(), run a body through the public C ABI and plait_shutdown();
 * check macros that name the file, line and what differed. Element access,
 * test data and the expected result of each reduction are the dtype oracle's
 * (dtype_oracle.h).
 *
 * Header-only: every function is static inline, so a file that does not use
 * one gets no warning.
 * */
#ifndef PLAIT_TEST_OPS_UTIL_H
#define PLAIT_TEST_OPS_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plait/plait.h"
#include "dtype_oracle.h"
#include "ranks.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define OPS_LEAK_CHECK() __lsan_do_recoverable_leak_check()
#else
#define OPS_LEAK_CHECK() 0
#endif

/* ------------------------------------------------------------------------ */
/* Failing a rank                                                            */
/* ------------------------------------------------------------------------ */

static inline void ops_say_at(int rank, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void ops_say_at(int rank, const char *file, int line, const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  plait_test_say(rank, "%s:%d: %s", base ? base + 1 : file, line, msg);
}

/* Fails the rank (the body returns 1); needs `rank` in scope. */
#define FAILF(...)                                                             \
  do {                                                                         \
    ops_say_at(rank, __FILE__, __LINE__, __VA_ARGS__);                         \
    return 1;                                                                  \
  } while (0)

/* Fails the rank unless cond holds, naming cond, then the message. */
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      ops_say_at(rank, __FILE__, __LINE__, "check failed: %s", #cond);         \
      FAILF(__VA_ARGS__);                                                      \
    }                                                                          \
  } while (0)

/* A plait call that must succeed. */
#define OK(call)                                                               \
  do {                                                                         \
    plait_result_t ok_rc_ = (call);                                            \
    if (ok_rc_ != PLAIT_SUCCESS)                                               \
      FAILF("%s -> %s: %s", #call, plait_result_name(ok_rc_), plait_last_error()); \
  } while (0)

/* A plait call that must fail with want. */
#define EXPECT_RC(want, call)                                                  \
  do {                                                                         \
    plait_result_t ex_rc_ = (call);                                            \
    if (ex_rc_ != (want))                                                      \
      FAILF("%s -> %s, expected %s (%s)", #call, plait_result_name(ex_rc_),    \
            plait_result_name(want), plait_last_error());                      \
  } while (0)

/* ------------------------------------------------------------------------ */
/* Running a job                                                             */
/* ------------------------------------------------------------------------ */

typedef int (*ops_body_fn)(int rank, int nranks, void *arg);

/* A rank's own step before plait_init, or check after plait_shutdown (only
 * when the body passed): nonzero fails the rank, having said why. */
typedef int (*ops_hook_fn)(int rank);

typedef struct ops_job_arg {
  ops_body_fn body;
  void *arg;
  ops_hook_fn before, after; /* NULL: none */
} ops_job_arg_t;

static inline int ops_rank_main(int rank, int nranks, void *arg) {
  const ops_job_arg_t *a = arg;
  if (a->before && a->before(rank)) return 1;
  plait_result_t rc = plait_init();
  if (rc != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
    return 1;
  }
  int fails = a->body(rank, nranks, a->arg);
  rc = plait_shutdown();
  if (rc != PLAIT_SUCCESS && !fails) {
    plait_test_say(rank, "plait_shutdown: %s: %s", plait_result_name(rc), plait_last_error());
    fails = 1;
  }
  if (!fails && a->after && a->after(rank)) fails = 1;
  /* The rank _exit()s, so LeakSanitizer would not look: look now (after a
   * failure buffers are left to operations that may still be in flight). */
  if (!fails && OPS_LEAK_CHECK()) {
    plait_test_say(rank, "LeakSanitizer found leaks after plait_shutdown (see above)");
    fails = 1;
  }
  return fails;
}

/* ops_run with the rank's hooks and one more setting before env (NULL: none). */
static inline int ops_run_hooked(int nranks, const char *setting, const char *const *env,
                                 double timeout_s, ops_body_fn body, void *arg,
                                 ops_hook_fn before, ops_hook_fn after) {
  const char *all[16];
  int k = 0;
  all[k++] = "PLAIT_TIMEOUT_S=15";
  if (setting) all[k++] = setting;
  for (; env && *env && k < 15; env++) all[k++] = *env;
  all[k] = NULL;
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = nranks;
  job.timeout_s = timeout_s;
  job.env = all;
  ops_job_arg_t a = {body, arg, before, after};
  return plait_test_run_ranks(&job, ops_rank_main, &a);
}

/*
 * Runs body on nranks forked ranks, each between plait_init and
 * plait_shutdown, with PLAIT_TIMEOUT_S=15 (a rank that fails early makes the
 * others fail with PLAIT_ERR_PEER_LOST soon, well before timeout_s) plus the
 * NULL-terminated env list. Returns 0 when every rank returned 0.
 */
static inline int ops_run(int nranks, const char *const *env, double timeout_s, ops_body_fn body,
                          void *arg) {
  return ops_run_hooked(nranks, NULL, env, timeout_s, body, arg, NULL, NULL);
}

/* 1 when this build made the gloo transport plugin (it is skipped when
 * libgloo is not installed); the tests need it. */
static inline int ops_gloo_built(void) {
  FILE *f = fopen(PLAIT_TEST_LIB_DIR "/libplait-transport-gloo.so", "rb");
  if (f) fclose(f);
  return f != NULL;
}

/* In a Criterion test: skip it, saying why, when there is no gloo plugin. */
#define OPS_REQUIRE_GLOO()                                                     \
  do {                                                                         \
    if (!ops_gloo_built())                                                     \
      cr_skip_test("the gloo transport plugin was not built (is libgloo-dev " \
                   "installed?): no " PLAIT_TEST_LIB_DIR                       \
                   "/libplait-transport-gloo.so");                            \
  } while (0)

static inline double ops_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void ops_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* plait_stats with struct_size set; 0 on success. */
static inline plait_result_t ops_stats(plait_stats_t *s) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  return plait_stats(s);
}

/* Fixed-seed permutation of 0..n-1 (same on every rank for a given seed). */
static inline void ops_shuffle(int *p, int n, unsigned seed) {
  for (int i = 0; i < n; i++) p[i] = i;
  for (int i = n - 1; i > 0; i--) {
    seed = seed * 1103515245u + 12345u;
    int j = (int)((seed >> 16) % (unsigned)(i + 1));
    int t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

/* An allreduce (sum) of n floats named `name`, waited for up to 60 s, after
 * a rank may have been lost: the submission itself may fail (the job failed
 * already). Says and returns what the submission or the wait said. */
static inline plait_result_t ops_allreduce_after_loss(int rank, const char *name, float *x,
                                                      size_t n) {
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_tensor_1d(&t, x, n, PLAIT_FLOAT32);
  if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) {
    rc = plait_wait(h, 60);
    plait_release(h);
  }
  plait_test_say(rank, "after the kill: %s: %s", plait_result_name(rc), plait_last_error());
  return rc;
}

#endif
