/*
 * Shared by the tests/core/test_ops_*.c files: running a job whose ranks
 * plait_init(), run a body through the public C ABI and plait_shutdown();
 * check macros that name the file, line and what differed; element access in
 * every dtype, with the test's own float16/bfloat16 converters; and the
 * expected result of each reduction, computed from rank and index.
 *
 * Header-only: every function is static inline, so a file that does not use
 * one gets no warning.
 *
 * Data are small integers (and their quotients for AVERAGE), so every result
 * is exact or rounded in a way the test reproduces bit for bit.
 */
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

typedef struct ops_job_arg {
  ops_body_fn body;
  void *arg;
} ops_job_arg_t;

static inline int ops_rank_main(int rank, int nranks, void *arg) {
  const ops_job_arg_t *a = arg;
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
  /* The rank _exit()s, so LeakSanitizer would not look: look now (after a
   * failure buffers are left to operations that may still be in flight). */
  if (!fails && OPS_LEAK_CHECK()) {
    plait_test_say(rank, "LeakSanitizer found leaks after plait_shutdown (see above)");
    fails = 1;
  }
  return fails;
}

/*
 * Runs body on nranks forked ranks, each between plait_init and
 * plait_shutdown, with PLAIT_TIMEOUT_S=15 (a rank that fails early makes the
 * others fail with PLAIT_ERR_PEER_LOST soon, well before timeout_s) plus the
 * NULL-terminated env list. Returns 0 when every rank returned 0.
 */
static inline int ops_run(int nranks, const char *const *env, double timeout_s, ops_body_fn body,
                          void *arg) {
  const char *all[16];
  int k = 0;
  all[k++] = "PLAIT_TIMEOUT_S=15";
  for (; env && *env && k < 15; env++) all[k++] = *env;
  all[k] = NULL;
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = nranks;
  job.timeout_s = timeout_s;
  job.env = all;
  ops_job_arg_t a = {body, arg};
  return plait_test_run_ranks(&job, ops_rank_main, &a);
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

/* ------------------------------------------------------------------------ */
/* dtypes and ops                                                            */
/* ------------------------------------------------------------------------ */

#define OPS_DTYPE_ENTRY_(name, value, text, bytes) name,
static const plait_dtype_t ops_dtypes[] = {PLAIT_DTYPE_LIST(OPS_DTYPE_ENTRY_)};
#undef OPS_DTYPE_ENTRY_
#define OPS_N_DTYPES ((int)(sizeof ops_dtypes / sizeof ops_dtypes[0]))

#define OPS_OP_ENTRY_(name, value, text) name,
static const plait_op_t ops_ops[] = {PLAIT_OP_LIST(OPS_OP_ENTRY_)};
#undef OPS_OP_ENTRY_
#define OPS_N_OPS ((int)(sizeof ops_ops / sizeof ops_ops[0]))

static inline double ops_round_float(plait_dtype_t d, float f) {
  if (d == PLAIT_FLOAT16) return ops_f16_to_f32(ops_f32_to_f16(f));
  if (d == PLAIT_BFLOAT16) return ops_bf16_to_f32(ops_f32_to_bf16(f));
  return f;
}

/* x * factor as plait_op_options_t scales an element of d (Horovod 0.28's
 * CPU scaling): integers in double, truncated toward zero; float32 and the
 * 16-bit floats in float, by the factor rounded to float (16-bit floats then
 * rounded to their type); float64 in double. */
static inline double ops_scale(plait_dtype_t d, double x, double factor) {
  if (factor == 1.0) return x;
  if (d == PLAIT_FLOAT64) return x * factor;
  if (ops_is_float(d)) {
    volatile float p = (float)factor * (float)x; /* a float product, nothing wider */
    return ops_round_float(d, p);
  }
  return trunc(x * factor);
}

/* ------------------------------------------------------------------------ */
/* Data and expected reductions                                              */
/* ------------------------------------------------------------------------ */

/*
 * Rank r's element i of a reduction test. Sums over up to 4 ranks stay in
 * [-32, 64] and products within [-16, 81]: exact in every dtype. Signed
 * types get negatives, so that AVERAGE truncation toward zero and MIN/MAX
 * of negatives are exercised. salt varies the data between tensors.
 */
static inline double ops_value(plait_dtype_t d, plait_op_t op, int r, size_t i, unsigned salt) {
  size_t k = i * 7 + (size_t)r * 5 + salt;
  if (d == PLAIT_BOOL) return (double)(((i * 7 + salt + 3) >> (r % 4)) & 1u);
  if (op == PLAIT_OP_PRODUCT) {
    static const double s[6] = {1, -1, 2, 1, -2, 1}, u[4] = {1, 2, 3, 1};
    return ops_is_unsigned(d) ? u[k % 4] : s[k % 6];
  }
  double v = (double)(k % 17);
  return ops_is_unsigned(d) ? v : v - 8;
}

/*
 * The result of reducing vals[0..n) (each already prescaled) with op in
 * dtype d, before postscale (AVERAGE: the sum; its 1/n is part of the
 * postscale factor, see ops_postscale).
 */
static inline double ops_reduce(plait_dtype_t d, plait_op_t op, const double *vals, int n) {
  double acc = vals[0];
  for (int r = 1; r < n; r++) {
    double v = vals[r];
    switch (op) {
    case PLAIT_OP_SUM:
    case PLAIT_OP_AVERAGE: acc = d == PLAIT_BOOL ? (double)(acc != 0 || v != 0) : acc + v; break;
    case PLAIT_OP_MIN: acc = d == PLAIT_BOOL ? (double)(acc != 0 && v != 0) : v < acc ? v : acc; break;
    case PLAIT_OP_MAX: acc = d == PLAIT_BOOL ? (double)(acc != 0 || v != 0) : v > acc ? v : acc; break;
    case PLAIT_OP_PRODUCT: acc = d == PLAIT_BOOL ? (double)(acc != 0 && v != 0) : acc * v; break;
    default: break;
    }
  }
  return acc;
}

/* The factor the reduced values are scaled by: AVERAGE divides the postscale
 * factor by the number of ranks, in double (Horovod's arithmetic). */
static inline double ops_postscale(plait_op_t op, int n, double post) {
  return op == PLAIT_OP_AVERAGE ? post / n : post;
}

/* Expected element i of an allreduce of ops_value data over n ranks. */
static inline double ops_expect(plait_dtype_t d, plait_op_t op, int n, size_t i, unsigned salt,
                                double pre, double post) {
  double vals[PLAIT_TEST_MAX_RANKS];
  if (n < 1 || n > PLAIT_TEST_MAX_RANKS) return NAN;
  for (int r = 0; r < n; r++) vals[r] = ops_scale(d, ops_value(d, op, r, i, salt), pre);
  return ops_scale(d, ops_reduce(d, op, vals, n), ops_postscale(op, n, post));
}

static inline void ops_fill(plait_dtype_t d, plait_op_t op, int r, void *buf, size_t count,
                            unsigned salt) {
  for (size_t i = 0; i < count; i++) ops_put(d, buf, i, ops_value(d, op, r, i, salt));
}

/* Index of the first wrong element of an allreduce result, or -1. */
static inline long ops_check(plait_dtype_t d, plait_op_t op, int n, const void *buf,
                             size_t count, unsigned salt, double pre, double post,
                             double *got, double *want) {
  for (size_t i = 0; i < count; i++) {
    double g = ops_get(d, buf, i), w = ops_expect(d, op, n, i, salt, pre, post);
    if (g != w) {
      *got = g;
      *want = w;
      return (long)i;
    }
  }
  return -1;
}

/* Bytes of a 1-D tensor of count elements. */
static inline size_t ops_bytes(plait_dtype_t d, size_t count) {
  return count * plait_dtype_size(d);
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

#endif
