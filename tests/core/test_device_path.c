/*
 * The core's device-memory path, on the "devsim" test transport (a GPU
 * transport simulated on the host: tests/plugins/fixtures/devsim.c). Its device
 * pointers fault on any access, so a core that reads, writes, scales or
 * fills device memory itself crashes these tests; every byte must move
 * through the plugin's batch_copy, collectives and mem_copy.
 *
 *  - allreduce: every dtype x op, in and out of place, prescale/postscale,
 *    fused and unfused, 2 and 3 ranks, exact against the test's reference
 *    and bit for bit against the same job on host memory over gloo; the
 *    same with DEVSIM_SYNC=1 (no notify: the synchronous device path);
 *  - a fused response copies in with one batch_copy (members + padding
 *    spans) and out with one;
 *  - readiness: input written late on a user stream is what is reduced,
 *    ready() once per stream of a response;
 *  - asynchronous completion: a held completion keeps the handle pending
 *    while the coordinator goes on negotiating;
 *  - join: the joined rank contributes identities through batch_copy;
 * The other collectives: test_device_collectives.c; refusals and a lost
 * rank: test_device_failures.c.
 */
#include <criterion/criterion.h>
#include <sys/mman.h>

#include "devsim_util.h"

#define SYNC_ENV "DEVSIM_SYNC=1"

/* ------------------------------------------------------------------------ */
/* allreduce matrix, checked against the reference and the host path         */
/* ------------------------------------------------------------------------ */

typedef struct mx_case {
  plait_dtype_t dt;
  plait_op_t op;
  size_t count;
  int inplace;
  double pre, post;
} mx_case_t;

#define MX_MAX 160
#define MX_SHARED_PER_RANK ((size_t)64 << 10)

static int mx_cases(mx_case_t *cs) {
  int n = 0;
  /* twice each dtype x op: tensors a response can fuse */
  for (int rep = 0; rep < 2; rep++)
    for (int d = 0; d < OPS_N_DTYPES; d++)
      for (int o = 0; o < OPS_N_OPS; o++) {
        if (ops_dtypes[d] == PLAIT_BOOL && ops_ops[o] == PLAIT_OP_AVERAGE) continue;
        cs[n] = (mx_case_t){ops_dtypes[d], ops_ops[o],
                            (size_t)(1 + (d * 7 + o * 3 + rep * 11) % 41), n % 2, 1.0, 1.0};
        n++;
      }
  static const plait_dtype_t scaled[] = {PLAIT_FLOAT32, PLAIT_FLOAT64, PLAIT_INT32,
                                         PLAIT_FLOAT16, PLAIT_BFLOAT16};
  static const double factors[][2] = {{2.0, 1.0 / 3.0}, {0.5, 3.0}};
  for (int d = 0; d < 5; d++)
    for (int f = 0; f < 2; f++)
      for (int avg = 0; avg < 2; avg++)
        cs[n] = (mx_case_t){scaled[d], avg ? PLAIT_OP_AVERAGE : PLAIT_OP_SUM,
                            (size_t)(5 + d * 3 + f), (d + f + avg) % 2, factors[f][0],
                            factors[f][1]},
        n++;
  return n;
}

typedef struct mx_arg {
  int device; /* 0: host memory on gloo (the reference bytes), 1: devsim */
  int fused;  /* the job fuses: fused responses expected, else none */
  unsigned char *shared; /* MX_SHARED_PER_RANK per rank: the host job's results */
} mx_arg_t;

typedef struct mx_buf {
  void *in, *out;   /* host input and result */
  void *din, *dout; /* device buffers (device jobs) */
  plait_handle_t *h;
} mx_buf_t;

static int mx_submit(int rank, const mx_arg_t *a, const mx_case_t *c, int k, mx_buf_t *b) {
  size_t bytes = ops_bytes(c->dt, c->count);
  b->in = malloc(bytes), b->out = malloc(bytes);
  CHECK(b->in && b->out, "out of memory");
  ops_fill(c->dt, c->op, rank, b->in, c->count, (unsigned)k * 3u);
  memcpy(b->out, b->in, bytes);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.prescale_factor = c->pre, o.postscale_factor = c->post;
  char name[32];
  snprintf(name, sizeof name, "mx/%d", k);
  plait_tensor_t ti, to;
  if (a->device) {
    b->din = dv_upload(b->in, bytes);
    b->dout = c->inplace ? b->din : dv.alloc(bytes);
    CHECK(b->din && b->dout, "device allocation failed");
    ti = dv_tensor(b->din, c->count, c->dt), to = dv_tensor(b->dout, c->count, c->dt);
  } else {
    plait_tensor_1d(&ti, b->in, c->count, c->dt);
    plait_tensor_1d(&to, c->inplace ? b->in : b->out, c->count, c->dt);
  }
  OK(plait_allreduce_async(name, &ti, &to, c->op, &o, &b->h));
  return 0;
}

/* Waits for case k, reads its result back and checks it. */
static int mx_check(int rank, int n, const mx_arg_t *a, const mx_case_t *c, int k, mx_buf_t *b,
                    size_t *off) {
  size_t bytes = ops_bytes(c->dt, c->count);
  OK(plait_wait(b->h, 60));
  plait_release(b->h);
  void *res = c->inplace && !a->device ? b->in : b->out;
  if (a->device) {
    CHECK(dv.to_host(b->out, b->dout, bytes) == 0, "case %d: output not readable", k);
    if (!c->inplace) { /* out of place: the input is left as it was */
      void *back = malloc(bytes);
      CHECK(back && dv.to_host(back, b->din, bytes) == 0, "case %d: input not readable", k);
      ops_fill(c->dt, c->op, rank, b->in, c->count, (unsigned)k * 3u);
      int same = memcmp(back, b->in, bytes) == 0;
      free(back);
      CHECK(same, "case %d (%s %s out of place): the input was changed", k,
            plait_dtype_name(c->dt), plait_op_name(c->op));
      dv.free(b->dout);
    }
    dv.free(b->din);
  }
  double got, want;
  long bad = ops_check(c->dt, c->op, n, res, c->count, (unsigned)k * 3u, c->pre, c->post, &got,
                       &want);
  CHECK(bad < 0, "case %d (%s %s x%zu %s pre %g post %g): element %ld is %g, expected %g", k,
        plait_dtype_name(c->dt), plait_op_name(c->op), c->count,
        c->inplace ? "in place" : "out of place", c->pre, c->post, bad, got, want);
  unsigned char *mine = a->shared + (size_t)rank * MX_SHARED_PER_RANK + *off;
  CHECK(*off + bytes <= MX_SHARED_PER_RANK, "shared block too small");
  if (!a->device) memcpy(mine, res, bytes);
  else
    CHECK(memcmp(mine, res, bytes) == 0, "case %d (%s %s pre %g post %g): bytes differ from the "
          "same allreduce on host memory over gloo", k, plait_dtype_name(c->dt),
          plait_op_name(c->op), c->pre, c->post);
  *off += bytes;
  free(b->in), free(b->out);
  return 0;
}

static int mx_body(int rank, int n, void *arg) {
  const mx_arg_t *a = arg;
  static mx_case_t cs[MX_MAX];
  static mx_buf_t bufs[MX_MAX];
  int nc = mx_cases(cs);
  memset(bufs, 0, sizeof bufs);
  for (int k = 0; k < nc; k++)
    if (mx_submit(rank, a, &cs[k], k, &bufs[k])) return 1;
  size_t off = 0;
  for (int k = 0; k < nc; k++)
    if (mx_check(rank, n, a, &cs[k], k, &bufs[k], &off)) return 1;
  plait_stats_t st;
  OK(ops_stats(&st));
  /* With fusion on, how many of these cases share a response depends on when
   * each rank submits them (a loaded machine may dispatch them one by one),
   * so it is reported, not asserted: fused_response_is_one_batch_copy_in_and_one_out_*
   * pins fusion on device memory deterministically with a grouped allreduce.
   * With fusion off, nothing may fuse, whatever the timing. */
  if (a->fused)
    fprintf(stderr, "[test rank %d] %s job: %llu fused responses of %llu\n", rank,
            a->device ? "devsim" : "host", (unsigned long long)st.fused_responses,
            (unsigned long long)st.responses);
  else CHECK(st.fused_responses == 0, "%llu fused responses with PLAIT_FUSION_THRESHOLD=0",
             (unsigned long long)st.fused_responses);
  return 0;
}

static void run_matrix(int nranks, int fused, int sync) {
  DV_REQUIRE();
  size_t len = MX_SHARED_PER_RANK * (size_t)nranks;
  unsigned char *sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(sh != MAP_FAILED);
  /* fused: a longer cycle, so that each response gathers many tensors */
  const char *env[4] = {fused ? "PLAIT_FUSION_THRESHOLD=64M" : "PLAIT_FUSION_THRESHOLD=0",
                        fused ? "PLAIT_CYCLE_TIME_MS=10" : "PLAIT_CYCLE_TIME_MS=1",
                        sync ? SYNC_ENV : NULL, NULL};
  mx_arg_t host = {0, fused, sh}, dev = {1, fused, sh};
  cr_assert_eq(ops_run(nranks, env, 120, mx_body, &host), 0,
               "the reference job on host memory over gloo failed (above)");
  cr_expect_eq(dv_run(nranks, env, 120, mx_body, &dev), 0, "a rank failed (above)");
  munmap(sh, len);
}

TestSuite(device_path, .init = plait_test_clear_env);

Test(device_path, allreduce_matrix_2ranks_fused, .timeout = 300) { run_matrix(2, 1, 0); }
Test(device_path, allreduce_matrix_2ranks_unfused, .timeout = 300) { run_matrix(2, 0, 0); }
Test(device_path, allreduce_matrix_3ranks_fused, .timeout = 300) { run_matrix(3, 1, 0); }
Test(device_path, allreduce_matrix_3ranks_unfused, .timeout = 300) { run_matrix(3, 0, 0); }
Test(device_path, sync_allreduce_matrix_2ranks_fused, .timeout = 300) { run_matrix(2, 1, 1); }
Test(device_path, sync_allreduce_matrix_3ranks_unfused, .timeout = 300) { run_matrix(3, 0, 1); }

/* ------------------------------------------------------------------------ */
/* A fused response: one batch_copy in, one out                              */
/* ------------------------------------------------------------------------ */

#define FG_N 5

/* One grouped allreduce of FG_N float32 tensors: devsim sees one
 * collective, a copy-in of FG_N spans (+ identity padding) by pre, and a
 * copy-out of FG_N spans by the postscale (AVERAGE: post / size). */
static int fused_group(int rank, int n, plait_op_t op, double pre, double post, unsigned salt) {
  static const size_t counts[FG_N] = {3, 17, 1, 64, 5};
  void *d[FG_N];
  float host[64];
  plait_tensor_t t[FG_N];
  const char *names[FG_N] = {"fg/a", "fg/b", "fg/c", "fg/d", "fg/e"};
  for (int i = 0; i < FG_N; i++) {
    ops_fill(PLAIT_FLOAT32, op, rank, host, counts[i], salt + (unsigned)i);
    CHECK((d[i] = dv_upload(host, counts[i] * 4)) != NULL, "device allocation failed");
    t[i] = dv_tensor(d[i], counts[i], PLAIT_FLOAT32);
  }
  plait_stats_t s0, s1;
  OK(ops_stats(&s0));
  dv.counters_reset();
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.prescale_factor = pre, o.postscale_factor = post;
  plait_handle_t *h;
  OK(plait_grouped_allreduce_async(FG_N, names, t, t, op, &o, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  OK(ops_stats(&s1));
  devsim_counters_t c = dv_counters();
  devsim_batch_record_t rec[8];
  size_t nrec = dv.batch_history(rec, 8);
  for (int i = 0; i < FG_N; i++) {
    CHECK(dv.to_host(host, d[i], counts[i] * 4) == 0, "output not readable");
    dv.free(d[i]);
    double got, want;
    long bad = ops_check(PLAIT_FLOAT32, op, n, host, counts[i], salt + (unsigned)i, pre, post,
                         &got, &want);
    CHECK(bad < 0, "%s: element %ld is %g, expected %g", names[i], bad, got, want);
  }
  CHECK(s1.fused_responses - s0.fused_responses == 1, "%llu fused responses for one group",
        (unsigned long long)(s1.fused_responses - s0.fused_responses));
  CHECK(c.collectives == 1, "%llu collectives for one fused response",
        (unsigned long long)c.collectives);
  CHECK(c.batch_copy_calls == 2 && nrec == 2,
        "%llu batch_copy calls for one fused response (expected 2: copy-in, copy-out)",
        (unsigned long long)c.batch_copy_calls);
  double out_factor = op == PLAIT_OP_AVERAGE ? post / n : post;
  CHECK(rec[0].spans - rec[0].identity == FG_N && rec[0].factor == pre,
        "copy-in: %zu spans (%zu identity) by %g, expected %d members (+ padding) by %g",
        rec[0].spans, rec[0].identity, rec[0].factor, FG_N, pre);
  CHECK(rec[1].spans == FG_N && rec[1].identity == 0 && rec[1].factor == out_factor,
        "copy-out: %zu spans (%zu identity) by %.17g, expected %d by %.17g", rec[1].spans,
        rec[1].identity, rec[1].factor, FG_N, out_factor);
  return 0;
}

static int fused_body(int rank, int n, void *arg) {
  (void)arg;
  if (fused_group(rank, n, PLAIT_OP_SUM, 2.0, 0.5, 1)) return 1;
  if (fused_group(rank, n, PLAIT_OP_AVERAGE, 1.0, 1.0, 2)) return 1;
  return fused_group(rank, n, PLAIT_OP_MAX, 1.0, 1.0, 3);
}

Test(device_path, fused_response_is_one_batch_copy_in_and_one_out_2ranks, .timeout = 120) {
  DV_REQUIRE();
  cr_expect_eq(dv_run(2, NULL, 60, fused_body, NULL), 0, "a rank failed (above)");
}
Test(device_path, fused_response_is_one_batch_copy_in_and_one_out_3ranks, .timeout = 120) {
  DV_REQUIRE();
  cr_expect_eq(dv_run(3, NULL, 60, fused_body, NULL), 0, "a rank failed (above)");
}

/* ------------------------------------------------------------------------ */
/* Readiness: the input is what the user stream wrote, late                  */
/* ------------------------------------------------------------------------ */

#define RD_N 3
#define RD_COUNT 16

static int ready_body(int rank, int n, void *arg) {
  int fused = *(const int *)arg;
  void *s = dv.stream_create();
  CHECK(s != NULL, "stream_create failed");
  float old[RD_COUNT], fresh[RD_COUNT];
  for (int i = 0; i < RD_COUNT; i++) old[i] = 1000.0f * (float)(rank + 1);
  void *d[RD_N + 1];
  plait_tensor_t t[RD_N + 1];
  const char *names[RD_N] = {"rd/a", "rd/b", "rd/c"};
  long r0 = dv.ready_calls(s), rd0 = dv.ready_calls(NULL);
  for (int k = 0; k <= RD_N; k++) {
    CHECK((d[k] = dv_upload(old, sizeof old)) != NULL, "device allocation failed");
    t[k] = dv_tensor(d[k], RD_COUNT, PLAIT_FLOAT32);
    ops_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, rank, fresh, RD_COUNT, 10u + (unsigned)k);
    /* the last one on the default stream (opts.stream NULL) */
    CHECK(dv.stream_enqueue_write(k < RD_N ? s : NULL, d[k], fresh, sizeof fresh, 300) == 0,
          "enqueue_write failed");
  }
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.stream = s;
  plait_handle_t *hg, *hd;
  OK(plait_grouped_allreduce_async(RD_N, names, t, t, PLAIT_OP_SUM, &o, &hg));
  OK(plait_allreduce_async("rd/default", &t[RD_N], &t[RD_N], PLAIT_OP_SUM, NULL, &hd));
  OK(plait_wait(hg, 60));
  OK(plait_wait(hd, 60));
  plait_release(hg), plait_release(hd);
  for (int k = 0; k <= RD_N; k++) {
    float got[RD_COUNT];
    CHECK(dv.to_host(got, d[k], sizeof got) == 0, "output not readable");
    dv.free(d[k]);
    double g, w;
    long bad = ops_check(PLAIT_FLOAT32, PLAIT_OP_SUM, n, got, RD_COUNT, 10u + (unsigned)k, 1, 1,
                         &g, &w);
    CHECK(bad < 0, "tensor %d: element %ld is %g, expected %g (%s): the core did not wait for "
          "the %s stream (ready)", k, bad, g, w,
          g == 1000.0 * n * (n + 1) / 2 ? "the values before the stream's write" : "wrong",
          k < RD_N ? "user" : "default");
  }
  long rs = dv.ready_calls(s) - r0, rd = dv.ready_calls(NULL) - rd0;
  if (fused) /* one response for the group: ready once for its stream */
    CHECK(rs == 1, "ready(user stream) called %ld times for one fused response", rs);
  else
    CHECK(rs >= 1 && rs <= RD_N, "ready(user stream) called %ld times for %d responses", rs,
          RD_N);
  CHECK(rd >= 1, "ready(NULL) never called for a tensor on the default stream");
  dv.stream_destroy(s);
  return 0;
}

static void run_ready(int nranks, int fused, int sync) {
  DV_REQUIRE();
  const char *env[3] = {fused ? "PLAIT_FUSION_THRESHOLD=64M" : "PLAIT_FUSION_THRESHOLD=0",
                        sync ? SYNC_ENV : NULL, NULL};
  cr_expect_eq(dv_run(nranks, env, 60, ready_body, &fused), 0, "a rank failed (above)");
}

Test(device_path, input_written_late_on_the_stream_is_reduced_fused, .timeout = 120) {
  run_ready(2, 1, 0);
}
Test(device_path, input_written_late_on_the_stream_is_reduced_unfused, .timeout = 120) {
  run_ready(2, 0, 0);
}
Test(device_path, sync_input_written_late_on_the_stream_is_reduced, .timeout = 120) {
  run_ready(3, 1, 1);
}

/* ------------------------------------------------------------------------ */
/* Asynchronous completion                                                   */
/* ------------------------------------------------------------------------ */

static int async_body(int rank, int n, void *arg) {
  (void)arg;
  float x[8], y[8];
  ops_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, rank, x, 8, 21);
  ops_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, rank, y, 8, 22);
  void *dx = dv_upload(x, sizeof x), *dy = dv_upload(y, sizeof y);
  CHECK(dx && dy, "device allocation failed");
  plait_tensor_t tx = dv_tensor(dx, 8, PLAIT_FLOAT32), ty = dv_tensor(dy, 8, PLAIT_FLOAT32);
  uint64_t c0 = dv_counters().collectives;
  dv.gate(1); /* done callbacks are held from here */
  plait_handle_t *hx, *hy;
  OK(plait_allreduce_async("as/x", &tx, &tx, PLAIT_OP_SUM, NULL, &hx));
  CHECK(dv_await_collectives(c0 + 1, 30), "x's collective never reached the transport");
  ops_sleep(0.3);
  int done = -1;
  OK(plait_poll(hx, &done));
  CHECK(done == 0, "x completed while its completion (done) was held");
  EXPECT_RC(PLAIT_ERR_TIMEOUT, plait_wait(hx, 0.2));
  /* the coordinator is not blocked behind x: it negotiates and runs y */
  OK(plait_allreduce_async("as/y", &ty, &ty, PLAIT_OP_SUM, NULL, &hy));
  CHECK(dv_await_collectives(c0 + 2, 30),
        "y's collective never reached the transport while x's completion was held");
  OK(plait_poll(hy, &done));
  CHECK(done == 0, "y completed while its completion (done) was held");
  OK(plait_poll(hx, &done));
  CHECK(done == 0, "x completed while its completion (done) was held");
  CHECK(dv_counters().notify_calls >= 2, "notify called %llu times for two operations",
        (unsigned long long)dv_counters().notify_calls);
  dv.gate(0);
  OK(plait_wait(hx, 60));
  OK(plait_wait(hy, 60));
  plait_release(hx), plait_release(hy);
  CHECK(dv.to_host(x, dx, sizeof x) == 0 && dv.to_host(y, dy, sizeof y) == 0, "not readable");
  dv.free(dx), dv.free(dy);
  double g, w;
  long bad = ops_check(PLAIT_FLOAT32, PLAIT_OP_SUM, n, x, 8, 21, 1, 1, &g, &w);
  CHECK(bad < 0, "x[%ld] = %g, expected %g", bad, g, w);
  bad = ops_check(PLAIT_FLOAT32, PLAIT_OP_SUM, n, y, 8, 22, 1, 1, &g, &w);
  CHECK(bad < 0, "y[%ld] = %g, expected %g", bad, g, w);
  return 0;
}

Test(device_path, held_completion_keeps_the_handle_pending_not_the_coordinator,
     .timeout = 120) {
  DV_REQUIRE();
  cr_expect_eq(dv_run(2, NULL, 90, async_body, NULL), 0, "a rank failed (above)");
}

/* ------------------------------------------------------------------------ */
/* Join: the joined rank's identities come from batch_copy                   */
/* ------------------------------------------------------------------------ */

static const plait_dtype_t join_dtypes[] = {PLAIT_FLOAT32, PLAIT_INT32, PLAIT_FLOAT16,
                                            PLAIT_UINT8, PLAIT_BFLOAT16, PLAIT_INT64};
static const plait_op_t join_ops[] = {PLAIT_OP_SUM, PLAIT_OP_MIN, PLAIT_OP_MAX,
                                      PLAIT_OP_PRODUCT};
#define JN_D 6
#define JN_O 4
#define JN_COUNT 9

static int join_joined(int rank, int n) {
  dv.counters_reset();
  plait_handle_t *h;
  OK(plait_join_async(NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  devsim_batch_record_t rec[256];
  size_t nrec = dv.batch_history(rec, 256);
  for (int o = 0; o < JN_O; o++) {
    int seen = 0;
    for (size_t i = 0; i < nrec; i++)
      seen |= rec[i].op == (int)join_ops[o] && rec[i].identity > 0;
    CHECK(seen, "rank %d of %d joined, but no batch_copy filled the identity of %s", rank, n,
          plait_op_name(join_ops[o]));
  }
  return 0;
}

static int join_body(int rank, int n, void *arg) {
  (void)arg;
  if (rank == n - 1) return join_joined(rank, n);
  void *d[JN_D][JN_O];
  plait_handle_t *h[JN_D][JN_O];
  unsigned char host[JN_COUNT * 8];
  for (int i = 0; i < JN_D; i++)
    for (int o = 0; o < JN_O; o++) {
      plait_dtype_t dt = join_dtypes[i];
      ops_fill(dt, join_ops[o], rank, host, JN_COUNT, (unsigned)(i * 5 + o));
      CHECK((d[i][o] = dv_upload(host, ops_bytes(dt, JN_COUNT))) != NULL, "allocation failed");
      plait_tensor_t t = dv_tensor(d[i][o], JN_COUNT, dt);
      char name[32];
      snprintf(name, sizeof name, "jn/%d/%d", i, o);
      OK(plait_allreduce_async(name, &t, &t, join_ops[o], NULL, &h[i][o]));
    }
  for (int i = 0; i < JN_D; i++)
    for (int o = 0; o < JN_O; o++) {
      plait_dtype_t dt = join_dtypes[i];
      OK(plait_wait(h[i][o], 60));
      plait_release(h[i][o]);
      CHECK(dv.to_host(host, d[i][o], ops_bytes(dt, JN_COUNT)) == 0, "not readable");
      dv.free(d[i][o]);
      double g, w; /* the reduction over the ranks that did not join */
      long bad = ops_check(dt, join_ops[o], n - 1, host, JN_COUNT, (unsigned)(i * 5 + o), 1, 1,
                           &g, &w);
      CHECK(bad < 0, "%s %s with rank %d joined: element %ld is %g, expected %g",
            plait_dtype_name(dt), plait_op_name(join_ops[o]), n - 1, bad, g, w);
    }
  plait_handle_t *hj;
  OK(plait_join_async(NULL, &hj));
  OK(plait_wait(hj, 60));
  plait_release(hj);
  return 0;
}

Test(device_path, joined_rank_contributes_identities_3ranks, .timeout = 120) {
  DV_REQUIRE();
  cr_expect_eq(dv_run(3, NULL, 90, join_body, NULL), 0, "a rank failed (above)");
}
Test(device_path, sync_joined_rank_contributes_identities_2ranks, .timeout = 120) {
  DV_REQUIRE();
  const char *env[] = {SYNC_ENV, NULL};
  cr_expect_eq(dv_run(2, env, 90, join_body, NULL), 0, "a rank failed (above)");
}
