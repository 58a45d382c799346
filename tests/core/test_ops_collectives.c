/*
 * allgather, broadcast, alltoall, reducescatter and barrier through the
 * public C ABI, with real ranks forked on loopback (gloo transport), at 2, 3
 * and 4 ranks, checked exactly: output shapes from plait_handle_output,
 * plait_handle_splits, and every element computed from the sending rank and
 * its position.
 */
#include <criterion/criterion.h>

#include "ops_util.h"

static const char *const no_env[] = {NULL};

static void run(int nranks, ops_body_fn body, const char *what) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(nranks, no_env, 60, body, NULL), 0, "%s, %d ranks: a rank failed (see above)",
               what, nranks);
}

#define RANK_TESTS(suite, name, body)                                          \
  Test(suite, name##_2ranks, .timeout = 90) { run(2, body, #name); }           \
  Test(suite, name##_3ranks, .timeout = 90) { run(3, body, #name); }           \
  Test(suite, name##_4ranks, .timeout = 90) { run(4, body, #name); }

/* Elements of a shape. */
static size_t elements(int ndim, const int64_t *shape) {
  size_t c = 1;
  for (int i = 0; i < ndim; i++) c *= (size_t)shape[i];
  return c;
}

/* A value that fits every dtype exactly (bool: 0/1). */
static double small(plait_dtype_t d, long v) {
  v %= 50;
  if (v < 0) v += 50;
  return d == PLAIT_BOOL ? (double)(v & 1) : (double)v;
}

/* ------------------------------------------------------------------------ */
/* allgather                                                                 */
/* ------------------------------------------------------------------------ */

/* Rows rank r contributes to allgather k: rank 1 gives none in k = 0..2;
 * k = 3 is 1-D with rows r + 1 everywhere; k = 4 is empty on every rank. */
static int64_t ag_rows(int k, int r) {
  if (k == 4) return 0;
  if (k == 3) return r + 1;
  return r == 1 ? 0 : r + 2;
}

static double ag_value(plait_dtype_t d, int r, int64_t row, size_t j) {
  return small(d, r * 31 + (long)row * 7 + (long)j);
}

static int allgather_body(int rank, int n, void *arg) {
  (void)arg;
  enum { NAG = 5 };
  static const plait_dtype_t dts[NAG] = {PLAIT_UINT8, PLAIT_INT32, PLAIT_FLOAT16, PLAIT_FLOAT64,
                                         PLAIT_BOOL};
  plait_handle_t *h[NAG];
  void *bufs[NAG];
  plait_tensor_t in[NAG];
  for (int k = 0; k < NAG; k++) {
    plait_dtype_t d = dts[k];
    memset(&in[k], 0, sizeof in[k]);
    in[k].struct_size = sizeof in[k];
    in[k].dtype = d;
    in[k].device = PLAIT_DEVICE_HOST;
    if (k == 3) {
      in[k].ndim = 1;
    } else { /* rows of [3][2] */
      in[k].ndim = 3;
      in[k].shape[1] = 3;
      in[k].shape[2] = 2;
    }
    in[k].shape[0] = ag_rows(k, rank);
    size_t per_row = elements(in[k].ndim - 1, in[k].shape + 1), count = elements(in[k].ndim, in[k].shape);
    bufs[k] = count ? malloc(ops_bytes(d, count)) : NULL; /* NULL data for no rows */
    CHECK(bufs[k] || !count, "out of memory");
    for (size_t e = 0; e < count; e++)
      ops_put(d, bufs[k], e, ag_value(d, rank, (int64_t)(e / per_row), e % per_row));
    in[k].data = bufs[k];
    char name[32];
    snprintf(name, sizeof name, "ag/%d/%s", k, plait_dtype_name(d));
    OK(plait_allgather_async(name, &in[k], NULL, &h[k]));
  }
  for (int k = 0; k < NAG; k++) {
    plait_dtype_t d = dts[k];
    OK(plait_wait(h[k], 30));
    plait_tensor_t out;
    OK(plait_handle_output(h[k], &out));
    int64_t total = 0;
    for (int r = 0; r < n; r++) total += ag_rows(k, r);
    CHECK(out.dtype == d && out.ndim == in[k].ndim && out.shape[0] == total,
          "allgather %d (%s): output dtype %d ndim %d rows %lld, expected %d, %d, %lld", k,
          plait_dtype_name(d), out.dtype, out.ndim, (long long)out.shape[0], d, in[k].ndim,
          (long long)total);
    for (int i = 1; i < out.ndim; i++)
      CHECK(out.shape[i] == in[k].shape[i], "allgather %d: shape[%d] is %lld, expected %lld", k,
            i, (long long)out.shape[i], (long long)in[k].shape[i]);
    CHECK(out.data || total == 0, "allgather %d: output data NULL for %lld rows", k,
          (long long)total);
    size_t per_row = elements(in[k].ndim - 1, in[k].shape + 1), e = 0;
    for (int r = 0; r < n; r++)
      for (int64_t row = 0; row < ag_rows(k, r); row++)
        for (size_t j = 0; j < per_row; j++, e++) {
          double got = ops_get(d, out.data, e), want = ag_value(d, r, row, j);
          CHECK(got == want, "allgather %d (%s): element %zu (rank %d's row %lld, [%zu]) is %g, "
                "expected %g", k, plait_dtype_name(d), e, r, (long long)row, j, got, want);
        }
    plait_release(h[k]);
    free(bufs[k]);
  }
  return 0;
}

RANK_TESTS(ops_collectives, allgather_uneven_rows, allgather_body)

/* ------------------------------------------------------------------------ */
/* broadcast                                                                 */
/* ------------------------------------------------------------------------ */

static int broadcast_body(int rank, int n, void *arg) {
  (void)arg;
  enum { NBC = 6 };
  static const plait_dtype_t dts[NBC] = {PLAIT_INT8,    PLAIT_FLOAT32, PLAIT_BFLOAT16,
                                         PLAIT_INT64,   PLAIT_BOOL,    PLAIT_FLOAT64};
  int total = n * NBC;
  plait_handle_t **h = calloc((size_t)total, sizeof *h);
  void **bufs = calloc((size_t)total, sizeof *bufs);
  CHECK(h && bufs, "out of memory");
  for (int root = 0; root < n; root++)
    for (int k = 0; k < NBC; k++) {
      int idx = root * NBC + k;
      plait_dtype_t d = dts[k];
      plait_tensor_t t;
      if (k == NBC - 1) { /* 2-D [7][5] */
        memset(&t, 0, sizeof t);
        t.struct_size = sizeof t;
        t.dtype = d;
        t.device = PLAIT_DEVICE_HOST;
        t.ndim = 2;
        t.shape[0] = 7;
        t.shape[1] = 5;
      } else {
        OK(plait_tensor_1d(&t, NULL, 1001, d));
      }
      size_t count = elements(t.ndim, t.shape);
      CHECK((bufs[idx] = malloc(ops_bytes(d, count))) != NULL, "out of memory");
      t.data = bufs[idx];
      for (size_t i = 0; i < count; i++) { /* elsewhere: a value the root never sends */
        double v = small(d, root * 13 + (long)i);
        ops_put(d, t.data, i, rank == root ? v : d == PLAIT_BOOL ? 1 - v : -1);
      }
      char name[48];
      snprintf(name, sizeof name, "bc/root%d/%s/%d", root, plait_dtype_name(d), k);
      OK(plait_broadcast_async(name, &t, root, NULL, &h[idx]));
    }
  for (int root = 0; root < n; root++)
    for (int k = 0; k < NBC; k++) {
      int idx = root * NBC + k;
      plait_dtype_t d = dts[k];
      OK(plait_wait(h[idx], 30));
      plait_tensor_t out;
      OK(plait_handle_output(h[idx], &out));
      CHECK(out.data == bufs[idx] && out.dtype == d, "broadcast output is not the tensor given");
      size_t count = elements(out.ndim, out.shape);
      CHECK(count == (k == NBC - 1 ? 35u : 1001u), "broadcast output of %zu elements", count);
      for (size_t i = 0; i < count; i++) {
        double got = ops_get(d, bufs[idx], i), want = small(d, root * 13 + (long)i);
        CHECK(got == want, "broadcast from root %d (%s): element %zu is %g, expected %g", root,
              plait_dtype_name(d), i, got, want);
      }
      plait_release(h[idx]);
      free(bufs[idx]);
    }
  free(h);
  free(bufs);
  return 0;
}

RANK_TESTS(ops_collectives, broadcast_every_root, broadcast_body)

/* ------------------------------------------------------------------------ */
/* alltoall                                                                  */
/* ------------------------------------------------------------------------ */

enum { A2A_COLS = 4 };

/* Rows sender r sends receiver q in variant v: 0 explicit unequal with
 * zeros; 1 NULL splits (2 each); 2 rank 1 sends nothing at all. */
static int64_t a2a_split(int v, int r, int q) {
  if (v == 1) return 2;
  if (v == 2 && r == 1) return 0;
  return (r + q) % 3;
}

static double a2a_value(plait_dtype_t d, int r, int q, int64_t row, int c) {
  double v = (double)(r * 1000 + q * 100 + row * A2A_COLS + c);
  return d == PLAIT_UINT8 ? (double)((long)v % 256) : v;
}

static int alltoall_one(int rank, int n, int v, plait_dtype_t d) {
  int64_t rows = 0, splits[PLAIT_TEST_MAX_RANKS];
  for (int q = 0; q < n; q++) rows += splits[q] = a2a_split(v, rank, q);
  int two_d = d != PLAIT_UINT8;
  size_t cols = two_d ? A2A_COLS : 1;
  void *buf = rows ? malloc(ops_bytes(d, (size_t)rows * cols)) : NULL;
  CHECK(buf || !rows, "out of memory");
  size_t e = 0;
  for (int q = 0; q < n; q++)
    for (int64_t j = 0; j < splits[q]; j++)
      for (size_t c = 0; c < cols; c++) ops_put(d, buf, e++, a2a_value(d, rank, q, j, (int)c));
  plait_tensor_t t;
  OK(plait_tensor_1d(&t, buf, (size_t)rows, d));
  if (two_d) t.ndim = 2, t.shape[1] = A2A_COLS;
  char name[48];
  snprintf(name, sizeof name, "a2a/%d/%s", v, plait_dtype_name(d));
  plait_handle_t *h;
  OK(plait_alltoall_async(name, &t, v == 1 ? NULL : splits, NULL, &h));
  OK(plait_wait(h, 30));
  plait_tensor_t out;
  OK(plait_handle_output(h, &out));
  int64_t got_splits[PLAIT_TEST_MAX_RANKS], want_rows = 0;
  OK(plait_handle_splits(h, got_splits, PLAIT_TEST_MAX_RANKS));
  for (int r = 0; r < n; r++) {
    CHECK(got_splits[r] == a2a_split(v, r, rank), "%s: plait_handle_splits[%d] is %lld, expected "
          "%lld", name, r, (long long)got_splits[r], (long long)a2a_split(v, r, rank));
    want_rows += got_splits[r];
  }
  if (n > 1)
    EXPECT_RC(PLAIT_ERR_BUFFER_TOO_SMALL, plait_handle_splits(h, got_splits, (size_t)n - 1));
  CHECK(out.dtype == d && out.ndim == t.ndim && out.shape[0] == want_rows &&
        (!two_d || out.shape[1] == A2A_COLS), "%s: output dtype %d ndim %d rows %lld, expected "
        "%lld rows", name, out.dtype, out.ndim, (long long)out.shape[0], (long long)want_rows);
  e = 0;
  for (int r = 0; r < n; r++)
    for (int64_t j = 0; j < a2a_split(v, r, rank); j++)
      for (size_t c = 0; c < cols; c++, e++) {
        double g = ops_get(d, out.data, e), w = a2a_value(d, r, rank, j, (int)c);
        CHECK(g == w, "%s: element %zu (row %lld from rank %d, column %zu) is %g, expected %g",
              name, e, (long long)j, r, c, g, w);
      }
  plait_release(h);
  free(buf);
  return 0;
}

static int alltoall_body(int rank, int n, void *arg) {
  (void)arg;
  static const plait_dtype_t dts[] = {PLAIT_INT32, PLAIT_FLOAT64, PLAIT_UINT8};
  for (int v = 0; v < 3; v++)
    for (int k = 0; k < 3; k++)
      if (alltoall_one(rank, n, v, dts[k])) return 1;
  /* NULL splits need the rows to divide by the size. */
  int32_t x[PLAIT_TEST_MAX_RANKS + 1] = {0};
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  OK(plait_tensor_1d(&t, x, (size_t)n + 1, PLAIT_INT32));
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_alltoall_async("a2a/odd", &t, NULL, NULL, &h));
  int64_t bad[PLAIT_TEST_MAX_RANKS] = {0};
  bad[0] = n; /* adds up to n, not n + 1 */
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_alltoall_async("a2a/sum", &t, bad, NULL, &h));
  return 0;
}

RANK_TESTS(ops_collectives, alltoall_splits, alltoall_body)

/* ------------------------------------------------------------------------ */
/* reducescatter                                                             */
/* ------------------------------------------------------------------------ */

enum { RS_COLS = 3 };

typedef struct rs_case {
  plait_dtype_t d;
  plait_op_t op;
  int64_t rows;
  double pre, post;
  unsigned salt;
  void *in;
  plait_handle_t *h;
  char name[64];
} rs_case_t;

static int reducescatter_body(int rank, int n, void *arg) {
  (void)arg;
  rs_case_t cs[80];
  int nc = 0;
  for (int di = 0; di < OPS_N_DTYPES; di++)
    for (int oi = 0; oi < OPS_N_OPS; oi++) {
      if (ops_dtypes[di] == PLAIT_BOOL && ops_ops[oi] == PLAIT_OP_AVERAGE) continue;
      cs[nc] = (rs_case_t){ops_dtypes[di], ops_ops[oi], 2 * n + 1, 1.0, 1.0, (unsigned)nc, NULL,
                           NULL, ""};
      nc++;
    }
  /* scale factors, and fewer rows than ranks (the last rank gets none) */
  cs[nc++] = (rs_case_t){PLAIT_FLOAT32, PLAIT_OP_SUM, 2 * n + 1, 2.0, 1.0, 101, NULL, NULL, ""};
  cs[nc++] = (rs_case_t){PLAIT_FLOAT32, PLAIT_OP_AVERAGE, 2 * n + 1, 2.0, 0.5, 102, NULL, NULL, ""};
  cs[nc++] = (rs_case_t){PLAIT_FLOAT64, PLAIT_OP_AVERAGE, 3 * n - 1, 3.0, 1.0, 103, NULL, NULL, ""};
  cs[nc++] = (rs_case_t){PLAIT_INT32, PLAIT_OP_SUM, 2 * n + 1, 3.0, 0.5, 104, NULL, NULL, ""};
  cs[nc++] = (rs_case_t){PLAIT_INT32, PLAIT_OP_AVERAGE, 2 * n + 1, 2.0, 1.0, 105, NULL, NULL, ""};
  cs[nc++] = (rs_case_t){PLAIT_INT16, PLAIT_OP_MAX, n - 1, 1.0, 1.0, 106, NULL, NULL, ""};
  for (int k = 0; k < nc; k++) {
    rs_case_t *c = &cs[k];
    size_t count = (size_t)c->rows * RS_COLS;
    c->in = malloc(ops_bytes(c->d, count) + 1);
    CHECK(c->in, "out of memory");
    ops_fill(c->d, c->op, rank, c->in, count, c->salt);
    plait_tensor_t t;
    OK(plait_tensor_1d(&t, c->in, (size_t)c->rows, c->d));
    t.ndim = 2;
    t.shape[1] = RS_COLS;
    plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
    opts.prescale_factor = c->pre;
    opts.postscale_factor = c->post;
    snprintf(c->name, sizeof c->name, "rs/%s/%s/%lld/pre%g/post%g", plait_dtype_name(c->d),
             plait_op_name(c->op), (long long)c->rows, c->pre, c->post);
    OK(plait_reducescatter_async(c->name, &t, c->op, &opts, &c->h));
  }
  for (int k = 0; k < nc; k++) {
    rs_case_t *c = &cs[k];
    OK(plait_wait(c->h, 30));
    plait_tensor_t out;
    OK(plait_handle_output(c->h, &out));
    int64_t base = c->rows / n, extra = c->rows % n;
    int64_t mine = base + (rank < extra), first = rank * base + (rank < extra ? rank : extra);
    CHECK(out.dtype == c->d && out.ndim == 2 && out.shape[0] == mine && out.shape[1] == RS_COLS,
          "%s: output dtype %d ndim %d shape [%lld, %lld], expected [%lld, %d]", c->name,
          out.dtype, out.ndim, (long long)out.shape[0], (long long)out.shape[1], (long long)mine,
          RS_COLS);
    for (size_t e = 0; e < (size_t)mine * RS_COLS; e++) {
      size_t i = (size_t)first * RS_COLS + e;
      double g = ops_get(c->d, out.data, e), w = ops_expect(c->d, c->op, n, i, c->salt, c->pre, c->post);
      CHECK(g == w, "%s: element %zu of this rank's block (%zu overall) is %.17g, expected %.17g",
            c->name, e, i, g, w);
    }
    for (size_t i = 0; i < (size_t)c->rows * RS_COLS; i++)
      CHECK(ops_get(c->d, c->in, i) == ops_value(c->d, c->op, rank, i, c->salt),
            "%s: the input changed at %zu", c->name, i);
    plait_release(c->h);
    free(c->in);
  }
  return 0;
}

RANK_TESTS(ops_collectives, reducescatter_every_op, reducescatter_body)

/* ------------------------------------------------------------------------ */
/* barrier                                                                   */
/* ------------------------------------------------------------------------ */

static int sync_all(int rank, const char *name) {
  int32_t x = 1;
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, &x, 1, PLAIT_INT32));
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h));
  OK(plait_wait(h, 30));
  plait_release(h);
  return 0;
}

static int barrier_body(int rank, int n, void *arg) {
  (void)arg, (void)n;
  if (sync_all(rank, "barrier/sync")) return 1;
  if (rank == 0) ops_sleep(0.3); /* the others reach the barrier first */
  double arrived = ops_now();    /* CLOCK_MONOTONIC: one clock for every rank here */
  plait_handle_t *h;
  OK(plait_barrier_async(NULL, &h));
  OK(plait_wait(h, 30));
  double left = ops_now();
  plait_tensor_t out;
  CHECK(plait_handle_output(h, &out) != PLAIT_SUCCESS, "a barrier has an output");
  plait_release(h);
  /* nobody may leave before the last rank arrived (rank 0, 0.3 s late):
   * compared on the machine's one monotonic clock, so a rank the scheduler
   * left behind for a while cannot make it pass or fail */
  double last = arrived;
  plait_tensor_t lt;
  OK(plait_tensor_1d(&lt, &last, 1, PLAIT_FLOAT64));
  plait_handle_t *hl;
  OK(plait_allreduce_async("barrier/last_arrival", &lt, &lt, PLAIT_OP_MAX, NULL, &hl));
  OK(plait_wait(hl, 30));
  plait_release(hl);
  CHECK(left >= last, "the barrier completed %.3f s before the last rank reached it",
        last - left);
  /* several in flight at once, mixed with an allreduce */
  plait_handle_t *hs[4];
  for (int k = 0; k < 3; k++) OK(plait_barrier_async(NULL, &hs[k]));
  int32_t x = rank;
  plait_tensor_t t;
  OK(plait_tensor_1d(&t, &x, 1, PLAIT_INT32));
  OK(plait_allreduce_async("barrier/between", &t, &t, PLAIT_OP_MAX, NULL, &hs[3]));
  for (int k = 0; k < 4; k++) {
    OK(plait_wait(hs[k], 30));
    plait_release(hs[k]);
  }
  CHECK(x == n - 1, "max of ranks is %d", x);
  return 0;
}

RANK_TESTS(ops_collectives, barrier, barrier_body)

/* ------------------------------------------------------------------------ */
/* Edge shapes                                                               */
/* ------------------------------------------------------------------------ */

static int edges_body(int rank, int n, void *arg) {
  (void)arg;
  /* a scalar (ndim 0) allreduce */
  double s = rank + 0.5;
  plait_tensor_t t;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.data = &s;
  t.dtype = PLAIT_FLOAT64;
  t.device = PLAIT_DEVICE_HOST;
  plait_handle_t *h[5];
  OK(plait_allreduce_async("edge/scalar", &t, &t, PLAIT_OP_SUM, NULL, &h[0]));
  /* the same name while it is in flight is refused on this rank: rank 0
   * asks before rank 1 has submitted it (the barrier orders the two; a lone
   * operation every rank has submitted may already have finished) */
  int32_t d = rank + 1;
  plait_tensor_t td;
  OK(plait_tensor_1d(&td, &d, 1, PLAIT_INT32));
  plait_handle_t *hd = NULL, *dup = NULL, *hb = NULL;
  if (rank == 0) {
    OK(plait_allreduce_async("edge/dup", &td, &td, PLAIT_OP_SUM, NULL, &hd));
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT,
              plait_allreduce_async("edge/dup", &td, &td, PLAIT_OP_SUM, NULL, &dup));
  }
  OK(plait_barrier_async(NULL, &hb));
  OK(plait_wait(hb, 30));
  plait_release(hb);
  if (rank != 0) OK(plait_allreduce_async("edge/dup", &td, &td, PLAIT_OP_SUM, NULL, &hd));
  OK(plait_wait(hd, 30));
  plait_release(hd);
  CHECK(d == n * (n + 1) / 2, "edge/dup sum %d, expected %d", (int)d, n * (n + 1) / 2);
  /* reducescatter and alltoall of no rows; a group of one */
  plait_tensor_t empty;
  OK(plait_tensor_1d(&empty, NULL, 0, PLAIT_INT32));
  empty.ndim = 2;
  empty.shape[1] = 3;
  OK(plait_reducescatter_async("edge/rs-empty", &empty, PLAIT_OP_SUM, NULL, &h[1]));
  int64_t zeros[PLAIT_TEST_MAX_RANKS] = {0};
  OK(plait_alltoall_async("edge/a2a-empty", &empty, zeros, NULL, &h[2]));
  int16_t g = (int16_t)(rank - 7);
  plait_tensor_t tg;
  OK(plait_tensor_1d(&tg, &g, 1, PLAIT_INT16));
  const char *gname = "edge/group-of-one";
  OK(plait_grouped_allreduce_async(1, &gname, &tg, &tg, PLAIT_OP_MIN, NULL, &h[3]));
  /* a 3-D allreduce, out of place */
  float in3[2 * 3 * 4], out3[2 * 3 * 4];
  for (int i = 0; i < 24; i++) in3[i] = (float)(i - rank), out3[i] = -1000;
  plait_tensor_t a3, b3;
  memset(&a3, 0, sizeof a3);
  a3.struct_size = sizeof a3;
  a3.data = in3;
  a3.dtype = PLAIT_FLOAT32;
  a3.device = PLAIT_DEVICE_HOST;
  a3.ndim = 3;
  a3.shape[0] = 2, a3.shape[1] = 3, a3.shape[2] = 4;
  OK(plait_tensor_1d(&b3, out3, 24, PLAIT_FLOAT32)); /* same count, another shape */
  OK(plait_allreduce_async("edge/3d", &a3, &b3, PLAIT_OP_MAX, NULL, &h[4]));
  for (int k = 0; k < 5; k++) OK(plait_wait(h[k], 30));
  double want = n * n / 2.0;
  CHECK(s == want, "scalar sum %g, expected %g", s, want);
  plait_tensor_t out;
  OK(plait_handle_output(h[1], &out));
  CHECK(out.shape[0] == 0 && out.ndim == 2, "reducescatter of no rows: %lld rows", (long long)out.shape[0]);
  OK(plait_handle_output(h[2], &out));
  CHECK(out.shape[0] == 0, "alltoall of no rows: %lld rows", (long long)out.shape[0]);
  CHECK(g == -7, "group of one: min %d", g);
  for (int i = 0; i < 24; i++) CHECK(out3[i] == (float)i, "3-D max element %d is %g", i, (double)out3[i]);
  for (int k = 0; k < 5; k++) plait_release(h[k]);
  return 0;
}

RANK_TESTS(ops_collectives, edge_shapes, edges_body)
