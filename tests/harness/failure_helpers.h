/*
 * Helpers shared by the multi-rank failure tests (test_failures.c,
 * test_mismatch.c): checks that name the rank and line, a clock, a block of
 * memory shared by the ranks of one job, a counting callback, and float32
 * allreduce shorthands. Everything is static inline: each test file includes
 * it once.
 */
#ifndef PLAIT_TEST_FAILURE_HELPERS_H
#define PLAIT_TEST_FAILURE_HELPERS_H

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "plait/plait.h"
#include "ranks.h"

#define FAIL(...)                                                              \
  do {                                                                         \
    plait_test_say(rank, __VA_ARGS__);                                         \
    return 1;                                                                  \
  } while (0)

#define EXPECT_OK(call)                                                        \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS)                                                  \
      FAIL("%s:%d: %s -> %s: %s", __FILE__, __LINE__, #call,                   \
           plait_result_name(rc_), plait_last_error());                        \
  } while (0)

/* rc must be `want` and the message must contain every word (NULL-ended). */
#define EXPECT_ERR(rc, want, ...)                                              \
  do {                                                                         \
    const char *words_[] = {__VA_ARGS__, NULL};                                \
    if (!has_all(rank, __LINE__, (rc), (want), words_)) return 1;              \
  } while (0)

static inline int has_all(int rank, int line, plait_result_t rc, plait_result_t want,
                   const char *const *words) {
  const char *msg = plait_last_error();
  if (rc != want) {
    plait_test_say(rank, "line %d: got %s (\"%s\"), expected %s", line, plait_result_name(rc),
                   msg, plait_result_name(want));
    return 0;
  }
  for (int i = 0; words[i]; i++)
    if (!strstr(msg, words[i])) {
      plait_test_say(rank, "line %d: %s message does not say \"%s\": \"%s\"", line,
                     plait_result_name(rc), words[i], msg);
      return 0;
    }
  return 1;
}

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Shared between the ranks of one job (mapped before the fork). */
typedef struct {
  atomic_int pid[PLAIT_TEST_MAX_RANKS];
  atomic_int flag[8];
  atomic_int count;
} shared_t;

static inline shared_t *shared_new(void) {
  shared_t *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(s != MAP_FAILED);
  memset(s, 0, sizeof *s);
  return s;
}

/* Waits up to limit_s for *flag to reach value; 1 if it did. */
static inline int await_flag(atomic_int *flag, int value, double limit_s) {
  double until = now() + limit_s;
  while (atomic_load(flag) < value)
    if (now() > until) return 0;
    else usleep(1000);
  return 1;
}

/* A callback that counts its calls and keeps the last result. */
static atomic_int callbacks;
static _Atomic plait_result_t callback_rc;
static inline void count_cb(plait_handle_t *h, plait_result_t rc, void *user) {
  (void)h, (void)user;
  atomic_store(&callback_rc, rc);
  atomic_fetch_add(&callbacks, 1);
}

static inline plait_tensor_t f32(float *x, int64_t n) {
  plait_tensor_t t;
  plait_tensor_1d(&t, x, (size_t)n, PLAIT_FLOAT32);
  return t;
}

/* A float32 allreduce of n elements, in place. */
static inline plait_result_t allreduce(const char *name, float *x, int64_t n, plait_op_t op,
                                const plait_op_options_t *o, plait_handle_t **h) {
  plait_tensor_t t = f32(x, n);
  return plait_allreduce_async(name, &t, &t, op, o, h);
}

/* Submits and waits; the handle is released. */
static inline plait_result_t allreduce_wait(const char *name, float *x, int64_t n, double timeout_s) {
  plait_handle_t *h = NULL;
  plait_result_t rc = allreduce(name, x, n, PLAIT_OP_SUM, NULL, &h);
  if (rc) return rc;
  rc = plait_wait(h, timeout_s);
  plait_release(h);
  return rc;
}

/* Suite init: no PLAIT_* variable of the caller's environment (a transport,
 * a log level, stall or timeout settings) changes what these tests see. */
static inline void clean_plait_env(void) { plait_test_clear_env(); }

#endif
