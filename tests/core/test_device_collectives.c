/*
 * allgather (variable first dimension), alltoall with splits, reducescatter
 * and broadcast on device tensors, on the "devsim" test transport (see
 * test_device_path.c): exact results, outputs that are devsim device memory
 * on the tensor's device, and every output the core allocated freed by
 * plait_release (devsim's live allocation count back where it was), twice
 * (the second round from the response cache), asynchronous and with
 * DEVSIM_SYNC=1; and an allreduce on a process set (devsim's sub-states).
 */
#include <criterion/criterion.h>

#include "devsim_util.h"

#define COLS 3
#define MAXROWS 64

/* The output of a completed handle, read back to host; its rows from the
 * first dimension. 0 when it is device memory on this rank's device. */
static int read_output(int rank, plait_handle_t *h, plait_dtype_t dt, void *host, size_t cap,
                       int64_t *rows) {
  plait_tensor_t out;
  OK(plait_handle_output(h, &out));
  CHECK(out.dtype == dt, "output dtype %s", plait_dtype_name(out.dtype));
  CHECK(out.device == dv_device, "output on device %d, the input on %d", (int)out.device,
        dv_device);
  size_t elems = 1;
  for (int i = 0; i < out.ndim; i++) elems *= (size_t)out.shape[i];
  *rows = out.ndim ? out.shape[0] : 1;
  size_t bytes = elems * plait_dtype_size(dt);
  CHECK(bytes <= cap, "output of %zu bytes", bytes);
  CHECK(dv.to_host(host, out.data, bytes) == 0,
        "the output (%p, %zu bytes) is not devsim device memory", out.data, bytes);
  return 0;
}

static int32_t ag_value(int r, int row, int col) { return 100 * r + 10 * row + col; }

static int allgather_check(int rank, int n, plait_handle_t *h) {
  int32_t got[MAXROWS * COLS];
  int64_t rows;
  if (read_output(rank, h, PLAIT_INT32, got, sizeof got, &rows)) return 1;
  CHECK(rows == (int64_t)n * (n + 1) / 2, "allgather: %lld rows", (long long)rows);
  size_t k = 0;
  for (int r = 0; r < n; r++)
    for (int row = 0; row <= r; row++)
      for (int c = 0; c < COLS; c++, k++)
        CHECK(got[k] == ag_value(r, row, c), "allgather: rank %d row %d col %d is %d", r, row, c,
              (int)got[k]);
  return 0;
}

/* alltoall: rank r sends (r + j) % 3 rows to rank j. */
static int a2a_rows(int from, int to) { return (from + to) % 3; }
static float a2a_value(int from, int to, int k, int c) {
  return (float)(1000 * from + 100 * to + 10 * k + c);
}

static int alltoall_check(int rank, int n, plait_handle_t *h) {
  float got[MAXROWS * COLS];
  int64_t rows, splits[PLAIT_TEST_MAX_RANKS];
  if (read_output(rank, h, PLAIT_FLOAT32, got, sizeof got, &rows)) return 1;
  OK(plait_handle_splits(h, splits, PLAIT_TEST_MAX_RANKS));
  size_t k = 0;
  int64_t total = 0;
  for (int s = 0; s < n; s++) {
    CHECK(splits[s] == a2a_rows(s, rank), "alltoall: %lld rows from rank %d",
          (long long)splits[s], s);
    total += splits[s];
    for (int row = 0; row < a2a_rows(s, rank); row++)
      for (int c = 0; c < COLS; c++, k++)
        CHECK(got[k] == a2a_value(s, rank, row, c), "alltoall: from rank %d row %d col %d: %g",
              s, row, c, (double)got[k]);
  }
  CHECK(rows == total, "alltoall: %lld rows, splits say %lld", (long long)rows,
        (long long)total);
  return 0;
}

#define RS_ROWS 7

static int reducescatter_check(int rank, int n, plait_handle_t *h) {
  double got[RS_ROWS * COLS];
  int64_t rows;
  if (read_output(rank, h, PLAIT_FLOAT64, got, sizeof got, &rows)) return 1;
  int base = RS_ROWS / n, extra = RS_ROWS % n, first = rank * base + (rank < extra ? rank : extra);
  int mine = base + (rank < extra);
  CHECK(rows == mine, "reducescatter: %lld rows, expected %d", (long long)rows, mine);
  for (int row = 0; row < mine; row++)
    for (int c = 0; c < COLS; c++) {
      double want = (double)n * (n - 1) / 2 + n * (10.0 * (first + row) + c);
      CHECK(got[row * COLS + c] == want, "reducescatter: row %d col %d is %g, expected %g",
            first + row, c, got[row * COLS + c], want);
    }
  return 0;
}

/* One round of the four collectives; 0 when every result was right. */
static int round_of_four(int rank, int n) {
  int32_t ag[MAXROWS * COLS];
  float a2a[MAXROWS * COLS];
  double rs[RS_ROWS * COLS];
  int16_t bc[5];
  int64_t splits[PLAIT_TEST_MAX_RANKS], sent = 0;
  for (int row = 0; row <= rank; row++)
    for (int c = 0; c < COLS; c++) ag[row * COLS + c] = ag_value(rank, row, c);
  for (int j = 0; j < n; j++) {
    splits[j] = a2a_rows(rank, j);
    for (int k = 0; k < splits[j]; k++)
      for (int c = 0; c < COLS; c++) a2a[(sent + k) * COLS + c] = a2a_value(rank, j, k, c);
    sent += splits[j];
  }
  for (int i = 0; i < RS_ROWS * COLS; i++) rs[i] = rank + 10.0 * (i / COLS) + i % COLS;
  for (int i = 0; i < 5; i++) bc[i] = (int16_t)(rank == 1 ? 7 * i + 1 : -1);
  void *dag = dv_upload(ag, sizeof(int32_t) * COLS * (size_t)(rank + 1));
  void *da2a = dv_upload(a2a, sizeof(float) * COLS * (size_t)(sent ? sent : 1));
  void *drs = dv_upload(rs, sizeof rs), *dbc = dv_upload(bc, sizeof bc);
  CHECK(dag && da2a && drs && dbc, "device allocation failed");
  plait_tensor_t tag = dv_tensor(dag, 0, PLAIT_INT32), ta2a = dv_tensor(da2a, 0, PLAIT_FLOAT32);
  plait_tensor_t trs = dv_tensor(drs, 0, PLAIT_FLOAT64), tbc = dv_tensor(dbc, 5, PLAIT_INT16);
  tag.ndim = ta2a.ndim = trs.ndim = 2;
  tag.shape[0] = rank + 1, ta2a.shape[0] = sent, trs.shape[0] = RS_ROWS;
  tag.shape[1] = ta2a.shape[1] = trs.shape[1] = COLS;
  plait_handle_t *h[4];
  OK(plait_allgather_async("c/allgather", &tag, NULL, &h[0]));
  OK(plait_alltoall_async("c/alltoall", &ta2a, splits, NULL, &h[1]));
  OK(plait_reducescatter_async("c/reducescatter", &trs, PLAIT_OP_SUM, NULL, &h[2]));
  OK(plait_broadcast_async("c/broadcast", &tbc, 1, NULL, &h[3]));
  for (int i = 0; i < 4; i++) OK(plait_wait(h[i], 60));
  long with_outputs = dv.live_allocations();
  if (allgather_check(rank, n, h[0]) || alltoall_check(rank, n, h[1]) ||
      reducescatter_check(rank, n, h[2]))
    return 1;
  CHECK(dv.to_host(bc, dbc, sizeof bc) == 0, "broadcast tensor not readable");
  for (int i = 0; i < 5; i++) CHECK(bc[i] == 7 * i + 1, "broadcast: element %d is %d", i, bc[i]);
  for (int i = 0; i < 4; i++) plait_release(h[i]);
  long after = dv.live_allocations();
  CHECK(with_outputs - after >= 3, "plait_release freed %ld device allocations of the three "
        "outputs (%ld live before, %ld after)", with_outputs - after, with_outputs, after);
  dv.free(dag), dv.free(da2a), dv.free(drs), dv.free(dbc);
  return 0;
}

static int collectives_body(int rank, int n, void *arg) {
  (void)arg;
  if (round_of_four(rank, n)) return 1;
  long before = dv.live_allocations(); /* the core's own buffers, made in round 1 */
  if (round_of_four(rank, n)) return 1;
  long after = dv.live_allocations();
  CHECK(after == before, "%ld device allocations live after the second round, %ld before it: "
        "outputs not freed by plait_release", after, before);
  return 0;
}

TestSuite(device_collectives, .init = plait_test_clear_env);

Test(device_collectives, four_collectives_3ranks, .timeout = 120) {
  DV_REQUIRE();
  cr_expect_eq(dv_run(3, NULL, 90, collectives_body, NULL), 0, "a rank failed (above)");
}
Test(device_collectives, four_collectives_2ranks, .timeout = 120) {
  DV_REQUIRE();
  cr_expect_eq(dv_run(2, NULL, 90, collectives_body, NULL), 0, "a rank failed (above)");
}
Test(device_collectives, sync_four_collectives_3ranks, .timeout = 120) {
  DV_REQUIRE();
  const char *env[] = {"DEVSIM_SYNC=1", NULL};
  cr_expect_eq(dv_run(3, env, 90, collectives_body, NULL), 0, "a rank failed (above)");
}

/* A process set (PLAIT_PROCESS_SETS=0,2: id 1) on devsim's sub-states:
 * ranks 0 and 2 reduce on it (AVERAGE: the set's size), then every rank on
 * the global set. */
static int pset_body(int rank, int n, void *arg) {
  (void)arg;
  float x[6];
  if (rank != 1) {
    int r = rank / 2; /* position in the set */
    ops_fill(PLAIT_FLOAT32, PLAIT_OP_AVERAGE, r, x, 6, 40);
    void *d = dv_upload(x, sizeof x);
    CHECK(d != NULL, "device allocation failed");
    plait_tensor_t t = dv_tensor(d, 6, PLAIT_FLOAT32);
    plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
    o.process_set = 1;
    plait_handle_t *h;
    OK(plait_allreduce_async("ps/avg", &t, &t, PLAIT_OP_AVERAGE, &o, &h));
    OK(plait_wait(h, 60));
    plait_release(h);
    CHECK(dv.to_host(x, d, sizeof x) == 0, "not readable");
    dv.free(d);
    double g, w;
    long bad = ops_check(PLAIT_FLOAT32, PLAIT_OP_AVERAGE, 2, x, 6, 40, 1, 1, &g, &w);
    CHECK(bad < 0, "set {0,2}: element %ld is %g, expected %g", bad, g, w);
  }
  ops_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, rank, x, 6, 41);
  void *d = dv_upload(x, sizeof x);
  CHECK(d != NULL, "device allocation failed");
  plait_tensor_t t = dv_tensor(d, 6, PLAIT_FLOAT32);
  plait_handle_t *h;
  OK(plait_allreduce_async("ps/global", &t, &t, PLAIT_OP_SUM, NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  CHECK(dv.to_host(x, d, sizeof x) == 0, "not readable");
  dv.free(d);
  double g, w;
  long bad = ops_check(PLAIT_FLOAT32, PLAIT_OP_SUM, n, x, 6, 41, 1, 1, &g, &w);
  CHECK(bad < 0, "global: element %ld is %g, expected %g", bad, g, w);
  return 0;
}

Test(device_collectives, process_set_on_device_3ranks, .timeout = 120) {
  DV_REQUIRE();
  const char *env[] = {"PLAIT_PROCESS_SETS=0,2", NULL};
  cr_expect_eq(dv_run(3, env, 90, pset_body, NULL), 0, "a rank failed (above)");
}
