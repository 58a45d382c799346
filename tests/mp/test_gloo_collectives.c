/*
 * The gloo transport plugin, called directly: each test forks real ranks on
 * loopback, which plait_init() (PLAIT_TRANSPORT unset: gloo) and then call
 * the plugin's collectives through plait_core_transport(), checking exact
 * results. 2, 3 and 4 ranks; sizes 0, 1, odd and not divisible by the rank
 * count (1001, 4097), and 8 MiB for a subset; every dtype and op.
 *
 * Data are small integers, so that every reduction is exact in every dtype
 * (float16 and bfloat16 included) and the expected value can be computed in
 * double.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "plait/plait.h"
#include "plait/transport.h"
#include "dtype_util.h"
#include "ranks.h"

#define MIB (1024u * 1024u)
#define BIG_BYTES (8u * MIB)

/* ------------------------------------------------------------------------ */
/* Running a rank                                                            */
/* ------------------------------------------------------------------------ */

typedef struct rank_ctx {
  int rank, nranks;
  const plait_transport_t *t;
  void *st;
} rank_ctx_t;

typedef int (*body_fn)(rank_ctx_t *c);
typedef struct job_arg {
  body_fn body; /* what each rank runs between plait_init and plait_shutdown */
} job_arg_t;

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

static int run_rank(int rank, int nranks, void *arg) {
  body_fn body = ((const job_arg_t *)arg)->body;
  plait_result_t rc = plait_init();
  if (rc != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
    return 1;
  }
  rank_ctx_t c = {rank, nranks, NULL, NULL};
  c.t = plait_core_transport(&c.st);
  int fails = 0;
  if (c.t == NULL || strcmp(c.t->name, "gloo") != 0) {
    plait_test_say(rank, "the loaded transport is %s, not gloo", c.t ? c.t->name : "none");
    fails = 1;
  } else {
    fails = body(&c);
  }
  rc = plait_shutdown();
  if (rc != PLAIT_SUCCESS && !fails) {
    plait_test_say(rank, "plait_shutdown: %s: %s", plait_result_name(rc), plait_last_error());
    fails = 1;
  }
  return fails;
}

/* A rank that fails returns early; the others then fail with
 * PLAIT_ERR_PEER_LOST after PLAIT_TIMEOUT_S, well before the job's timeout. */
static void run_job(int nranks, body_fn body) {
  const char *env[] = {"PLAIT_TIMEOUT_S=15", NULL};
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = nranks;
  job.timeout_s = 50;
  job.env = env;
  job_arg_t arg = {body};
  int rc = plait_test_run_ranks(&job, run_rank, &arg);
  cr_assert_eq(rc, 0, "a rank of %d failed (see its messages above)", nranks);
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

static void fill_reduction(plait_dtype_t d, plait_op_t op, int r, int n, void *buf,
                           size_t count, size_t offset) {
  for (size_t i = 0; i < count; i++) ops_put(d, buf, i, value(d, op, r, n, offset + i));
}

/* Index of the first element of buf that differs from the expected
 * reduction, or -1. */
static long check_reduction(plait_dtype_t d, plait_op_t op, int n, const void *buf,
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

static int allreduce_one(rank_ctx_t *c, plait_dtype_t d, plait_op_t op, size_t count) {
  size_t es = plait_dtype_size(d);
  void *buf = count ? malloc(count * es) : NULL;
  REQUIRE(c, buf || !count, "out of memory");
  fill_reduction(d, op, c->rank, c->nranks, buf, count, 0);
  plait_result_t rc = c->t->allreduce(c->st, buf, count, d, op);
  long bad = rc == PLAIT_SUCCESS ? check_reduction(d, op, c->nranks, buf, count, 0) : -1;
  double got = bad >= 0 ? ops_get(d, buf, (size_t)bad) : 0;
  free(buf);
  REQUIRE(c, rc == PLAIT_SUCCESS, "allreduce %s %s x%zu: %s: %s", plait_dtype_name(d),
          plait_op_name(op), count, plait_result_name(rc), c->t->last_error(c->st));
  REQUIRE(c, bad < 0, "allreduce %s %s x%zu: element %ld is %g, expected %g",
          plait_dtype_name(d), plait_op_name(op), count, bad, got,
          expected_reduction(d, op, c->nranks, (size_t)bad));
  return 0;
}

static int body_allreduce(rank_ctx_t *c) {
  const size_t counts[] = {0, 1, 1001, 4097};
  for (size_t di = 0; di < N_DTYPES; di++)
    for (size_t oi = 0; oi < N_OPS; oi++) {
      plait_dtype_t d = all_dtypes[di];
      plait_op_t op = all_ops[oi];
      if (d == PLAIT_BOOL && op == PLAIT_OP_AVERAGE) continue; /* rejected: see errors */
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        if (allreduce_one(c, d, op, counts[k])) return 1;
    }
  /* 8 MiB: float32 and int64 x sum and max. */
  const plait_dtype_t big_d[] = {PLAIT_FLOAT32, PLAIT_INT64};
  const plait_op_t big_op[] = {PLAIT_OP_SUM, PLAIT_OP_MAX};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      if (allreduce_one(c, big_d[i], big_op[j], BIG_BYTES / plait_dtype_size(big_d[i])))
        return 1;
  return 0;
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

static int allgatherv_one(rank_ctx_t *c, int layout, size_t unit) {
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

static int body_allgatherv(rank_ctx_t *c) {
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

static int body_broadcast(rank_ctx_t *c) {
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

static int alltoallv_one(rank_ctx_t *c, size_t unit) {
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

static int body_alltoallv(rank_ctx_t *c) {
  const size_t units[] = {0, 1, 1001, 8 * 1001};
  for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
    if (alltoallv_one(c, units[k])) return 1;
  /* About 8 MiB sent per rank. */
  return alltoallv_one(c, BIG_BYTES / (2 * (size_t)c->nranks));
}

/* ------------------------------------------------------------------------ */
/* reducescatter                                                             */
/* ------------------------------------------------------------------------ */

static int reducescatter_one(rank_ctx_t *c, plait_dtype_t d, plait_op_t op,
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
  fill_reduction(d, op, c->rank, c->nranks, send, total, 0);
  plait_result_t rc = c->t->reducescatter(c->st, send, recv, counts, d, op);
  long bad = rc == PLAIT_SUCCESS ? check_reduction(d, op, c->nranks, recv, mine, mine_at) : -1;
  free(send);
  free(recv);
  REQUIRE(c, rc == PLAIT_SUCCESS, "reducescatter %s %s: %s: %s", plait_dtype_name(d),
          plait_op_name(op), plait_result_name(rc), c->t->last_error(c->st));
  REQUIRE(c, bad < 0, "reducescatter %s %s (%zu of %zu elements here): element %ld is wrong",
          plait_dtype_name(d), plait_op_name(op), mine, total, bad);
  return 0;
}

static int body_reducescatter(rank_ctx_t *c) {
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

static int body_barrier(rank_ctx_t *c) {
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

static int body_errors(rank_ctx_t *c) {
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
  REJECT(c, inval, "buf", t->allreduce(c->st, NULL, 5, PLAIT_INT32, PLAIT_OP_SUM));
  REJECT(c, inval, "average", t->allreduce(c->st, x, 4, PLAIT_BOOL, PLAIT_OP_AVERAGE));
  REJECT(c, inval, "average", t->reducescatter(c->st, x, x + 3, counts, PLAIT_BOOL,
                                                PLAIT_OP_AVERAGE));
  REJECT(c, inval, "dtype", t->allreduce(c->st, x, 4, PLAIT_DTYPE_COUNT_, PLAIT_OP_SUM));
  REJECT(c, inval, "op", t->allreduce(c->st, x, 4, PLAIT_INT32, PLAIT_OP_COUNT_));
  REJECT(c, inval, "root", t->broadcast(c->st, x, 4, c->nranks));
  REJECT(c, inval, "root", t->broadcast(c->st, x, 0, -1));
  REJECT(c, inval, "bytes", t->allgatherv(c->st, x, NULL));
  REJECT(c, inval, "counts", t->reducescatter(c->st, x, x + 3, NULL, PLAIT_INT32,
                                               PLAIT_OP_SUM));
  REJECT(c, inval, "overlap", t->reducescatter(c->st, x, x, counts, PLAIT_INT32,
                                                PLAIT_OP_SUM));

  /* Still usable after rejected calls. */
  if (allreduce_one(c, PLAIT_INT32, PLAIT_OP_SUM, 7)) return 1;

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

#define PEER_TIMEOUT_S 5

typedef enum { KILLED_BETWEEN_OPS, KILLED_MID_ALLREDUCE, HUNG } loss_t;

static void *kill_soon(void *arg) {
  (void)arg;
  usleep(30 * 1000);
  raise(SIGKILL);
  return NULL;
}

/* What the last rank does instead of its next allreduce. */
static void lose_rank(rank_ctx_t *c, loss_t how, float *buf, size_t count) {
  if (how == KILLED_BETWEEN_OPS) raise(SIGKILL);
  if (how == HUNG) {
    sleep(PEER_TIMEOUT_S + 2); /* silent past the timeout, then gone */
    _exit(0);
  }
  pthread_t killer;
  pthread_create(&killer, NULL, kill_soon, NULL);
  for (;;) c->t->allreduce(c->st, buf, count, PLAIT_FLOAT32, PLAIT_OP_SUM);
}

/* The last rank is lost after one allreduce: killed (SIGKILL: no shutdown,
 * its sockets closed by the kernel) before or during the next one, or hung.
 * The others' allreduce must fail with PLAIT_ERR_PEER_LOST within about the
 * timeout, and every later one fail fast. */
static int lost_rank(int rank, int nranks, void *arg) {
  loss_t how = (loss_t)(intptr_t)arg;
  plait_result_t rc = plait_init();
  if (rc != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
    return 1;
  }
  rank_ctx_t c = {rank, nranks, NULL, NULL};
  c.t = plait_core_transport(&c.st);
  if (c.t == NULL) return 1;
  size_t count = 16 * MIB; /* 64 MiB of float32: long enough to die in */
  float *buf = calloc(count, sizeof *buf);
  if (!buf) return 1;
  CALL(&c, "allreduce", c.t->allreduce(c.st, buf, 1001, PLAIT_FLOAT32, PLAIT_OP_SUM));
  if (rank == nranks - 1) lose_rank(&c, how, buf, count);
  double took = 0;
  for (int i = 0; i < 50 && rc == PLAIT_SUCCESS; i++) {
    double t0 = now_s();
    rc = c.t->allreduce(c.st, buf, count, PLAIT_FLOAT32, PLAIT_OP_SUM);
    took = now_s() - t0;
  }
  const char *msg = c.t->last_error(c.st);
  plait_test_say(rank, "after %.2f s: %s: %s", took, plait_result_name(rc), msg);
  REQUIRE(&c, rc == PLAIT_ERR_PEER_LOST, "expected PLAIT_ERR_PEER_LOST");
  REQUIRE(&c, took < 3 * PEER_TIMEOUT_S, "took %.1f s for a timeout of %d s", took,
          PEER_TIMEOUT_S);
  rc = c.t->allreduce(c.st, buf, count, PLAIT_FLOAT32, PLAIT_OP_SUM);
  REQUIRE(&c, rc == PLAIT_ERR_PEER_LOST, "a broken context must keep failing, got %s",
          plait_result_name(rc));
  free(buf);
  plait_shutdown(); /* may report the lost rank; must return */
  return 0;
}

static void run_lost_rank(int nranks, loss_t how) {
  const char *env[] = {"PLAIT_TIMEOUT_S=5", NULL};
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = nranks;
  job.timeout_s = 40;
  job.env = env;
  plait_test_run_ranks(&job, lost_rank, (void *)(intptr_t)how);
  for (int r = 0; r < nranks - 1; r++)
    cr_expect_eq(job.exit_code[r], 0, "surviving rank %d exited with %d", r, job.exit_code[r]);
  int last = job.status[nranks - 1];
  if (how == HUNG)
    cr_expect_eq(job.exit_code[nranks - 1], 0, "the hung rank should have exited 0");
  else
    cr_expect(last != -1 && WIFSIGNALED(last), "the last rank should have died of SIGKILL");
}

/* ------------------------------------------------------------------------ */
/* The matrix                                                                */
/* ------------------------------------------------------------------------ */

#define PER_RANK_COUNT(name, body)                                \
  Test(gloo, name##_2ranks, .timeout = 60) { run_job(2, body); }  \
  Test(gloo, name##_3ranks, .timeout = 60) { run_job(3, body); }  \
  Test(gloo, name##_4ranks, .timeout = 60) { run_job(4, body); }

PER_RANK_COUNT(allreduce, body_allreduce)
PER_RANK_COUNT(allgatherv, body_allgatherv)
PER_RANK_COUNT(broadcast, body_broadcast)
PER_RANK_COUNT(alltoallv, body_alltoallv)
PER_RANK_COUNT(reducescatter, body_reducescatter)
PER_RANK_COUNT(barrier, body_barrier)

/* A job of one rank: the plugin makes no device, every call is local. */
static int body_single(rank_ctx_t *c) {
  return body_allreduce(c) || body_allgatherv(c) || body_broadcast(c) ||
         body_alltoallv(c) || body_reducescatter(c) || body_barrier(c) ||
         body_errors(c);
}

/* These tests call the plugin directly from the main thread: no coordinator. */
static void no_coordinator(void) { plait_core_test_without_coordinator(1); }
TestSuite(gloo, .init = no_coordinator);

Test(gloo, everything_1rank, .timeout = 60) { run_job(1, body_single); }

Test(gloo, errors_and_memory_2ranks, .timeout = 60) { run_job(2, body_errors); }
Test(gloo, errors_and_memory_3ranks, .timeout = 60) { run_job(3, body_errors); }

Test(gloo, rank_killed_between_ops_2ranks, .timeout = 60) {
  run_lost_rank(2, KILLED_BETWEEN_OPS);
}
Test(gloo, rank_killed_mid_allreduce_3ranks, .timeout = 60) {
  run_lost_rank(3, KILLED_MID_ALLREDUCE);
}
Test(gloo, rank_hung_3ranks, .timeout = 60) { run_lost_rank(3, HUNG); }
