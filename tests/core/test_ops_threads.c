/*
 * Framework threads and completion through the public C ABI, with real ranks
 * forked on loopback: several threads per rank submitting and waiting at
 * once (this file is meant to be run under -DPLAIT_SANITIZE=thread too),
 * completion callbacks, plait_wait timeouts and plait_poll. Lost ranks and
 * shutdown with operations in flight: test_failures.c.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>

#include "ops_util.h"

static const char *const no_env[] = {NULL};

static void run(int nranks, ops_body_fn body, const char *what) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(nranks, no_env, 80, body, NULL), 0, "%s, %d ranks: a rank failed (see above)",
               what, nranks);
}

/* An allreduce every rank takes part in; returns after it completed. */
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

/* ------------------------------------------------------------------------ */
/* Several framework threads                                                 */
/* ------------------------------------------------------------------------ */

enum { THREADS = 4, PER_THREAD = 50, ONE_BY_ONE = 10 };

typedef struct worker {
  pthread_t thread;
  int rank, n, t;
  int fails;
} worker_t;

static plait_dtype_t th_dtype(int k) { return k % 3 == 0 ? PLAIT_INT32 : k % 3 == 1 ? PLAIT_FLOAT32 : PLAIT_FLOAT64; }
static plait_op_t th_op(int k) { return k % 4 == 3 ? PLAIT_OP_MAX : PLAIT_OP_SUM; }
static size_t th_count(int t, int k) { return (size_t)((t * PER_THREAD + k) * 7 % 300 + (k % 10 != 0)); }

/* One thread: 50 tensors in flight at once, then 10 one at a time, then an
 * allgather; every result checked. */
static int worker_run(worker_t *w) {
  int rank = w->rank, n = w->n, t = w->t;
  void *buf[PER_THREAD];
  plait_handle_t *h[PER_THREAD];
  char name[64];
  for (int k = 0; k < PER_THREAD; k++) {
    plait_dtype_t d = th_dtype(k);
    size_t count = th_count(t, k);
    buf[k] = malloc(ops_bytes(d, count) + 1);
    CHECK(buf[k], "out of memory");
    ops_fill(d, th_op(k), rank, buf[k], count, (unsigned)(t * 100 + k));
    plait_tensor_t x;
    OK(plait_tensor_1d(&x, buf[k], count, d));
    snprintf(name, sizeof name, "thread%d/tensor%d", t, k);
    OK(plait_allreduce_async(name, &x, &x, th_op(k), NULL, &h[k]));
  }
  for (int k = 0; k < PER_THREAD; k++) {
    OK(plait_wait(h[k], 30));
    double got = 0, want = 0;
    long bad = ops_check(th_dtype(k), th_op(k), n, buf[k], th_count(t, k),
                         (unsigned)(t * 100 + k), 1.0, 1.0, &got, &want);
    CHECK(bad < 0, "thread %d tensor %d (%s %s): element %ld is %g, expected %g", t, k,
          plait_dtype_name(th_dtype(k)), plait_op_name(th_op(k)), bad, got, want);
    plait_release(h[k]);
  }
  for (int k = 0; k < ONE_BY_ONE; k++) { /* the same names again: one at a time */
    ops_fill(th_dtype(k), th_op(k), rank, buf[k], th_count(t, k), (unsigned)(t * 100 + k));
    plait_tensor_t x;
    plait_handle_t *one;
    OK(plait_tensor_1d(&x, buf[k], th_count(t, k), th_dtype(k)));
    snprintf(name, sizeof name, "thread%d/tensor%d", t, k);
    OK(plait_allreduce_async(name, &x, &x, th_op(k), NULL, &one));
    OK(plait_wait(one, 30));
    plait_release(one);
    double got = 0, want = 0;
    long bad = ops_check(th_dtype(k), th_op(k), n, buf[k], th_count(t, k),
                         (unsigned)(t * 100 + k), 1.0, 1.0, &got, &want);
    CHECK(bad < 0, "thread %d tensor %d again: element %ld is %g, expected %g", t, k, bad, got, want);
  }
  for (int k = 0; k < PER_THREAD; k++) free(buf[k]);
  int32_t rows[2] = {rank, t};
  plait_tensor_t x;
  plait_handle_t *ag;
  OK(plait_tensor_1d(&x, rows, 1, PLAIT_INT32));
  x.ndim = 2;
  x.shape[1] = 2;
  snprintf(name, sizeof name, "thread%d/allgather", t);
  OK(plait_allgather_async(name, &x, NULL, &ag));
  OK(plait_wait(ag, 30));
  plait_tensor_t out;
  OK(plait_handle_output(ag, &out));
  CHECK(out.shape[0] == n, "thread %d: allgather of %lld rows", t, (long long)out.shape[0]);
  for (int r = 0; r < n; r++)
    CHECK(((int32_t *)out.data)[2 * r] == r && ((int32_t *)out.data)[2 * r + 1] == t,
          "thread %d: allgather row %d is (%d, %d)", t, r, ((int32_t *)out.data)[2 * r],
          ((int32_t *)out.data)[2 * r + 1]);
  plait_release(ag);
  return 0;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  w->fails = worker_run(w);
  return NULL;
}

static int threads_body(int rank, int n, void *arg) {
  (void)arg;
  worker_t w[THREADS];
  OK(plait_stats_reset());
  for (int t = 0; t < THREADS; t++) {
    w[t] = (worker_t){.rank = rank, .n = n, .t = t};
    CHECK(pthread_create(&w[t].thread, NULL, worker_main, &w[t]) == 0, "pthread_create");
  }
  int fails = 0;
  for (int t = 0; t < THREADS; t++) {
    pthread_join(w[t].thread, NULL);
    fails |= w[t].fails;
  }
  if (fails) return 1;
  plait_stats_t st;
  OK(ops_stats(&st));
  uint64_t want = THREADS * (PER_THREAD + ONE_BY_ONE + 1);
  CHECK(st.tensors == want, "stats.tensors %llu after %llu operations from %d threads",
        (unsigned long long)st.tensors, (unsigned long long)want, THREADS);
  return 0;
}

Test(ops_threads, four_threads_2ranks, .timeout = 90) { run(2, threads_body, "4 threads"); }
Test(ops_threads, four_threads_4ranks, .timeout = 90) { run(4, threads_body, "4 threads"); }

/* ------------------------------------------------------------------------ */
/* Callbacks                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct cb_rec {
  atomic_int calls;
  atomic_int result;     /* plait_result_t */
  atomic_int done_seen;  /* plait_poll inside the callback said done */
  atomic_int output_ok;  /* plait_handle_output inside the callback was right */
  atomic_uintptr_t handle;
  int release;           /* release the handle inside the callback */
  int n;
  const int32_t *expect_first; /* what element 0 must be, or NULL */
} cb_rec_t;

static void on_done(plait_handle_t *h, plait_result_t rc, void *user) {
  cb_rec_t *r = user;
  atomic_store(&r->handle, (uintptr_t)h);
  atomic_store(&r->result, (int)rc);
  int done = 0;
  if (plait_poll(h, &done) == PLAIT_SUCCESS) atomic_store(&r->done_seen, done);
  plait_tensor_t out;
  if (rc == PLAIT_SUCCESS && r->expect_first && plait_handle_output(h, &out) == PLAIT_SUCCESS)
    atomic_store(&r->output_ok, ((const int32_t *)out.data)[0] == *r->expect_first);
  if (r->release) plait_release(h);
  atomic_fetch_add(&r->calls, 1); /* last: the test may go on once it sees it */
}

/* Waits up to 10 s for the callback. */
static int wait_calls(const cb_rec_t *r, int want) {
  for (int i = 0; i < 2000 && atomic_load(&r->calls) < want; i++) ops_sleep(0.005);
  return atomic_load(&r->calls) >= want;
}

enum { MANY = 20 };

/* One record per case; a rank is its own process, so file scope is fine. */
static cb_rec_t ok_rec, rel_rec, bad_rec, early_rec, refused_rec, many[MANY];

static plait_op_options_t cb_opts(cb_rec_t *rec) {
  plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
  opts.callback = on_done;
  opts.user_data = rec;
  return opts;
}

/* Success: one call, with the result, the handle, and the output ready. */
static int cb_success(int rank, int n) {
  static int32_t want0;
  int32_t x[8];
  for (int i = 0; i < 8; i++) x[i] = rank + i;
  want0 = n * (n - 1) / 2;
  ok_rec.expect_first = &want0;
  plait_op_options_t opts = cb_opts(&ok_rec);
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, x, 8, PLAIT_INT32));
  OK(plait_allreduce_async("cb/ok", &t, &t, PLAIT_OP_SUM, &opts, &h));
  OK(plait_wait(h, 30));
  CHECK(wait_calls(&ok_rec, 1), "no callback 10 s after the operation completed");
  CHECK(atomic_load(&ok_rec.result) == PLAIT_SUCCESS && atomic_load(&ok_rec.done_seen) == 1 &&
        atomic_load(&ok_rec.output_ok) == 1 && atomic_load(&ok_rec.handle) == (uintptr_t)h,
        "callback: result %d, poll done %d, output right %d, handle %s", atomic_load(&ok_rec.result),
        atomic_load(&ok_rec.done_seen), atomic_load(&ok_rec.output_ok),
        atomic_load(&ok_rec.handle) == (uintptr_t)h ? "right" : "wrong");
  CHECK(x[0] == want0 && x[7] == want0 + 7 * n, "allreduce with a callback: %d %d", x[0], x[7]);
  plait_release(h);
  return 0;
}

/* The callback releases its own handle; this thread never touches it. */
static int cb_release_inside(int rank) {
  int32_t x[2] = {rank, rank};
  rel_rec.release = 1;
  plait_op_options_t opts = cb_opts(&rel_rec);
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, x, 2, PLAIT_INT32));
  OK(plait_allreduce_async("cb/release", &t, &t, PLAIT_OP_SUM, &opts, &h));
  CHECK(wait_calls(&rel_rec, 1), "no callback for an operation released in its callback");
  CHECK(atomic_load(&rel_rec.result) == PLAIT_SUCCESS, "result %d", atomic_load(&rel_rec.result));
  return 0;
}

/* Released before completion (rank 1 submits late, so it cannot be done):
 * completes in the background, and the callback still comes. */
static int cb_release_early(int rank, int n) {
  static int32_t y[4];
  for (int i = 0; i < 4; i++) y[i] = 1;
  plait_op_options_t opts = cb_opts(&early_rec);
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, y, 4, PLAIT_INT32));
  if (rank != 1) {
    OK(plait_allreduce_async("cb/released-early", &t, &t, PLAIT_OP_SUM, &opts, &h));
    OK(plait_release(h));
  }
  if (sync_all(rank, "cb/go")) return 1;
  if (rank == 1) {
    OK(plait_allreduce_async("cb/released-early", &t, &t, PLAIT_OP_SUM, &opts, &h));
    OK(plait_release(h));
  }
  CHECK(wait_calls(&early_rec, 1), "no callback for a handle released before it completed");
  CHECK(atomic_load(&early_rec.result) == PLAIT_SUCCESS && y[0] == n, "result %d, sum %d",
        atomic_load(&early_rec.result), y[0]);
  return 0;
}

/* A failure (mismatched shapes) reaches plait_wait and the callback; a
 * refused submission gives no handle and no callback. */
static int cb_failures(int rank) {
  int32_t x[8] = {0};
  plait_op_options_t opts = cb_opts(&bad_rec);
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, x, rank == 1 ? 5 : 4, PLAIT_INT32));
  OK(plait_allreduce_async("cb/mismatch", &t, &t, PLAIT_OP_SUM, &opts, &h));
  plait_result_t rc = plait_wait(h, 30);
  CHECK(rc == PLAIT_ERR_MISMATCH && strstr(plait_last_error(), "cb/mismatch"),
        "mismatched shapes: %s: %s", plait_result_name(rc), plait_last_error());
  CHECK(wait_calls(&bad_rec, 1), "no callback for a failed operation");
  CHECK(atomic_load(&bad_rec.result) == PLAIT_ERR_MISMATCH, "callback result %s",
        plait_result_name((plait_result_t)atomic_load(&bad_rec.result)));
  plait_release(h);
  opts = cb_opts(&refused_rec);
  h = NULL;
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_allreduce_async(NULL, &t, &t, PLAIT_OP_SUM, &opts, &h));
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_allreduce_async("cb/badop", &t, &t, (plait_op_t)99,
                                                              &opts, &h));
  CHECK(h == NULL, "a refused submission set the handle");
  return 0;
}

/* Many in flight, of several kinds, each called back once. */
static int cb_many(int rank, int n) {
  plait_handle_t *hs[MANY];
  int32_t v[MANY][3];
  for (int k = 0; k < MANY; k++) {
    char name[32];
    snprintf(name, sizeof name, "cb/many/%d", k);
    plait_op_options_t opts = cb_opts(&many[k]);
    for (int i = 0; i < 3; i++) v[k][i] = rank * k;
    plait_tensor_t t;
    OK(plait_tensor_1d(&t, v[k], 3, PLAIT_INT32));
    if (k % 5 == 4)
      OK(plait_broadcast_async(name, &t, k % n, &opts, &hs[k]));
    else if (k % 5 == 3)
      OK(plait_barrier_async(&opts, &hs[k]));
    else
      OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, &opts, &hs[k]));
  }
  for (int k = 0; k < MANY; k++) {
    OK(plait_wait(hs[k], 30));
    CHECK(wait_calls(&many[k], 1), "no callback for operation %d", k);
    CHECK(atomic_load(&many[k].result) == PLAIT_SUCCESS, "operation %d: %d", k,
          atomic_load(&many[k].result));
    plait_release(hs[k]);
  }
  return 0;
}

static int callbacks_body(int rank, int n, void *arg) {
  (void)arg;
  if (cb_success(rank, n) || cb_release_inside(rank) || cb_release_early(rank, n) ||
      cb_failures(rank) || cb_many(rank, n))
    return 1;
  ops_sleep(0.1); /* every callback exactly once, also a while later */
  CHECK(atomic_load(&ok_rec.calls) == 1 && atomic_load(&rel_rec.calls) == 1 &&
        atomic_load(&early_rec.calls) == 1 && atomic_load(&bad_rec.calls) == 1 &&
        atomic_load(&refused_rec.calls) == 0, "callback counts %d %d %d %d %d (expected 1 1 1 1 0)",
        atomic_load(&ok_rec.calls), atomic_load(&rel_rec.calls), atomic_load(&early_rec.calls),
        atomic_load(&bad_rec.calls), atomic_load(&refused_rec.calls));
  for (int k = 0; k < MANY; k++)
    CHECK(atomic_load(&many[k].calls) == 1, "operation %d called back %d times", k,
          atomic_load(&many[k].calls));
  return 0;
}

Test(ops_threads, callbacks_2ranks, .timeout = 90) { run(2, callbacks_body, "callbacks"); }
Test(ops_threads, callbacks_3ranks, .timeout = 90) { run(3, callbacks_body, "callbacks"); }

/* ------------------------------------------------------------------------ */
/* plait_wait timeouts and plait_poll                                        */
/* ------------------------------------------------------------------------ */

static int wait_poll_body(int rank, int n, void *arg) {
  (void)arg;
  int32_t x[16];
  for (int i = 0; i < 16; i++) x[i] = i * (rank + 1);
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  OK(plait_tensor_1d(&t, x, 16, PLAIT_INT32));
  int done = -1;
  if (rank != 1) OK(plait_allreduce_async("slow", &t, &t, PLAIT_OP_SUM, NULL, &h));
  if (rank == 0) { /* rank 1 submits "slow" only after "go", which needs rank 0 */
    OK(plait_poll(h, &done));
    CHECK(done == 0, "plait_poll: done %d before rank 1 submitted", done);
    EXPECT_RC(PLAIT_ERR_TIMEOUT, plait_wait(h, 0));
    CHECK(strstr(plait_last_error(), "still running") != NULL, "timeout message: %s",
          plait_last_error());
    double t0 = ops_now();
    EXPECT_RC(PLAIT_ERR_TIMEOUT, plait_wait(h, 0.1));
    double waited = ops_now() - t0;
    CHECK(waited >= 0.09 && waited < 5, "plait_wait(h, 0.1) returned after %.3f s", waited);
    plait_tensor_t out;
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_handle_output(h, &out));
    int64_t splits[PLAIT_TEST_MAX_RANKS];
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_handle_splits(h, splits, PLAIT_TEST_MAX_RANKS));
    int jr;
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_handle_join_rank(h, &jr));
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_wait(h, NAN));
    OK(plait_poll(h, &done));
    CHECK(done == 0, "plait_poll: done %d before rank 1 submitted", done);
  }
  if (sync_all(rank, "go")) return 1;
  if (rank == 1) OK(plait_allreduce_async("slow", &t, &t, PLAIT_OP_SUM, NULL, &h));
  /* poll until done, as a framework would */
  double deadline = ops_now() + 30;
  for (done = 0; !done && ops_now() < deadline; ops_sleep(0.001)) OK(plait_poll(h, &done));
  CHECK(done == 1, "plait_poll never said done");
  OK(plait_wait(h, 0)); /* finished: timeout 0 gives the result */
  OK(plait_wait(h, -1));
  int tri = n * (n + 1) / 2;
  for (int i = 0; i < 16; i++) CHECK(x[i] == i * tri, "slow[%d] is %d, expected %d", i, x[i], i * tri);
  plait_tensor_t out;
  OK(plait_handle_output(h, &out));
  CHECK(out.data == x, "the output of an allreduce is the tensor given");
  int64_t splits[PLAIT_TEST_MAX_RANKS];
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_handle_splits(h, splits, PLAIT_TEST_MAX_RANKS));
  OK(plait_release(h));
  /* argument errors */
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_poll(NULL, &done));
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_wait(NULL, 0));
  OK(plait_release(NULL));
  return 0;
}

Test(ops_threads, wait_timeout_and_poll_2ranks, .timeout = 90) { run(2, wait_poll_body, "wait/poll"); }
Test(ops_threads, wait_timeout_and_poll_3ranks, .timeout = 90) { run(3, wait_poll_body, "wait/poll"); }
