/*
 * allreduce through the public C ABI, with real ranks forked on loopback
 * (gloo transport), checked exactly element by element.
 *
 * The matrix: every dtype x every op (AVERAGE not on bool) x sizes 0, 1 and
 * 1001 x in place and out of place, plus prescale/postscale (1/3 among
 * them) on float32, float64, int32, float16 and bfloat16, plus seven 8 MiB
 * tensors (AVERAGE and scaled ones among them, in and out of place: a
 * transport's bandwidth algorithm with the scaling folded in), all submitted
 * at once and then
 * waited for, twice (the 8 MiB ones only the first time; the second round
 * must be negotiated from the response cache). One job runs it for each of 2, 3, 4 ranks x fusion on (default
 * PLAIT_FUSION_THRESHOLD) / off (0) x cache on (default) / off
 * (PLAIT_CACHE_CAPACITY=0), and checks plait_stats agrees: fused responses
 * only with fusion, cache hits only with the cache.
 *
 * Also: bool semantics spelled out, and plait_stats adding up after a known
 * workload (12 allreduces and a group of 5), with fusion on and off.
 *
 * Data are small integers from ops_value(dtype, op, rank, index), so sums
 * and products are exact in every dtype; AVERAGE is reproduced as Horovod
 * computes it: the sum scaled by postscale / size (integers truncated toward
 * zero, floats scaled in float by the factor rounded to float).
 */
#include <criterion/criterion.h>

#include <stddef.h>

#include "ops_util.h"

#define MIB ((size_t)1 << 20)
#define BIG_BYTES (8 * MIB)

/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct ar_case {
  plait_dtype_t dt;
  plait_op_t op;
  size_t count;
  int inplace;
  int big;         /* 8 MiB: first round only */
  double pre, post;
  unsigned salt;
  char name[96];
  void *in, *out;
  plait_handle_t *h;
} ar_case_t;

typedef struct matrix_arg {
  int fusion, cache;
} matrix_arg_t;

#define MAX_CASES 512

static int add_case(ar_case_t *cs, int *n, plait_dtype_t dt, plait_op_t op, size_t count,
                    int inplace, double pre, double post, int big) {
  if (*n >= MAX_CASES) return 1;
  ar_case_t *c = &cs[(*n)++];
  memset(c, 0, sizeof *c);
  c->dt = dt;
  c->op = op;
  c->count = count;
  c->inplace = inplace;
  c->pre = pre;
  c->post = post;
  c->big = big;
  c->salt = (unsigned)*n * 3u;
  snprintf(c->name, sizeof c->name, "ar/%s/%s/%zu/%s/pre%g/post%g", plait_dtype_name(dt),
           plait_op_name(op), count, inplace ? "inplace" : "outofplace", pre, post);
  return 0;
}

/* The same list on every rank. */
static int build_cases(ar_case_t *cs, int *n) {
  static const size_t sizes[] = {0, 1, 1001};
  int bad = 0;
  *n = 0;
  for (int d = 0; d < OPS_N_DTYPES; d++)
    for (int o = 0; o < OPS_N_OPS; o++) {
      if (ops_dtypes[d] == PLAIT_BOOL && ops_ops[o] == PLAIT_OP_AVERAGE) continue;
      for (int s = 0; s < 3; s++)
        for (int ip = 0; ip < 2; ip++)
          bad |= add_case(cs, n, ops_dtypes[d], ops_ops[o], sizes[s], ip, 1.0, 1.0, 0);
    }
  /* Scaling: 1/3 rounds in every float type, so a transport that folds
   * the postscale into its last pass must round exactly as the core does. */
  static const plait_dtype_t scaled[] = {PLAIT_FLOAT32, PLAIT_FLOAT64, PLAIT_INT32,
                                         PLAIT_FLOAT16, PLAIT_BFLOAT16};
  static const double factors[][2] = {{2.0, 1.0}, {1.0, 0.5}, {3.0, 0.5}, {2.0, 0.5},
                                      {1.0, 1.0 / 3}};
  for (int d = 0; d < 5; d++)
    for (int o = 0; o < 2; o++)
      for (int f = 0; f < 5; f++)
        bad |= add_case(cs, n, scaled[d], o ? PLAIT_OP_AVERAGE : PLAIT_OP_SUM, 1001, f % 2,
                        factors[f][0], factors[f][1], 0);
  bad |= add_case(cs, n, PLAIT_FLOAT32, PLAIT_OP_SUM, BIG_BYTES / 4, 1, 1.0, 1.0, 1);
  bad |= add_case(cs, n, PLAIT_INT32, PLAIT_OP_MAX, BIG_BYTES / 4, 0, 1.0, 1.0, 1);
  bad |= add_case(cs, n, PLAIT_BFLOAT16, PLAIT_OP_AVERAGE, BIG_BYTES / 2, 1, 1.0, 1.0, 1);
  /* large enough for a transport's bandwidth algorithm (ofi: the ring), out
   * of place and in place, with AVERAGE and the factors folded into it */
  bad |= add_case(cs, n, PLAIT_FLOAT16, PLAIT_OP_AVERAGE, BIG_BYTES / 2 + 3, 0, 1.0, 0.5, 1);
  bad |= add_case(cs, n, PLAIT_FLOAT32, PLAIT_OP_SUM, BIG_BYTES / 4 + 1, 0, 2.0, 1.0 / 3, 1);
  bad |= add_case(cs, n, PLAIT_FLOAT32, PLAIT_OP_AVERAGE, BIG_BYTES / 4, 1, 1.0, 1.0, 1);
  bad |= add_case(cs, n, PLAIT_FLOAT64, PLAIT_OP_AVERAGE, BIG_BYTES / 8 + 5, 0, 1.0, 1.0, 1);
  return bad;
}

static void free_cases(ar_case_t *cs, int n) {
  for (int i = 0; i < n; i++) {
    if (cs[i].out != cs[i].in) free(cs[i].out);
    free(cs[i].in);
    plait_release(cs[i].h);
  }
}

/* ------------------------------------------------------------------------ */
/* One round: submit all, wait all, check all                                */
/* ------------------------------------------------------------------------ */

#define SENTINEL 0xA5

static int submit_case(int rank, ar_case_t *c) {
  size_t bytes = ops_bytes(c->dt, c->count);
  if (!c->in && c->count) {
    c->in = malloc(bytes);
    c->out = c->inplace ? c->in : malloc(bytes);
    CHECK(c->in && c->out, "out of memory for %s", c->name);
  } else if (!c->in && !c->inplace && !c->out) {
    c->out = malloc(1); /* a real pointer for an empty output; the input stays NULL */
    CHECK(c->out, "out of memory");
  }
  ops_fill(c->dt, c->op, rank, c->in, c->count, c->salt);
  if (!c->inplace && c->count) memset(c->out, SENTINEL, bytes);
  plait_tensor_t in, out;
  OK(plait_tensor_1d(&in, c->in, c->count, c->dt));
  OK(plait_tensor_1d(&out, c->out, c->count, c->dt));
  plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
  opts.prescale_factor = c->pre;
  opts.postscale_factor = c->post;
  int plain = c->pre == 1.0 && c->post == 1.0;
  OK(plait_allreduce_async(c->name, &in, &out, c->op, plain ? NULL : &opts, &c->h));
  return 0;
}

static int finish_case(int rank, int n, ar_case_t *c) {
  plait_result_t rc = plait_wait(c->h, 30);
  CHECK(rc == PLAIT_SUCCESS, "%s: plait_wait -> %s: %s", c->name, plait_result_name(rc),
        plait_last_error());
  plait_tensor_t t;
  OK(plait_handle_output(c->h, &t));
  CHECK(t.data == c->out && t.dtype == c->dt && t.ndim == 1 && t.shape[0] == (int64_t)c->count,
        "%s: plait_handle_output gave data %p dtype %d ndim %d shape[0] %lld", c->name, t.data,
        t.dtype, t.ndim, (long long)t.shape[0]);
  plait_release(c->h);
  c->h = NULL;
  double got = 0, want = 0;
  long bad = ops_check(c->dt, c->op, n, c->out, c->count, c->salt, c->pre, c->post, &got, &want);
  CHECK(bad < 0, "%s (%d ranks): element %ld is %.17g, expected %.17g", c->name, n, bad, got,
        want);
  if (!c->inplace)
    for (size_t i = 0; i < c->count; i++) {
      double v = ops_get(c->dt, c->in, i), w = ops_value(c->dt, c->op, rank, i, c->salt);
      CHECK(v == w, "%s: the input changed: element %zu is %g, was %g", c->name, i, v, w);
    }
  return 0;
}

static int round_(int rank, int n, ar_case_t *cs, int ncases, int with_big, int *submitted,
                  uint64_t *bytes) {
  *submitted = 0;
  *bytes = 0;
  for (int i = 0; i < ncases; i++) {
    if (cs[i].big && !with_big) continue;
    if (submit_case(rank, &cs[i])) return 1;
    ++*submitted;
    *bytes += ops_bytes(cs[i].dt, cs[i].count);
  }
  for (int i = 0; i < ncases; i++)
    if (cs[i].h && finish_case(rank, n, &cs[i])) return 1;
  return 0;
}

/* The effective value of a variable, from plait_config_dump. */
static int config_value(const char *name, char *value, size_t cap) {
  char buf[8192];
  if (plait_config_dump(buf, sizeof buf, NULL) != PLAIT_SUCCESS) return 1;
  size_t len = strlen(name);
  for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
    if (!strncmp(line, name, len) && line[len] == '=') {
      snprintf(value, cap, "%.*s", (int)strcspn(line + len + 1, "\n"), line + len + 1);
      return 0;
    }
  return 1;
}

static int check_round_stats(int rank, const matrix_arg_t *a, int round, int submitted,
                             uint64_t bytes) {
  plait_stats_t s;
  OK(ops_stats(&s));
  const char *cfg = a->fusion ? (a->cache ? "fusion, cache" : "fusion, no cache")
                              : (a->cache ? "no fusion, cache" : "no fusion, no cache");
  CHECK(s.tensors == (uint64_t)submitted, "%s round %d: stats.tensors %llu, submitted %d", cfg,
        round, (unsigned long long)s.tensors, submitted);
  CHECK(s.responses >= 1 && s.responses <= s.tensors, "%s round %d: %llu responses for %llu tensors",
        cfg, round, (unsigned long long)s.responses, (unsigned long long)s.tensors);
  CHECK(s.bytes >= bytes, "%s round %d: stats.bytes %llu < %llu bytes of tensors", cfg, round,
        (unsigned long long)s.bytes, (unsigned long long)bytes);
  CHECK(s.cache_hits + s.cache_misses == s.tensors, "%s round %d: %llu hits + %llu misses for "
        "%llu tensors", cfg, round, (unsigned long long)s.cache_hits,
        (unsigned long long)s.cache_misses, (unsigned long long)s.tensors);
  if (a->fusion) {
    CHECK(s.fused_responses > 0, "%s round %d: no fused response among %llu responses for %d "
          "tensors in flight at once", cfg, round, (unsigned long long)s.responses, submitted);
    CHECK(s.fused_tensors >= 2 * s.fused_responses && s.fused_tensors <= s.tensors,
          "%s round %d: %llu fused tensors in %llu fused responses", cfg, round,
          (unsigned long long)s.fused_tensors, (unsigned long long)s.fused_responses);
    CHECK(s.fusion_capacity > 0, "%s round %d: fusion_capacity 0", cfg, round);
  } else {
    CHECK(s.fused_responses == 0 && s.fused_tensors == 0, "%s round %d: %llu fused responses with "
          "PLAIT_FUSION_THRESHOLD=0", cfg, round, (unsigned long long)s.fused_responses);
    CHECK(s.responses == s.tensors, "%s round %d: %llu responses for %llu tensors without fusion",
          cfg, round, (unsigned long long)s.responses, (unsigned long long)s.tensors);
    CHECK(s.bytes == bytes, "%s round %d: stats.bytes %llu, tensors hold %llu", cfg, round,
          (unsigned long long)s.bytes, (unsigned long long)bytes);
  }
  if (round == 1 || !a->cache)
    CHECK(s.cache_hits == 0, "%s round %d: %llu cache hits", cfg, round,
          (unsigned long long)s.cache_hits);
  else
    CHECK(s.cache_hits == s.tensors, "%s round %d: %llu cache hits for %llu tensors seen before",
          cfg, round, (unsigned long long)s.cache_hits, (unsigned long long)s.tensors);
  return 0;
}

/* bool semantics spelled out: SUM and MAX are OR, MIN and PRODUCT are AND;
 * AVERAGE and scale factors on bool are refused, and no callback comes. */
static int called_back;
static void count_call(plait_handle_t *h, plait_result_t rc, void *u) {
  (void)h, (void)rc, (void)u;
  called_back++;
}

static int bool_semantics(int rank, int n) {
  /* element: 0 all false, 1 only rank 0 true, 2 all true, 3 all but rank 0 */
  uint8_t in[4] = {0, rank == 0, 1, rank != 0};
  static const uint8_t or_[4] = {0, 1, 1, 1}, and_[4] = {0, 0, 1, 0};
  static const plait_op_t ops[4] = {PLAIT_OP_SUM, PLAIT_OP_MAX, PLAIT_OP_MIN, PLAIT_OP_PRODUCT};
  uint8_t out[4][4];
  plait_handle_t *h[4];
  for (int k = 0; k < 4; k++) {
    plait_tensor_t ti, to;
    OK(plait_tensor_1d(&ti, in, 4, PLAIT_BOOL));
    OK(plait_tensor_1d(&to, out[k], 4, PLAIT_BOOL));
    char name[32];
    snprintf(name, sizeof name, "bool/%s", plait_op_name(ops[k]));
    OK(plait_allreduce_async(name, &ti, &to, ops[k], NULL, &h[k]));
  }
  for (int k = 0; k < 4; k++) {
    OK(plait_wait(h[k], 30));
    plait_release(h[k]);
    const uint8_t *want = k < 2 ? or_ : and_;
    for (int i = 0; i < 4; i++)
      CHECK(out[k][i] == want[i], "bool %s over %d ranks: element %d is %u, expected %u",
            plait_op_name(ops[k]), n, i, out[k][i], want[i]);
  }
  plait_tensor_t t;
  plait_handle_t *bad = NULL;
  OK(plait_tensor_1d(&t, in, 4, PLAIT_BOOL));
  plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
  opts.callback = count_call;
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_allreduce_async("bool/avg", &t, &t, PLAIT_OP_AVERAGE,
                                                              &opts, &bad));
  CHECK(bad == NULL, "a refused allreduce set the handle");
  opts.prescale_factor = 2.0;
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_allreduce_async("bool/scaled", &t, &t,
                                                              PLAIT_OP_SUM, &opts, &bad));
  CHECK(called_back == 0, "the callback of a refused allreduce was called");
  return 0;
}

static int matrix_body(int rank, int n, void *arg) {
  const matrix_arg_t *a = arg;
  char v[64];
  CHECK(config_value("PLAIT_FUSION_THRESHOLD", v, sizeof v) == 0, "no PLAIT_FUSION_THRESHOLD");
  CHECK(a->fusion ? strcmp(v, "0") != 0 : strcmp(v, "0") == 0, "PLAIT_FUSION_THRESHOLD=%s", v);
  CHECK(config_value("PLAIT_CACHE_CAPACITY", v, sizeof v) == 0, "no PLAIT_CACHE_CAPACITY");
  CHECK(a->cache ? strcmp(v, "0") != 0 : strcmp(v, "0") == 0, "PLAIT_CACHE_CAPACITY=%s", v);

  ar_case_t *cs = calloc(MAX_CASES, sizeof *cs);
  int ncases = 0, fails = 0, submitted = 0;
  uint64_t bytes = 0;
  if (!cs || build_cases(cs, &ncases)) {
    plait_test_say(rank, "cannot build the cases");
    free(cs);
    return 1;
  }
  for (int round = 1; round <= 2 && !fails; round++) {
    fails = round_(rank, n, cs, ncases, round == 1, &submitted, &bytes);
    if (!fails) fails = check_round_stats(rank, a, round, submitted, bytes);
    if (!fails && plait_stats_reset() != PLAIT_SUCCESS) fails = 1;
  }
  if (!fails) { /* after a failure operations may still be in flight: leave the buffers */
    free_cases(cs, ncases);
    free(cs);
  }
  if (!fails) fails = bool_semantics(rank, n);
  return fails;
}

static void run_matrix(int nranks, int fusion, int cache) {
  OPS_REQUIRE_GLOO();
  const char *env[3];
  int k = 0;
  if (!fusion) env[k++] = "PLAIT_FUSION_THRESHOLD=0";
  if (!cache) env[k++] = "PLAIT_CACHE_CAPACITY=0";
  env[k] = NULL;
  matrix_arg_t a = {fusion, cache};
  cr_assert_eq(ops_run(nranks, env, 100, matrix_body, &a), 0,
               "allreduce matrix, %d ranks, fusion %s, cache %s: a rank failed (see above)",
               nranks, fusion ? "on" : "off", cache ? "on" : "off");
}

#define MATRIX_TESTS(n)                                                                  \
  Test(ops_allreduce, matrix_##n##ranks_fusion_cache, .timeout = 120) { run_matrix(n, 1, 1); } \
  Test(ops_allreduce, matrix_##n##ranks_fusion_nocache, .timeout = 120) { run_matrix(n, 1, 0); } \
  Test(ops_allreduce, matrix_##n##ranks_nofusion_cache, .timeout = 120) { run_matrix(n, 0, 1); } \
  Test(ops_allreduce, matrix_##n##ranks_nofusion_nocache, .timeout = 120) { run_matrix(n, 0, 0); }

MATRIX_TESTS(2)
MATRIX_TESTS(3)
MATRIX_TESTS(4)

/* ------------------------------------------------------------------------ */
/* Statistics add up                                                         */
/* ------------------------------------------------------------------------ */

enum { ST_SINGLES = 12, ST_GROUP = 5 };

/* Submits the known workload (12 allreduces and a group of 5) and waits;
 * *bytes gets the bytes of tensor data in it. */
static int stats_workload(int rank, int n, uint64_t *bytes) {
  static const size_t sizes[ST_SINGLES] = {0, 1, 3, 1001, 64, 100, 7, 4096, 1, 33, 250, 17};
  static const size_t gsizes[ST_GROUP] = {1, 7, 64, 1001, 0};
  void *bufs[ST_SINGLES + ST_GROUP];
  plait_handle_t *h[ST_SINGLES + 1];
  plait_tensor_t gin[ST_GROUP];
  const char *gnames[ST_GROUP] = {"st/g/0", "st/g/1", "st/g/2", "st/g/3", "st/g/4"};
  *bytes = 0;
  for (int k = 0; k < ST_SINGLES + ST_GROUP; k++) {
    int grouped = k >= ST_SINGLES;
    plait_dtype_t d = grouped ? PLAIT_FLOAT32 : ops_dtypes[k % OPS_N_DTYPES];
    size_t count = grouped ? gsizes[k - ST_SINGLES] : sizes[k];
    bufs[k] = malloc(ops_bytes(d, count) + 1);
    CHECK(bufs[k], "out of memory");
    ops_fill(d, PLAIT_OP_SUM, rank, bufs[k], count, (unsigned)k);
    *bytes += ops_bytes(d, count);
    plait_tensor_t t;
    OK(plait_tensor_1d(&t, bufs[k], count, d));
    if (grouped) {
      gin[k - ST_SINGLES] = t;
      continue;
    }
    char name[32];
    snprintf(name, sizeof name, "st/%d", k);
    OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[k]));
  }
  OK(plait_grouped_allreduce_async(ST_GROUP, gnames, gin, gin, PLAIT_OP_SUM, NULL, &h[ST_SINGLES]));
  for (int k = 0; k <= ST_SINGLES; k++) {
    OK(plait_wait(h[k], 30));
    plait_release(h[k]);
  }
  for (int k = 0; k < ST_SINGLES + ST_GROUP; k++) {
    int grouped = k >= ST_SINGLES;
    plait_dtype_t d = grouped ? PLAIT_FLOAT32 : ops_dtypes[k % OPS_N_DTYPES];
    size_t count = grouped ? gsizes[k - ST_SINGLES] : sizes[k];
    double got = 0, want = 0;
    long bad = ops_check(d, PLAIT_OP_SUM, n, bufs[k], count, (unsigned)k, 1.0, 1.0, &got, &want);
    CHECK(bad < 0, "stats workload tensor %d (%s): element %ld is %g, expected %g", k,
          plait_dtype_name(d), bad, got, want);
    free(bufs[k]);
  }
  return 0;
}

typedef struct {
  int fusion, epoch; /* PLAIT_FUSION_THRESHOLD default or 0; PLAIT_CACHED_EPOCH */
} stats_case_t;

/* Control messages of a round: round 1 (misses) always goes through rank
 * 0. Round 2 (all cached) too with the cached epoch off; with it on, it
 * may run in an epoch opened by round 1's last list and then need none
 * (docs/design.md, "The cached epoch"), or leave it (a rank descheduled
 * past PLAIT_EPOCH_WAIT_S) and need some. */
static int stats_control(int rank, const plait_stats_t *s, int round, int epoch) {
  if (round == 1 || !epoch)
    CHECK(s->control_messages > 0, "round %d, epoch %s: no control message", round,
          epoch ? "on" : "off");
  CHECK(s->control_bytes >= s->control_messages, "round %d: %llu control messages, %llu bytes",
        round, (unsigned long long)s->control_messages, (unsigned long long)s->control_bytes);
  return 0;
}

static int stats_body(int rank, int n, void *varg) {
  const stats_case_t *arg = varg;
  int fusion = arg->fusion;
  const uint64_t tensors = ST_SINGLES + ST_GROUP;
  uint64_t bytes;
  int bytes_wrong = 0;
  plait_stats_t s;
  for (int round = 1; round <= 2; round++) {
    OK(plait_stats_reset());
    if (stats_workload(rank, n, &bytes)) return 1;
    OK(ops_stats(&s));
    CHECK(s.tensors == tensors, "round %d: stats.tensors %llu after %llu tensors (12 + a group of "
          "5)", round, (unsigned long long)s.tensors, (unsigned long long)tensors);
    CHECK(s.responses >= 1 && s.responses <= s.tensors, "round %d: %llu responses for %llu tensors",
          round, (unsigned long long)s.responses, (unsigned long long)s.tensors);
    /* plait.h: "bytes of tensor data". Fails today with fusion: the fused
     * path adds each member's padding to 64 bytes (execute.c, add_times
     * gets the padded buffer total). Reported, the other counters still
     * checked. */
    if (s.bytes != bytes) {
      ops_say_at(rank, __FILE__, __LINE__, "round %d, fusion %s: stats.bytes %llu, but the "
                 "tensors hold %llu bytes (%+lld)", round, fusion ? "on" : "off",
                 (unsigned long long)s.bytes, (unsigned long long)bytes,
                 (long long)(s.bytes - bytes));
      bytes_wrong = 1;
    }
    CHECK(s.cache_hits + s.cache_misses == tensors, "round %d: %llu hits + %llu misses", round,
          (unsigned long long)s.cache_hits, (unsigned long long)s.cache_misses);
    CHECK(s.cache_hits == (round == 2 ? tensors : 0), "round %d: %llu cache hits", round,
          (unsigned long long)s.cache_hits);
    if (stats_control(rank, &s, round, arg->epoch)) return 1;
    /* (a cycle is counted when it ends, maybe after the handles completed) */
    CHECK(s.busy_cycles <= s.cycles, "round %d: %llu busy of %llu cycles", round,
          (unsigned long long)s.busy_cycles, (unsigned long long)s.cycles);
    CHECK(s.fused_tensors <= s.tensors && s.fusion_bytes <= s.fusion_capacity,
          "round %d: %llu fused tensors, %llu fusion bytes of %llu capacity", round,
          (unsigned long long)s.fused_tensors, (unsigned long long)s.fusion_bytes,
          (unsigned long long)s.fusion_capacity);
    if (fusion)
      CHECK(s.fused_responses >= 1 && s.fused_tensors >= ST_GROUP, "round %d: %llu fused "
            "responses, %llu fused tensors (the group of %d float32 alone fuses)", round,
            (unsigned long long)s.fused_responses, (unsigned long long)s.fused_tensors, ST_GROUP);
    else
      CHECK(s.fused_responses == 0 && s.responses == s.tensors, "round %d: %llu fused, %llu "
            "responses without fusion", round, (unsigned long long)s.fused_responses,
            (unsigned long long)s.responses);
  }
  OK(plait_stats_reset());
  OK(ops_stats(&s));
  CHECK(s.tensors == 0 && s.responses == 0 && s.bytes == 0 && s.cache_hits == 0 &&
        s.cache_misses == 0 && s.fused_responses == 0 && s.fused_tensors == 0 &&
        s.fusion_bytes == 0 && s.fusion_capacity == 0 && s.control_messages == 0 &&
        s.control_bytes == 0 && s.copy_in_s == 0 && s.transport_s == 0 && s.copy_out_s == 0,
        "after plait_stats_reset: %llu tensors, %llu responses, %llu bytes, %llu control messages",
        (unsigned long long)s.tensors, (unsigned long long)s.responses,
        (unsigned long long)s.bytes, (unsigned long long)s.control_messages);
  /* a caller built with an older, smaller plait_stats_t */
  plait_stats_t old;
  memset(&old, 0xEE, sizeof old);
  old.struct_size = offsetof(plait_stats_t, responses);
  OK(plait_stats(&old));
  CHECK(old.struct_size == offsetof(plait_stats_t, responses) && old.cache_misses == 0,
        "a small plait_stats_t: struct_size %zu, cache_misses %llu", old.struct_size,
        (unsigned long long)old.cache_misses);
  CHECK(old.responses == 0xEEEEEEEEEEEEEEEEull && old.copy_out_s != 0,
        "plait_stats wrote past the struct_size the caller gave");
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_stats(NULL));
  old.struct_size = 0;
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_stats(&old));
  return bytes_wrong;
}

static void run_stats(int nranks, int fusion, int epoch) {
  OPS_REQUIRE_GLOO();
  stats_case_t arg = {fusion, epoch};
  const char *env[] = {epoch ? "PLAIT_CACHED_EPOCH=1" : "PLAIT_CACHED_EPOCH=0",
                       fusion ? NULL : "PLAIT_FUSION_THRESHOLD=0", NULL};
  cr_assert_eq(ops_run(nranks, env, 60, stats_body, &arg), 0,
               "statistics, %d ranks, fusion %s, epoch %s: a rank failed (see above)", nranks,
               fusion ? "on" : "off", epoch ? "on" : "off");
}

Test(ops_allreduce, stats_add_up_3ranks_fusion, .timeout = 90) { run_stats(3, 1, 0); }
Test(ops_allreduce, stats_add_up_3ranks_nofusion, .timeout = 90) { run_stats(3, 0, 0); }
Test(ops_allreduce, stats_add_up_3ranks_fusion_epoch, .timeout = 90) { run_stats(3, 1, 1); }
Test(ops_allreduce, stats_add_up_3ranks_nofusion_epoch, .timeout = 90) { run_stats(3, 0, 1); }

/* The test's own converters against known bit patterns (no ranks). */
Test(ops_allreduce, half_converters) {
  static const struct { float f; uint16_t h, b; } k[] = {
      {0.0f, 0x0000, 0x0000},     {1.0f, 0x3C00, 0x3F80},    {-2.0f, 0xC000, 0xC000},
      {3.0f, 0x4200, 0x4040},     {65504.0f, 0x7BFF, 0x4780}, {1.0f / 3, 0x3555, 0x3EAB},
      {0.1f, 0x2E66, 0x3DCD},     {-0.5f, 0xB800, 0xBF00},   {0x1p-24f, 0x0001, 0x3380},
      {65520.0f, 0x7C00, 0x4780}, {2.3333333f, 0x40AB, 0x4015}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    cr_expect_eq(ops_f32_to_f16(k[i].f), k[i].h, "float16 of %g: 0x%04X, expected 0x%04X",
                 (double)k[i].f, ops_f32_to_f16(k[i].f), k[i].h);
    cr_expect_eq(ops_f32_to_bf16(k[i].f), k[i].b, "bfloat16 of %g: 0x%04X, expected 0x%04X",
                 (double)k[i].f, ops_f32_to_bf16(k[i].f), k[i].b);
  }
  for (unsigned h = 0; h < 0x7C00; h++) /* every finite non-negative float16 round-trips */
    cr_assert_eq(ops_f32_to_f16(ops_f16_to_f32((uint16_t)h)), h, "0x%04X", h);
}
