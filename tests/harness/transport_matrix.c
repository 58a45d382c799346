/* The shared transport matrix: see transport_matrix.h. */
#include "transport_matrix.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/core.h"
#include "dtype_oracle.h"
#include "plait/plait.h"
#include "util/reduce.h"
#include "transport_calls.h"

#define MIB (1024u * 1024u)
#define BIG_BYTES (8u * MIB)

/* Fails the rank (exit code 1) with a message naming it. */
#define REQUIRE(c, cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      plait_test_say((c)->rank, "%s:%d: %s failed", __FILE__, __LINE__, #cond); \
      plait_test_say((c)->rank, __VA_ARGS__);                                  \
      return 1;                                                                \
    }                                                                          \
  } while (0)

/* A plugin call that must succeed. */
#define CALL(c, what, expr)                                                    \
  do {                                                                         \
    plait_result_t rc_ = (expr);                                               \
    REQUIRE(c, rc_ == PLAIT_SUCCESS, "%s: %s: %s", what,                       \
            plait_result_name(rc_), (c)->t->last_error((c)->st));              \
  } while (0)

/* ------------------------------------------------------------------------ */
/* Running a job                                                             */
/* ------------------------------------------------------------------------ */

/* Shared by the ranks of one job (mapped before the fork): why init failed. */
typedef struct tm_shared {
  int init_rc[PLAIT_TEST_MAX_RANKS];
  char init_msg[PLAIT_TEST_MAX_RANKS][512];
} tm_shared_t;

typedef struct tm_arg {
  const char *transport;
  tm_body_fn body;
  tm_shared_t *sh;
  void *extra;
} tm_arg_t;

/* plait_init, noting a failure in the shared block; 0 on success. */
static int start_rank(int rank, const tm_arg_t *a, tm_ctx_t *c) {
  plait_result_t rc = plait_init();
  if (rc != PLAIT_SUCCESS) {
    a->sh->init_rc[rank] = (int)rc;
    snprintf(a->sh->init_msg[rank], sizeof a->sh->init_msg[rank], "%s", plait_last_error());
    plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
    return 1;
  }
  c->t = plait_core_transport(&c->st);
  if (c->t == NULL || strcmp(c->t->name, a->transport) != 0) {
    plait_test_say(rank, "the loaded transport is %s, not %s", c->t ? c->t->name : "none",
                   a->transport);
    return 1;
  }
  return 0;
}

static int run_rank(int rank, int nranks, void *arg) {
  const tm_arg_t *a = arg;
  tm_ctx_t c = {rank, nranks, NULL, NULL};
  if (start_rank(rank, a, &c)) {
    if (c.t) plait_shutdown();
    return 1;
  }
  int fails = a->body(&c);
  plait_result_t rc = plait_shutdown();
  if (rc != PLAIT_SUCCESS && !fails) {
    plait_test_say(rank, "plait_shutdown: %s: %s", plait_result_name(rc), plait_last_error());
    fails = 1;
  }
  return fails;
}

static int job_env(const char *transport, const char *timeout, const char *const *env,
                   const char **all, int cap) {
  static char tr[64];
  snprintf(tr, sizeof tr, "PLAIT_TRANSPORT=%s", transport);
  int k = 0;
  all[k++] = tr;
  all[k++] = timeout;
  for (; env && *env && k < cap - 1; env++) all[k++] = *env;
  all[k] = NULL;
  return k;
}

/* TM_SKIPPED when a rank's plugin said it cannot start here because no
 * libfabric provider fits this host (plugins/ofi/setup.c's three messages);
 * any other failure to start, PLAIT_ERR_UNSUPPORTED or not, fails. */
static int skipped(const tm_shared_t *sh, int nranks, char *reason, size_t reason_len) {
  for (int r = 0; r < nranks; r++)
    if (sh->init_rc[r] == PLAIT_ERR_UNSUPPORTED && strstr(sh->init_msg[r], "libfabric provider")) {
      snprintf(reason, reason_len, "rank %d: %s", r, sh->init_msg[r]);
      return 1;
    }
  return 0;
}

static tm_shared_t *shared_new(void) {
  tm_shared_t *sh =
      mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return NULL;
  memset(sh, 0, sizeof *sh);
  return sh;
}

int tm_run(const char *transport, int nranks, tm_body_fn body, const char *const *env,
           char *reason, size_t reason_len) {
  const char *all[24];
  job_env(transport, "PLAIT_TIMEOUT_S=15", env, all, 24);
  tm_shared_t *sh = shared_new();
  if (!sh) return TM_FAILED;
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = nranks;
  job.timeout_s = 50;
  job.env = all;
  tm_arg_t arg = {transport, body, sh, NULL};
  int rc = plait_test_run_ranks(&job, run_rank, &arg);
  if (rc != 0 && skipped(sh, nranks, reason, reason_len)) rc = TM_SKIPPED;
  munmap(sh, sizeof *sh);
  return rc == 0 ? TM_PASSED : rc == TM_SKIPPED ? TM_SKIPPED : TM_FAILED;
}

int tm_everything(tm_ctx_t *c) {
  return tm_allreduce(c) || tm_allgatherv(c) || tm_broadcast(c) || tm_alltoallv(c) ||
         tm_reducescatter(c) || tm_barrier(c) || tm_errors(c);
}

/* ------------------------------------------------------------------------ */
/* Values in every dtype                                                     */
/* ------------------------------------------------------------------------ */

static const plait_dtype_t all_dtypes[] = {
    PLAIT_UINT8, PLAIT_INT8,     PLAIT_UINT16,  PLAIT_INT16,   PLAIT_INT32, PLAIT_INT64,
    PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32, PLAIT_FLOAT64, PLAIT_BOOL};
#define N_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

static const plait_op_t all_ops[] = {PLAIT_OP_SUM, PLAIT_OP_AVERAGE, PLAIT_OP_MIN,
                                     PLAIT_OP_MAX, PLAIT_OP_PRODUCT};
#define N_OPS (sizeof all_ops / sizeof all_ops[0])

/*
 * Rank r's element i for an op. Sums over 4 ranks stay within [-20, 40] and
 * products within [-81, 81]: exact in int8, float16 and bfloat16. For
 * AVERAGE on floating types the per-rank offsets cancel, so the average is
 * the (exactly representable) base; integer types get uneven data so that
 * truncation toward zero is exercised.
 */
static double value(plait_dtype_t d, plait_op_t op, int r, int n, size_t i) {
  if (d == PLAIT_BOOL) return ((i + (size_t)r) % 3) != 0 || (i % 7) == 0;
  if (op == PLAIT_OP_PRODUCT) {
    double v = (double)((i + (size_t)r) % 3 + 1);
    return (!ops_is_unsigned(d) && (i + (size_t)r) % 5 == 0) ? -v : v;
  }
  if (op == PLAIT_OP_AVERAGE && ops_is_float(d)) {
    double base = (double)(i % 9) - 4;
    return base + (r == 0 ? -(n - 1) : 1);
  }
  double v = (double)((i * 7 + (size_t)r * 3) % 11);
  return ops_is_unsigned(d) ? v : v - 5;
}

static double expected_reduction(plait_dtype_t d, plait_op_t op, int n, size_t i) {
  double acc = value(d, op, 0, n, i);
  for (int r = 1; r < n; r++) {
    double v = value(d, op, r, n, i);
    switch (op) {
      case PLAIT_OP_SUM:
      case PLAIT_OP_AVERAGE: acc = d == PLAIT_BOOL ? (acc || v) : acc + v; break;
      case PLAIT_OP_MIN: acc = v < acc ? v : acc; break;
      case PLAIT_OP_MAX: acc = v > acc ? v : acc; break;
      case PLAIT_OP_PRODUCT: acc = d == PLAIT_BOOL ? (acc && v) : acc * v; break;
      default: break;
    }
  }
  if (op == PLAIT_OP_AVERAGE) acc = ops_is_float(d) ? acc / n : trunc(acc / n);
  return acc;
}

void tm_fill(plait_dtype_t d, plait_op_t op, int r, int n, void *buf,
                           size_t count, size_t offset) {
  for (size_t i = 0; i < count; i++) ops_put(d, buf, i, value(d, op, r, n, offset + i));
}

/* Index of the first element of buf that differs from the expected
 * reduction, or -1. */
long tm_check(plait_dtype_t d, plait_op_t op, int n, const void *buf,
                            size_t count, size_t offset) {
  for (size_t i = 0; i < count; i++)
    if (ops_get(d, buf, i) != expected_reduction(d, op, n, offset + i)) return (long)i;
  return -1;
}

/* A byte that says who wrote it, where. */
static unsigned char pattern(int writer, int reader, size_t i) {
  return (unsigned char)(writer * 37 + reader * 11 + i * 13 + 1);
}

/* ------------------------------------------------------------------------ */
/* allreduce                                                                 */
/* ------------------------------------------------------------------------ */

int tm_allreduce_one(tm_ctx_t *c, plait_dtype_t d, plait_op_t op, size_t count) {
  size_t es = plait_dtype_size(d);
  void *buf = count ? malloc(count * es) : NULL;
  REQUIRE(c, buf || !count, "out of memory");
  tm_fill(d, op, c->rank, c->nranks, buf, count, 0);
  plait_result_t rc = tc_allreduce(c->t, c->st, buf, count, d, op);
  long bad = rc == PLAIT_SUCCESS ? tm_check(d, op, c->nranks, buf, count, 0) : -1;
  double got = bad >= 0 ? ops_get(d, buf, (size_t)bad) : 0;
  free(buf);
  REQUIRE(c, rc == PLAIT_SUCCESS, "allreduce %s %s x%zu: %s: %s", plait_dtype_name(d),
          plait_op_name(op), count, plait_result_name(rc), c->t->last_error(c->st));
  REQUIRE(c, bad < 0, "allreduce %s %s x%zu: element %ld is %g, expected %g",
          plait_dtype_name(d), plait_op_name(op), count, bad, got,
          expected_reduction(d, op, c->nranks, (size_t)bad));
  return 0;
}

static int tm_allreduce_scaled(tm_ctx_t *c);

int tm_allreduce(tm_ctx_t *c) {
  const size_t counts[] = {0, 1, 1001, 4097};
  for (size_t di = 0; di < N_DTYPES; di++)
    for (size_t oi = 0; oi < N_OPS; oi++) {
      plait_dtype_t d = all_dtypes[di];
      plait_op_t op = all_ops[oi];
      if (d == PLAIT_BOOL && op == PLAIT_OP_AVERAGE) continue; /* rejected: see errors */
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        if (tm_allreduce_one(c, d, op, counts[k])) return 1;
    }
  /* 8 MiB: float32 and int64 x sum and max. */
  const plait_dtype_t big_d[] = {PLAIT_FLOAT32, PLAIT_INT64};
  const plait_op_t big_op[] = {PLAIT_OP_SUM, PLAIT_OP_MAX};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      if (tm_allreduce_one(c, big_d[i], big_op[j], BIG_BYTES / plait_dtype_size(big_d[i])))
        return 1;
  return tm_allreduce_scaled(c);
}

/* allreduce_scaled (a plugin that has it) against allreduce followed by the
 * core's scale kernel, bit for bit: what transport.h promises. Out of place
 * (send untouched) and in place. */
static int scaled_one(tm_ctx_t *c, plait_dtype_t d, plait_op_t op, size_t count, double post,
                      int inplace) {
  size_t bytes = count * plait_dtype_size(d);
  unsigned char *send = malloc(bytes + 1), *recv = malloc(bytes + 1), *want = malloc(bytes + 1);
  REQUIRE(c, send && recv && want, "out of memory");
  tm_fill(d, op, c->rank, c->nranks, send, count, 3);
  memcpy(want, send, bytes);
  memset(recv, 0xA5, bytes);
  if (inplace) memcpy(recv, send, bytes);
  plait_result_t rc = tc_allreduce(c->t, c->st, want, count, d, op);
  if (rc == PLAIT_SUCCESS && post != 1.0) rc = plait_scale(d, want, want, count, post);
  plait_result_t got = rc ? rc : tc_allreduce_scaled(c->t, c->st, inplace ? recv : send, recv,
                                                        count, d, op, post);
  long bad = -1;
  for (size_t i = 0; !rc && !got && i < bytes && bad < 0; i++)
    if (recv[i] != want[i]) bad = (long)(i / plait_dtype_size(d));
  tm_fill(d, op, c->rank, c->nranks, want, count, 3); /* send must still be this */
  int send_kept = inplace || got || !memcmp(send, want, bytes);
  free(send), free(recv), free(want);
  REQUIRE(c, rc == PLAIT_SUCCESS, "allreduce %s %s x%zu: %s: %s", plait_dtype_name(d),
          plait_op_name(op), count, plait_result_name(rc), c->t->last_error(c->st));
  REQUIRE(c, got == PLAIT_SUCCESS, "allreduce_scaled %s %s x%zu post %g: %s: %s",
          plait_dtype_name(d), plait_op_name(op), count, post, plait_result_name(got),
          c->t->last_error(c->st));
  REQUIRE(c, bad < 0, "allreduce_scaled %s %s x%zu post %g %s: element %ld differs from "
          "allreduce + the core's scale", plait_dtype_name(d), plait_op_name(op), count, post,
          inplace ? "in place" : "out of place", bad);
  REQUIRE(c, send_kept, "allreduce_scaled %s %s x%zu: send changed", plait_dtype_name(d),
          plait_op_name(op), count);
  return 0;
}

/* The one entry with a prescale too (a plugin with PLAIT_ALLREDUCE_SCALED
 * takes any): against the core's scale, allreduce in place, the core's
 * scale, bit for bit; out of place, send untouched. */
static int prescaled_one(tm_ctx_t *c, plait_dtype_t d, size_t count, double pre, double post) {
  size_t bytes = count * plait_dtype_size(d);
  unsigned char *send = malloc(bytes + 1), *recv = malloc(bytes + 1), *want = malloc(bytes + 1);
  REQUIRE(c, send && recv && want, "out of memory");
  tm_fill(d, PLAIT_OP_SUM, c->rank, c->nranks, send, count, 5);
  memcpy(want, send, bytes);
  plait_result_t rc = plait_scale(d, want, want, count, pre);
  if (rc == PLAIT_SUCCESS) rc = tc_allreduce(c->t, c->st, want, count, d, PLAIT_OP_SUM);
  if (rc == PLAIT_SUCCESS) rc = plait_scale(d, want, want, count, post);
  plait_span_t sp = {recv, send, count};
  plait_result_t got = rc ? rc : c->t->allreduce(c->st, &sp, 1, d, PLAIT_OP_SUM, pre, post);
  int same = !rc && !got && !memcmp(recv, want, bytes);
  tm_fill(d, PLAIT_OP_SUM, c->rank, c->nranks, want, count, 5);
  int send_kept = !memcmp(send, want, bytes);
  free(send), free(recv), free(want);
  REQUIRE(c, rc == PLAIT_SUCCESS && got == PLAIT_SUCCESS, "allreduce %s x%zu prescale %g "
          "postscale %g: %s / %s: %s", plait_dtype_name(d), count, pre, post,
          plait_result_name(rc), plait_result_name(got), c->t->last_error(c->st));
  REQUIRE(c, same, "allreduce %s x%zu prescale %g postscale %g differs from the core's scale, "
          "allreduce, scale", plait_dtype_name(d), count, pre, post);
  REQUIRE(c, send_kept, "allreduce %s x%zu with a prescale: send changed", plait_dtype_name(d),
          count);
  return 0;
}

static int tm_allreduce_scaled(tm_ctx_t *c) {
  if (!tc_scaled(c->t)) return 0;
  const plait_dtype_t pd[] = {PLAIT_FLOAT16, PLAIT_FLOAT32, PLAIT_FLOAT64, PLAIT_INT32};
  for (int i = 0; i < 4; i++)
    if (prescaled_one(c, pd[i], 1001, 2.0, 1.0 / 3) || prescaled_one(c, pd[i], 4097, 0.3, 1.0))
      return 1;
  const size_t counts[] = {0, 1, 1001, 4097};
  const double posts[] = {1.0, 0.5, 1.0 / 3};
  for (size_t di = 0; di < N_DTYPES; di++)
    for (size_t oi = 0; oi < N_OPS; oi++) {
      plait_dtype_t d = all_dtypes[di];
      plait_op_t op = all_ops[oi];
      if (d == PLAIT_BOOL) continue; /* not scaled: see errors */
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        if (scaled_one(c, d, op, counts[k], posts[k % 3], (int)(k % 2))) return 1;
    }
  /* bandwidth sizes (ofi: the ring), every float dtype, both ways */
  const plait_dtype_t fl[] = {PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32, PLAIT_FLOAT64};
  for (int i = 0; i < 4; i++)
    for (int ip = 0; ip < 2; ip++)
      if (scaled_one(c, fl[i], ip ? PLAIT_OP_AVERAGE : PLAIT_OP_SUM,
                     BIG_BYTES / plait_dtype_size(fl[i]) + 7, 1.0 / 3, ip))
        return 1;
  return tm_allreduce_spans(c);
}

/* ------------------------------------------------------------------------ */
/* allgatherv                                                                */
/* ------------------------------------------------------------------------ */

/* Rank r's part: odd ranks have none, one layout has only rank n-1. */
static size_t gather_part(int layout, int r, int n, size_t unit) {
  switch (layout) {
    case 0: return (r % 2) ? 0 : unit * (size_t)(r + 1) + 3;
    case 1: return r == n - 1 ? unit : 0;
    case 2: return unit + (size_t)r; /* all non-empty, unequal */
    default: return 0;                /* everything empty */
  }
}

static int allgatherv_one(tm_ctx_t *c, int layout, size_t unit) {
  size_t bytes[PLAIT_TEST_MAX_RANKS], total = 0, mine = 0;
  for (int r = 0; r < c->nranks; r++) {
    bytes[r] = gather_part(layout, r, c->nranks, unit);
    if (r < c->rank) mine += bytes[r];
    total += bytes[r];
  }
  unsigned char *buf = total ? malloc(total) : NULL;
  REQUIRE(c, buf || !total, "out of memory");
  if (buf) memset(buf, 0xee, total);
  for (size_t i = 0; i < bytes[c->rank]; i++) buf[mine + i] = pattern(c->rank, 0, i);
  CALL(c, "allgatherv", c->t->allgatherv(c->st, buf, bytes));
  size_t off = 0;
  for (int r = 0; r < c->nranks; r++) {
    for (size_t i = 0; i < bytes[r]; i++) {
      if (buf[off + i] != pattern(r, 0, i)) {
        free(buf);
        REQUIRE(c, 0, "allgatherv layout %d unit %zu: byte %zu of rank %d's part is wrong",
                layout, unit, i, r);
      }
    }
    off += bytes[r];
  }
  free(buf);
  return 0;
}

int tm_allgatherv(tm_ctx_t *c) {
  /* Element sizes of every dtype: 1, 2, 4 and 8 bytes, 1001 elements. */
  const size_t units[] = {1, 1001, 2 * 1001, 4 * 1001, 8 * 1001};
  for (int layout = 0; layout < 4; layout++)
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
      if (allgatherv_one(c, layout, units[k])) return 1;
  return allgatherv_one(c, 0, BIG_BYTES / (size_t)c->nranks);
}

/* ------------------------------------------------------------------------ */
/* broadcast                                                                 */
/* ------------------------------------------------------------------------ */

int tm_broadcast(tm_ctx_t *c) {
  const size_t sizes[] = {0, 1, 1001, 8 * 4097, BIG_BYTES};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    unsigned char *buf = n ? malloc(n) : NULL;
    REQUIRE(c, buf || !n, "out of memory");
    for (int root = 0; root < c->nranks; root++) {
      for (size_t i = 0; i < n; i++) buf[i] = pattern(c->rank, 1, i);
      CALL(c, "broadcast", c->t->broadcast(c->st, buf, n, root));
      for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(root, 1, i)) {
          free(buf);
          REQUIRE(c, 0, "broadcast of %zu bytes from root %d: byte %zu is wrong", n, root, i);
        }
    }
    free(buf);
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* alltoallv                                                                 */
/* ------------------------------------------------------------------------ */

/* Bytes rank `from` sends rank `to`: zero for some pairs, unequal others. */
static size_t split(int from, int to, size_t unit) {
  if ((from + 2 * to) % 3 == 0) return 0;
  return unit * (size_t)(1 + (from + to) % 3) + (size_t)from;
}

static int alltoallv_one(tm_ctx_t *c, size_t unit) {
  size_t sb[PLAIT_TEST_MAX_RANKS], rb[PLAIT_TEST_MAX_RANKS], ts = 0, tr = 0;
  for (int r = 0; r < c->nranks; r++) {
    sb[r] = split(c->rank, r, unit);
    rb[r] = split(r, c->rank, unit);
    ts += sb[r];
    tr += rb[r];
  }
  unsigned char *send = ts ? malloc(ts) : NULL, *recv = tr ? malloc(tr) : NULL;
  REQUIRE(c, (send || !ts) && (recv || !tr), "out of memory");
  size_t off = 0;
  for (int r = 0; r < c->nranks; r++)
    for (size_t i = 0; i < sb[r]; i++) send[off++] = pattern(c->rank, r, i);
  if (recv) memset(recv, 0xee, tr);
  plait_result_t rc = c->t->alltoallv(c->st, send, sb, recv, rb);
  int bad_from = -1;
  off = 0;
  for (int r = 0; rc == PLAIT_SUCCESS && r < c->nranks && bad_from < 0; r++)
    for (size_t i = 0; i < rb[r]; i++)
      if (recv[off++] != pattern(r, c->rank, i)) {
        bad_from = r;
        break;
      }
  free(send);
  free(recv);
  REQUIRE(c, rc == PLAIT_SUCCESS, "alltoallv unit %zu: %s: %s", unit, plait_result_name(rc),
          c->t->last_error(c->st));
  REQUIRE(c, bad_from < 0, "alltoallv unit %zu: the block from rank %d is wrong", unit,
          bad_from);
  return 0;
}

int tm_alltoallv(tm_ctx_t *c) {
  const size_t units[] = {0, 1, 1001, 8 * 1001};
  for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
    if (alltoallv_one(c, units[k])) return 1;
  /* About 8 MiB sent per rank. */
  return alltoallv_one(c, BIG_BYTES / (2 * (size_t)c->nranks));
}

/* ------------------------------------------------------------------------ */
/* reducescatter                                                             */
/* ------------------------------------------------------------------------ */

static int reducescatter_one(tm_ctx_t *c, plait_dtype_t d, plait_op_t op,
                             const size_t *counts) {
  size_t es = plait_dtype_size(d), total = 0, mine_at = 0;
  for (int r = 0; r < c->nranks; r++) {
    if (r < c->rank) mine_at += counts[r];
    total += counts[r];
  }
  size_t mine = counts[c->rank];
  void *send = total ? malloc(total * es) : NULL;
  void *recv = mine ? malloc(mine * es) : NULL;
  REQUIRE(c, (send || !total) && (recv || !mine), "out of memory");
  tm_fill(d, op, c->rank, c->nranks, send, total, 0);
  plait_result_t rc = c->t->reducescatter(c->st, send, recv, counts, d, op);
  long bad = rc == PLAIT_SUCCESS ? tm_check(d, op, c->nranks, recv, mine, mine_at) : -1;
  free(send);
  free(recv);
  REQUIRE(c, rc == PLAIT_SUCCESS, "reducescatter %s %s: %s: %s", plait_dtype_name(d),
          plait_op_name(op), plait_result_name(rc), c->t->last_error(c->st));
  REQUIRE(c, bad < 0, "reducescatter %s %s (%zu of %zu elements here): element %ld is wrong",
          plait_dtype_name(d), plait_op_name(op), mine, total, bad);
  return 0;
}

int tm_reducescatter(tm_ctx_t *c) {
  size_t uneven[PLAIT_TEST_MAX_RANKS], none[PLAIT_TEST_MAX_RANKS] = {0};
  size_t big[PLAIT_TEST_MAX_RANKS];
  for (int r = 0; r < c->nranks; r++) {
    uneven[r] = r == 1 ? 0 : 1001 + 2 * (size_t)r; /* rank 1 receives nothing */
    big[r] = BIG_BYTES / 4 / (size_t)c->nranks + (size_t)r;
  }
  size_t one[PLAIT_TEST_MAX_RANKS] = {0};
  one[c->nranks - 1] = 1;
  for (size_t di = 0; di < N_DTYPES; di++)
    for (size_t oi = 0; oi < N_OPS; oi++) {
      plait_dtype_t d = all_dtypes[di];
      plait_op_t op = all_ops[oi];
      if (d == PLAIT_BOOL && op == PLAIT_OP_AVERAGE) continue;
      if (reducescatter_one(c, d, op, uneven) || reducescatter_one(c, d, op, one) ||
          reducescatter_one(c, d, op, none))
        return 1;
    }
  return reducescatter_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, big);
}

/* ------------------------------------------------------------------------ */
/* barrier, arguments, memory                                                */
/* ------------------------------------------------------------------------ */

int tm_barrier(tm_ctx_t *c) {
  for (int i = 0; i < 20; i++) CALL(c, "barrier", c->t->barrier(c->st));
  return 0;
}

/* A call that must fail with `want` and a message that mentions `word`. */
#define REJECT(c, want, word, expr)                                            \
  do {                                                                         \
    plait_result_t rc_ = (expr);                                               \
    const char *msg_ = (c)->t->last_error((c)->st);                            \
    REQUIRE(c, rc_ == (want) && strstr(msg_, word) != NULL,                    \
            "%s gave %s \"%s\", expected %s naming '%s'", #expr,               \
            plait_result_name(rc_), msg_, plait_result_name(want), word);      \
  } while (0)

int tm_errors(tm_ctx_t *c) {
  const plait_transport_t *t = c->t;
  REQUIRE(c, t->abi_version == PLAIT_TRANSPORT_ABI_VERSION, "abi_version %u", t->abi_version);
  uint64_t caps = PLAIT_CAP_HOST_MEMORY | PLAIT_CAP_ALLREDUCE | PLAIT_CAP_ALLGATHERV |
                  PLAIT_CAP_BROADCAST | PLAIT_CAP_ALLTOALLV | PLAIT_CAP_REDUCESCATTER |
                  PLAIT_CAP_BARRIER;
  REQUIRE(c, t->caps == caps, "caps 0x%llx", (unsigned long long)t->caps);
  REQUIRE(c, t->dtypes == (1u << PLAIT_DTYPE_COUNT_) - 1, "dtypes 0x%x", t->dtypes);
  REQUIRE(c, t->ops == (1u << PLAIT_OP_COUNT_) - 1, "ops 0x%x", t->ops);

  int32_t x[4] = {1, 2, 3, 4};
  size_t counts[PLAIT_TEST_MAX_RANKS];
  for (int r = 0; r < c->nranks; r++) counts[r] = 1;
  const plait_result_t inval = PLAIT_ERR_INVALID_ARGUMENT;
  REJECT(c, inval, "buf", tc_allreduce(t, c->st, NULL, 5, PLAIT_INT32, PLAIT_OP_SUM));
  REJECT(c, inval, "average", tc_allreduce(t, c->st, x, 4, PLAIT_BOOL, PLAIT_OP_AVERAGE));
  REJECT(c, inval, "average", t->reducescatter(c->st, x, x + 3, counts, PLAIT_BOOL,
                                                PLAIT_OP_AVERAGE));
  REJECT(c, inval, "dtype", tc_allreduce(t, c->st, x, 4, PLAIT_DTYPE_COUNT_, PLAIT_OP_SUM));
  REJECT(c, inval, "op", tc_allreduce(t, c->st, x, 4, PLAIT_INT32, PLAIT_OP_COUNT_));
  REJECT(c, inval, "root", t->broadcast(c->st, x, 4, c->nranks));
  REJECT(c, inval, "root", t->broadcast(c->st, x, 0, -1));
  REJECT(c, inval, "bytes", t->allgatherv(c->st, x, NULL));
  REJECT(c, inval, "counts", t->reducescatter(c->st, x, x + 3, NULL, PLAIT_INT32,
                                               PLAIT_OP_SUM));
  REJECT(c, inval, "overlap", t->reducescatter(c->st, x, x, counts, PLAIT_INT32,
                                                PLAIT_OP_SUM));

  /* Still usable after rejected calls. */
  if (tm_allreduce_one(c, PLAIT_INT32, PLAIT_OP_SUM, 7)) return 1;

  void *p = NULL;
  CALL(c, "mem_alloc", t->mem_alloc(c->st, 1001, &p));
  REQUIRE(c, p != NULL && ((uintptr_t)p % 64) == 0, "mem_alloc gave %p", p);
  char src[1001];
  memset(src, 0x5a, sizeof src);
  CALL(c, "mem_copy", t->mem_copy(c->st, p, src, sizeof src, PLAIT_COPY_HOST_TO_HOST));
  REQUIRE(c, memcmp(p, src, sizeof src) == 0, "mem_copy did not copy");
  REJECT(c, PLAIT_ERR_UNSUPPORTED, "host", t->mem_copy(c->st, p, src, 8,
                                                       PLAIT_COPY_DEVICE_TO_HOST));
  CALL(c, "mem_free", t->mem_free(c->st, p));
  CALL(c, "mem_free(NULL)", t->mem_free(c->st, NULL));
  return 0;
}

/* ------------------------------------------------------------------------ */
/* A rank lost mid-job                                                       */
/* ------------------------------------------------------------------------ */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *kill_soon(void *arg) {
  (void)arg;
  usleep(30 * 1000);
  raise(SIGKILL);
  return NULL;
}

/* The allreduce of a lost-rank job: over the buffer, or (TM_KILLED_MID_SPANS,
 * a plugin that has it) over the buffer cut into 256 spans. */
static plait_result_t lost_allreduce(tm_ctx_t *c, tm_loss_t how, float *buf, size_t count) {
  if (how != TM_KILLED_MID_SPANS || !tc_spans(c->t))
    return tc_allreduce(c->t, c->st, buf, count, PLAIT_FLOAT32, PLAIT_OP_SUM);
  plait_span_t s[256];
  size_t per = count / 256;
  for (size_t i = 0; i < 256; i++)
    s[i] = (plait_span_t){buf + i * per, buf + i * per, i == 255 ? count - 255 * per : per};
  return tc_allreduce_spans(c->t, c->st, s, 256, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0);
}

/* What the last rank does instead of its next allreduce. */
static void lose_rank(tm_ctx_t *c, tm_loss_t how, float *buf, size_t count) {
  if (how == TM_KILLED_BETWEEN_OPS) raise(SIGKILL);
  if (how == TM_HUNG) {
    sleep(TM_PEER_TIMEOUT_S + 2); /* silent past the timeout, then gone */
    _exit(0);
  }
  pthread_t killer;
  pthread_create(&killer, NULL, kill_soon, NULL);
  for (;;) lost_allreduce(c, how, buf, count);
}

static int lost_rank(int rank, int nranks, void *arg) {
  const tm_arg_t *a = arg;
  tm_loss_t how = (tm_loss_t)(intptr_t)a->extra;
  tm_ctx_t c = {rank, nranks, NULL, NULL};
  if (start_rank(rank, a, &c)) return 1;
  size_t count = 16 * MIB; /* 64 MiB of float32: long enough to die in */
  float *buf = calloc(count, sizeof *buf);
  if (!buf) return 1;
  CALL(&c, "allreduce", tc_allreduce(c.t, c.st, buf, 1001, PLAIT_FLOAT32, PLAIT_OP_SUM));
  if (rank == nranks - 1) lose_rank(&c, how, buf, count);
  double took = 0;
  plait_result_t rc = PLAIT_SUCCESS;
  for (int i = 0; i < 50 && rc == PLAIT_SUCCESS; i++) {
    double t0 = now_s();
    rc = lost_allreduce(&c, how, buf, count);
    took = now_s() - t0;
  }
  const char *msg = c.t->last_error(c.st);
  plait_test_say(rank, "after %.2f s: %s: %s", took, plait_result_name(rc), msg);
  REQUIRE(&c, rc == PLAIT_ERR_PEER_LOST, "expected PLAIT_ERR_PEER_LOST");
  REQUIRE(&c, took < 3 * TM_PEER_TIMEOUT_S, "took %.1f s for a timeout of %d s", took,
          TM_PEER_TIMEOUT_S);
  rc = lost_allreduce(&c, how, buf, count);
  REQUIRE(&c, rc == PLAIT_ERR_PEER_LOST, "a broken context must keep failing, got %s",
          plait_result_name(rc));
  free(buf);
  plait_shutdown(); /* may report the lost rank; must return */
  return 0;
}

int tm_run_lost_rank(const char *transport, int nranks, tm_loss_t how, const char *const *env,
                     plait_test_job_t *job, char *reason, size_t reason_len) {
  const char *all[24];
  job_env(transport, "PLAIT_TIMEOUT_S=5", env, all, 24);
  tm_shared_t *sh = shared_new();
  if (!sh) return TM_FAILED;
  memset(job, 0, sizeof *job);
  job->nranks = nranks;
  job->timeout_s = 40;
  job->env = all;
  tm_arg_t arg = {transport, NULL, sh, (void *)(intptr_t)how};
  plait_test_run_ranks(job, lost_rank, &arg);
  job->env = NULL;
  int rc = skipped(sh, nranks, reason, reason_len) ? TM_SKIPPED : TM_PASSED;
  munmap(sh, sizeof *sh);
  return rc;
}

int tm_check_lost_rank(const plait_test_job_t *job, int nranks, tm_loss_t how, char *why,
                       size_t why_len) {
  for (int r = 0; r < nranks - 1; r++) {
    if (job->exit_code[r] != 0) {
      snprintf(why, why_len, "surviving rank %d exited with %d", r, job->exit_code[r]);
      return -1;
    }
  }
  int last = job->status[nranks - 1];
  if (how == TM_HUNG && job->exit_code[nranks - 1] != 0) {
    snprintf(why, why_len, "the hung rank should have exited 0, not %d", job->exit_code[nranks - 1]);
    return -1;
  }
  if (how != TM_HUNG && (last == -1 || !WIFSIGNALED(last))) {
    snprintf(why, why_len, "the last rank should have died of SIGKILL (status %d)", last);
    return -1;
  }
  return 0;
}
