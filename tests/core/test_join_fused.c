/*
 * Join with fused allreduces, on every transport (issue 32, item 3): while
 * one rank has joined, the others run a grouped allreduce of two tensors of
 * 5^d and 17^d elements (d = 1, 2, 3) in int32, int64, float32 and float64,
 * under every op, so rank 0 plans one fused response of both. The joined
 * rank has no tensors: it stands in with identities, and what it puts on the
 * wire must have exactly the layout the active ranks' transport expects
 * (over ofi the active ranks reduce the tensors where they are,
 * allreduce_spans, with no fusion-buffer padding between them). Before that
 * was so, ofi shm failed the job with "Truncation error".
 *
 * Each round the active ranks check every element (the joined rank gives
 * the op's identity; AVERAGE divides by every rank, as Horovod's join does),
 * then join too. Cache warm: the same group first ran on every rank, so the
 * joined round is planned from the response cache. Runs on gloo here and on
 * ofi shm and tcp through tests/CMakeLists.txt (plait_ofi_rerun).
 */
#include <criterion/criterion.h>

#include "ops_util.h"

typedef struct {
  int joiner;   /* the rank that joins each round (-1: the last) */
  int warm;     /* the group first runs on every rank (cache warm) */
  int nocache;  /* PLAIT_CACHE_CAPACITY=0 */
  int ring;     /* ofi: its ring and in-place spans from the first byte */
} jf_case_t;

static const plait_dtype_t jf_dtypes[] = {PLAIT_INT32, PLAIT_INT64, PLAIT_FLOAT32, PLAIT_FLOAT64};
static const plait_op_t jf_ops[] = {PLAIT_OP_SUM, PLAIT_OP_AVERAGE, PLAIT_OP_MIN, PLAIT_OP_MAX,
                                    PLAIT_OP_PRODUCT};
#define JF_NDT ((int)(sizeof jf_dtypes / sizeof jf_dtypes[0]))
#define JF_NOPS ((int)(sizeof jf_ops / sizeof jf_ops[0]))

/* Element i of tensor k's result with `joiner` joined: the active ranks'
 * values reduced (the joined rank's identity changes nothing), AVERAGE's
 * 1/n over all n ranks. */
static double jf_expect(plait_dtype_t d, plait_op_t op, int n, int joiner, size_t i,
                        unsigned salt) {
  double vals[PLAIT_TEST_MAX_RANKS] = {0};
  int k = 0;
  for (int r = 0; r < n; r++)
    if (r != joiner) vals[k++] = ops_value(d, op, r, i, salt);
  return ops_scale(d, ops_reduce(d, op, vals, k), ops_postscale(op, n, 1.0));
}

/* Element i of tensor k's result with every rank taking part. */
static double jf_expect_all(plait_dtype_t d, plait_op_t op, int n, size_t i, unsigned salt) {
  return ops_expect(d, op, n, i, salt, 1.0, 1.0);
}

/* Tensors a (5^d) and b (17^d), filled with this rank's data, in *t. */
static int jf_tensors(int rank, plait_dtype_t dt, plait_op_t op, int d, void **buf,
                      plait_tensor_t *t) {
  static const int side[2] = {5, 17};
  for (int k = 0; k < 2; k++) {
    size_t count = 1;
    memset(&t[k], 0, sizeof t[k]);
    t[k].struct_size = sizeof t[k];
    t[k].dtype = dt;
    t[k].device = PLAIT_DEVICE_HOST;
    t[k].ndim = d;
    for (int j = 0; j < d; j++) t[k].shape[j] = side[k], count *= (size_t)side[k];
    buf[k] = malloc(ops_bytes(dt, count));
    CHECK(buf[k], "out of memory");
    ops_fill(dt, op, rank, buf[k], count, (unsigned)k * 3u);
    t[k].data = buf[k];
  }
  return 0;
}

static size_t jf_count(const plait_tensor_t *t) {
  size_t c = 1;
  for (int j = 0; j < t->ndim; j++) c *= (size_t)t->shape[j];
  return c;
}

/* The group over every rank (joiner < 0) or with `joiner` joined; checks
 * every element. */
static int jf_group(int rank, int n, int joiner, plait_dtype_t dt, plait_op_t op, int d,
                    const char *const *names) {
  void *buf[2] = {NULL, NULL};
  plait_tensor_t t[2];
  if (jf_tensors(rank, dt, op, d, buf, t)) return 1;
  plait_handle_t *h = NULL;
  int bad = 0;
  plait_result_t rc = plait_grouped_allreduce_async(2, names, t, t, op, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 60);
  if (rc != PLAIT_SUCCESS) {
    ops_say_at(rank, __FILE__, __LINE__, "group %s: %s: %s", names[0], plait_result_name(rc),
               plait_last_error());
    bad = 1;
  }
  for (int k = 0; k < 2 && !bad; k++) {
    for (size_t i = 0, c = jf_count(&t[k]); i < c && !bad; i++) {
      double got = ops_get(dt, buf[k], i),
             want = joiner < 0 ? jf_expect_all(dt, op, n, i, (unsigned)k * 3u)
                               : jf_expect(dt, op, n, joiner, i, (unsigned)k * 3u);
      if (got != want) {
        ops_say_at(rank, __FILE__, __LINE__, "%s with rank %d joined: element %zu is %g, "
                   "expected %g", names[k], joiner, i, got, want);
        bad = 1;
      }
    }
  }
  plait_release(h);
  free(buf[0]);
  free(buf[1]);
  return bad;
}

static int jf_join(int rank) {
  plait_handle_t *h;
  OK(plait_join_async(NULL, &h));
  plait_result_t rc = plait_wait(h, 60);
  plait_release(h);
  CHECK(rc == PLAIT_SUCCESS, "join: %s: %s", plait_result_name(rc), plait_last_error());
  return 0;
}

static int body(int rank, int n, void *arg) {
  const jf_case_t *c = arg;
  int joiner = c->joiner < 0 ? n - 1 : c->joiner;
  for (int d = 1; d <= 3; d++)
    for (int a = 0; a < JF_NDT; a++)
      for (int o = 0; o < JF_NOPS; o++) {
        plait_dtype_t dt = jf_dtypes[a];
        plait_op_t op = jf_ops[o];
        char na[64], nb[64];
        snprintf(na, sizeof na, "jf/%d/%s/%s/a", d, plait_dtype_name(dt), plait_op_name(op));
        snprintf(nb, sizeof nb, "jf/%d/%s/%s/b", d, plait_dtype_name(dt), plait_op_name(op));
        const char *names[2] = {na, nb};
        if (c->warm && jf_group(rank, n, -1, dt, op, d, names)) return 1;
        if (rank != joiner && jf_group(rank, n, joiner, dt, op, d, names)) return 1;
        if (jf_join(rank)) return 1;
      }
  return 0;
}

static void run(int nranks, jf_case_t c) {
  OPS_REQUIRE_GLOO();
  const char *env[] = {c.nocache ? "PLAIT_CACHE_CAPACITY=0" : "PLAIT_CACHE_CAPACITY=1024",
                       c.ring ? "PLAIT_OFI_ALLREDUCE_RING_MIN=0" : NULL,
                       c.ring ? "PLAIT_OFI_SPANS_MIN=0" : NULL, NULL};
  cr_assert_eq(ops_run(nranks, env, 200, body, &c), 0, "a rank failed (see above)");
}

Test(join_fused, cold_2ranks, .timeout = 240) { run(2, (jf_case_t){-1, 0, 1, 0}); }
Test(join_fused, warm_2ranks, .timeout = 240) { run(2, (jf_case_t){-1, 1, 0, 0}); }
Test(join_fused, rank0_joins_warm_2ranks, .timeout = 240) { run(2, (jf_case_t){0, 1, 0, 0}); }
Test(join_fused, ring_cold_2ranks, .timeout = 240) { run(2, (jf_case_t){-1, 0, 1, 1}); }
Test(join_fused, cold_3ranks, .timeout = 240) { run(3, (jf_case_t){-1, 0, 1, 0}); }
Test(join_fused, warm_3ranks, .timeout = 240) { run(3, (jf_case_t){-1, 1, 0, 0}); }
Test(join_fused, rank0_joins_cold_3ranks, .timeout = 240) { run(3, (jf_case_t){0, 0, 1, 0}); }
Test(join_fused, ring_warm_3ranks, .timeout = 240) { run(3, (jf_case_t){-1, 1, 0, 1}); }
