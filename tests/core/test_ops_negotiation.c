/*
 * What negotiation promises, through the public C ABI with real ranks forked
 * on loopback: grouped allreduces complete as one unit, ranks may submit in
 * any order, and ranks that run out of data join (plait_join_async) while the
 * others go on. Every result is checked exactly.
 */
#include <criterion/criterion.h>

#include "ops_util.h"

static const char *const no_env[] = {NULL};
static const char *const nofusion_env[] = {"PLAIT_FUSION_THRESHOLD=0", "PLAIT_CACHE_CAPACITY=0",
                                           NULL};

/* arg of the bodies: 1 when fusion is on */
static void run_env(int nranks, const char *const *env, ops_body_fn body, const char *what) {
  OPS_REQUIRE_GLOO();
  int fusion = env == no_env;
  cr_assert_eq(ops_run(nranks, env, 60, body, &fusion), 0, "%s, %d ranks: a rank failed (see "
               "above)", what, nranks);
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
/* A tensor of a test: buffers, submission, check                            */
/* ------------------------------------------------------------------------ */

typedef struct tensor_case {
  char name[64];
  plait_dtype_t d;
  plait_op_t op;
  size_t count;
  unsigned salt;
  int inplace;
  void *in, *out;
  plait_handle_t *h;
} tensor_case_t;

static int prepare(int rank, tensor_case_t *c) {
  size_t bytes = ops_bytes(c->d, c->count) + 1;
  if (!c->in) {
    c->in = malloc(bytes);
    c->out = c->inplace ? c->in : malloc(bytes);
    CHECK(c->in && c->out, "out of memory");
  }
  ops_fill(c->d, c->op, rank, c->in, c->count, c->salt);
  if (!c->inplace) memset(c->out, 0xA5, bytes);
  return 0;
}

static int submit(int rank, tensor_case_t *c) {
  if (prepare(rank, c)) return 1;
  plait_tensor_t in, out;
  OK(plait_tensor_1d(&in, c->in, c->count, c->d));
  OK(plait_tensor_1d(&out, c->out, c->count, c->d));
  OK(plait_allreduce_async(c->name, &in, &out, c->op, NULL, &c->h));
  return 0;
}

static int verify(int rank, int n, const tensor_case_t *c) {
  double got = 0, want = 0;
  long bad = ops_check(c->d, c->op, n, c->out, c->count, c->salt, 1.0, 1.0, &got, &want);
  CHECK(bad < 0, "%s (%s %s): element %ld is %.17g, expected %.17g", c->name,
        plait_dtype_name(c->d), plait_op_name(c->op), bad, got, want);
  return 0;
}

static void release_cases(tensor_case_t *cs, int n) {
  for (int i = 0; i < n; i++) {
    plait_release(cs[i].h);
    if (cs[i].out != cs[i].in) free(cs[i].out);
    free(cs[i].in);
  }
}

/* ------------------------------------------------------------------------ */
/* Grouped allreduce                                                         */
/* ------------------------------------------------------------------------ */

enum { GROUP_N = 5 };

typedef struct group {
  tensor_case_t m[GROUP_N];
  int count;
  plait_handle_t *h;
} group_t;

static void group_init(group_t *g, const char *prefix, plait_op_t op, int count) {
  static const plait_dtype_t dts[GROUP_N] = {PLAIT_FLOAT32, PLAIT_INT32, PLAIT_FLOAT64,
                                             PLAIT_FLOAT32, PLAIT_FLOAT32};
  static const size_t sizes[GROUP_N] = {1001, 17, 1, 0, 5000};
  memset(g, 0, sizeof *g);
  g->count = count;
  for (int i = 0; i < count; i++) {
    tensor_case_t *c = &g->m[i];
    snprintf(c->name, sizeof c->name, "%s/%d", prefix, i);
    c->d = dts[i];
    c->op = op;
    c->count = sizes[i];
    c->salt = (unsigned)i * 11u + (unsigned)strlen(prefix);
    c->inplace = i % 2;
  }
}

/* Submits the group's members in the order given by order[] (NULL: 0..). */
static int group_submit(int rank, group_t *g, const int *order) {
  const char *names[GROUP_N];
  plait_tensor_t in[GROUP_N], out[GROUP_N];
  for (int k = 0; k < g->count; k++) {
    tensor_case_t *c = &g->m[order ? order[k] : k];
    if (prepare(rank, c)) return 1;
    names[k] = c->name;
    OK(plait_tensor_1d(&in[k], c->in, c->count, c->d));
    OK(plait_tensor_1d(&out[k], c->out, c->count, c->d));
  }
  OK(plait_grouped_allreduce_async((size_t)g->count, names, in, out, g->m[0].op, NULL, &g->h));
  return 0;
}

static int group_finish(int rank, int n, group_t *g) {
  plait_result_t rc = plait_wait(g->h, 30);
  CHECK(rc == PLAIT_SUCCESS, "group %s: %s: %s", g->m[0].name, plait_result_name(rc),
        plait_last_error());
  int done = 0;
  OK(plait_poll(g->h, &done));
  CHECK(done == 1, "plait_poll says 0 after plait_wait succeeded");
  for (int k = 0; k < g->count; k++)
    if (verify(rank, n, &g->m[k])) return 1;
  plait_release(g->h);
  g->h = NULL;
  return 0;
}

/* A group among single tensors, at a different place on each rank. */
static int group_among_singles(int rank, int n) {
  tensor_case_t s[4];
  memset(s, 0, sizeof s);
  for (int k = 0; k < 4; k++) {
    snprintf(s[k].name, sizeof s[k].name, "single/%d", k);
    s[k].d = k % 2 ? PLAIT_FLOAT32 : PLAIT_INT32;
    s[k].op = PLAIT_OP_SUM;
    s[k].count = 100 + (size_t)k;
    s[k].salt = 200u + (unsigned)k;
    s[k].inplace = 1;
  }
  group_t g;
  group_init(&g, "g1", PLAIT_OP_SUM, GROUP_N);
  OK(plait_stats_reset());
  if (rank == 0) {
    if (submit(rank, &s[0]) || submit(rank, &s[1]) || group_submit(rank, &g, NULL) ||
        submit(rank, &s[2]) || submit(rank, &s[3]))
      return 1;
  } else if (rank == 1) {
    if (submit(rank, &s[3]) || submit(rank, &s[2]) || group_submit(rank, &g, NULL) ||
        submit(rank, &s[1]) || submit(rank, &s[0]))
      return 1;
  } else {
    if (group_submit(rank, &g, NULL)) return 1;
    for (int k = 0; k < 4; k++)
      if (submit(rank, &s[(k + rank) % 4])) return 1;
  }
  if (group_finish(rank, n, &g)) return 1;
  for (int k = 0; k < 4; k++) {
    OK(plait_wait(s[k].h, 30));
    if (verify(rank, n, &s[k])) return 1;
  }
  release_cases(s, 4);
  release_cases(g.m, GROUP_N);
  plait_stats_t st;
  OK(ops_stats(&st));
  CHECK(st.tensors == 4 + GROUP_N, "stats.tensors %llu after 4 tensors and a group of %d",
        (unsigned long long)st.tensors, GROUP_N);
  return 0;
}

/* The group's handle completes only once every rank submitted it: rank 1
 * submits it only after an allreduce that rank 0 joins after looking at its
 * own unfinished handle. */
static int group_waits_for_every_rank(int rank, int n) {
  group_t g;
  group_init(&g, "g2", PLAIT_OP_MAX, GROUP_N);
  if (rank != 1 && group_submit(rank, &g, NULL)) return 1;
  if (rank == 0) {
    int done = -1;
    OK(plait_poll(g.h, &done));
    CHECK(done == 0, "the group completed before rank 1 submitted it");
    EXPECT_RC(PLAIT_ERR_TIMEOUT, plait_wait(g.h, 0));
    EXPECT_RC(PLAIT_ERR_TIMEOUT, plait_wait(g.h, 0.05));
    plait_tensor_t t;
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_handle_output(g.h, &t));
  }
  if (sync_all(rank, "g2/go")) return 1;
  if (rank == 1 && group_submit(rank, &g, NULL)) return 1;
  if (group_finish(rank, n, &g)) return 1;
  release_cases(g.m, GROUP_N);
  return 0;
}

/* A failing member fails the whole group, on every rank. */
static int group_fails_whole(int rank) {
  group_t g;
  group_init(&g, "g3", PLAIT_OP_SUM, 3);
  if (rank == 1) g.m[1].count = 18; /* 17 elsewhere */
  if (group_submit(rank, &g, NULL)) return 1;
  plait_result_t rc = plait_wait(g.h, 30);
  CHECK(rc == PLAIT_ERR_MISMATCH, "a group with a mismatched member: %s: %s",
        plait_result_name(rc), plait_last_error());
  CHECK(strstr(plait_last_error(), "g3/1") != NULL, "the message does not name 'g3/1': %s",
        plait_last_error());
  plait_release(g.h);
  release_cases(g.m, 3);
  return 0;
}

/* A lone group of same-dtype members is one collective (with fusion). */
static int group_is_one_collective(int rank, int n, int fusion) {
  group_t g;
  group_init(&g, "g4", PLAIT_OP_SUM, GROUP_N);
  for (int k = 0; k < GROUP_N; k++) g.m[k].d = PLAIT_FLOAT32;
  OK(plait_stats_reset());
  if (group_submit(rank, &g, NULL) || group_finish(rank, n, &g)) return 1;
  plait_stats_t st;
  OK(ops_stats(&st));
  uint64_t want_responses = fusion ? 1 : GROUP_N, want_fused = fusion ? GROUP_N : 0;
  CHECK(st.tensors == GROUP_N && st.responses == want_responses && st.fused_tensors == want_fused,
        "a group of %d float32 members, fusion %s: %llu tensors in %llu responses, %llu fused",
        GROUP_N, fusion ? "on" : "off", (unsigned long long)st.tensors,
        (unsigned long long)st.responses, (unsigned long long)st.fused_tensors);
  release_cases(g.m, GROUP_N);
  return 0;
}

static int grouped_body(int rank, int n, void *arg) {
  int fusion = *(const int *)arg;
  return group_among_singles(rank, n) || group_waits_for_every_rank(rank, n) ||
         group_fails_whole(rank) || group_is_one_collective(rank, n, fusion);
}

/* The same group, its members listed in another order on rank 1: the same
 * names with the same arguments, which plait.h says may come in any order.
 * Fails today: a group is keyed by its first name (api_ops.c sets
 * meta.group = names[0]), so rank 1's group 'gm/4' mismatches 'gm/0'. */
static int group_member_order_body(int rank, int n, void *arg) {
  (void)arg;
  group_t g;
  group_init(&g, "gm", PLAIT_OP_SUM, GROUP_N);
  static const int reversed[GROUP_N] = {4, 3, 2, 1, 0};
  if (group_submit(rank, &g, rank == 1 ? reversed : NULL)) return 1;
  if (group_finish(rank, n, &g)) return 1;
  release_cases(g.m, GROUP_N);
  return 0;
}

Test(ops_negotiation, grouped_2ranks, .timeout = 90) { run_env(2, no_env, grouped_body, "grouped"); }
Test(ops_negotiation, grouped_3ranks, .timeout = 90) { run_env(3, no_env, grouped_body, "grouped"); }
Test(ops_negotiation, grouped_4ranks_nofusion, .timeout = 90) {
  run_env(4, nofusion_env, grouped_body, "grouped, no fusion");
}
Test(ops_negotiation, grouped_members_in_another_order_on_rank1, .timeout = 90) {
  run_env(3, no_env, group_member_order_body, "group members reordered on rank 1");
}

/* ------------------------------------------------------------------------ */
/* Submission order                                                          */
/* ------------------------------------------------------------------------ */

enum { ORD_N = 48 };

/* Kind of tensor k: mostly allreduces, some broadcasts and allgathers. */
static int ord_kind(int k) { return k % 8 == 3 ? 1 : k % 8 == 5 ? 2 : 0; }

static int ordering_body(int rank, int n, void *arg) {
  (void)arg;
  static const plait_dtype_t dts[] = {PLAIT_FLOAT32, PLAIT_INT32, PLAIT_FLOAT64, PLAIT_INT8,
                                      PLAIT_BFLOAT16};
  tensor_case_t cs[ORD_N];
  memset(cs, 0, sizeof cs);
  int order[ORD_N];
  if (rank == 0) {
    for (int k = 0; k < ORD_N; k++) order[k] = k;
  } else if (rank == 1) {
    for (int k = 0; k < ORD_N; k++) order[k] = ORD_N - 1 - k;
  } else {
    ops_shuffle(order, ORD_N, 7u * (unsigned)rank);
  }
  for (int k = 0; k < ORD_N; k++) {
    tensor_case_t *c = &cs[k];
    snprintf(c->name, sizeof c->name, "ord/%d", k);
    c->d = dts[k % 5];
    c->op = k % 3 == 0 ? PLAIT_OP_MAX : PLAIT_OP_SUM;
    c->count = k % 7 == 0 ? 0 : (size_t)(k * 37 % 300 + 1);
    c->salt = (unsigned)k;
    c->inplace = k % 2;
  }
  for (int round = 0; round < 2; round++) { /* the second from the response cache */
    for (int j = 0; j < ORD_N; j++) {
      int k = order[j];
      tensor_case_t *c = &cs[k];
      if (ord_kind(k) == 0) {
        if (submit(rank, c)) return 1;
      } else {
        if (prepare(rank, c)) return 1;
        plait_tensor_t t;
        OK(plait_tensor_1d(&t, c->in, c->count, c->d));
        if (ord_kind(k) == 1)
          OK(plait_broadcast_async(c->name, &t, k % n, NULL, &c->h));
        else
          OK(plait_allgather_async(c->name, &t, NULL, &c->h));
      }
    }
    for (int j = 0; j < ORD_N; j++) {
      tensor_case_t *c = &cs[order[j]];
      int k = order[j];
      plait_result_t rc = plait_wait(c->h, 30);
      CHECK(rc == PLAIT_SUCCESS, "%s: %s: %s", c->name, plait_result_name(rc), plait_last_error());
      if (ord_kind(k) == 0) {
        if (verify(rank, n, c)) return 1;
      } else if (ord_kind(k) == 1) { /* the root's data everywhere */
        for (size_t i = 0; i < c->count; i++) {
          double g = ops_get(c->d, c->in, i), w = ops_value(c->d, c->op, k % n, i, c->salt);
          CHECK(g == w, "%s: broadcast element %zu is %g, expected %g", c->name, i, g, w);
        }
      } else {
        plait_tensor_t out;
        OK(plait_handle_output(c->h, &out));
        CHECK(out.shape[0] == (int64_t)(c->count * (size_t)n), "%s: %lld rows gathered", c->name,
              (long long)out.shape[0]);
        for (int r = 0; r < n; r++)
          for (size_t i = 0; i < c->count; i++) {
            double g = ops_get(c->d, out.data, (size_t)r * c->count + i);
            double w = ops_value(c->d, c->op, r, i, c->salt);
            CHECK(g == w, "%s: rank %d's element %zu is %g, expected %g", c->name, r, i, g, w);
          }
      }
      plait_release(c->h);
      c->h = NULL;
    }
  }
  release_cases(cs, ORD_N);
  return 0;
}

Test(ops_negotiation, order_reversed_2ranks, .timeout = 90) {
  run_env(2, no_env, ordering_body, "rank 1 reversed");
}
Test(ops_negotiation, order_reversed_shuffled_3ranks, .timeout = 90) {
  run_env(3, no_env, ordering_body, "rank 1 reversed, rank 2 shuffled");
}
Test(ops_negotiation, order_reversed_shuffled_4ranks, .timeout = 90) {
  run_env(4, no_env, ordering_body, "rank 1 reversed, ranks 2, 3 shuffled");
}
Test(ops_negotiation, order_reversed_shuffled_4ranks_nofusion_nocache, .timeout = 90) {
  run_env(4, nofusion_env, ordering_body, "reversed and shuffled, no fusion, no cache");
}

/* ------------------------------------------------------------------------ */
/* join                                                                      */
/* ------------------------------------------------------------------------ */

/* The allreduces only the last rank runs, after the others joined. */
enum { EXTRAS = 5 };

static void extras_init(tensor_case_t *x, const char *prefix) {
  static const plait_dtype_t dts[EXTRAS] = {PLAIT_FLOAT32, PLAIT_FLOAT32, PLAIT_INT32,
                                            PLAIT_INT16, PLAIT_FLOAT64};
  static const plait_op_t ops[EXTRAS] = {PLAIT_OP_SUM, PLAIT_OP_SUM, PLAIT_OP_MAX, PLAIT_OP_MIN,
                                         PLAIT_OP_PRODUCT};
  static const size_t sizes[EXTRAS] = {1001, 5, 1001, 33, 17};
  memset(x, 0, sizeof *x * EXTRAS);
  for (int k = 0; k < EXTRAS; k++) {
    snprintf(x[k].name, sizeof x[k].name, "%s/%s/%d", prefix, plait_op_name(ops[k]), k);
    x[k].d = dts[k];
    x[k].op = ops[k];
    x[k].count = sizes[k];
    x[k].salt = 300u + (unsigned)k;
    x[k].inplace = k % 2;
  }
}

/* The extras' data: negative for MAX and positive for MIN, so that only the
 * right identity (the type's smallest and largest value) leaves them be. */
static double extra_value(const tensor_case_t *c, size_t i) {
  double v = ops_value(c->d, c->op, 0, i, c->salt);
  if (c->op == PLAIT_OP_MAX) return -fabs(v) - 1;
  if (c->op == PLAIT_OP_MIN) return fabs(v) + 1;
  return v;
}

/* The last rank: three batches of allreduces (and an allgather) nobody else
 * submits, then join. */
static int extras_then_join(int rank, int n, const char *prefix, int *join_rank) {
  tensor_case_t x[EXTRAS];
  extras_init(x, prefix);
  static const int batch_of[EXTRAS] = {0, 0, 1, 2, 2};
  for (int b = 0; b < 3; b++) {
    for (int k = 0; k < EXTRAS; k++) {
      if (batch_of[k] != b) continue;
      if (prepare(rank, &x[k])) return 1;
      for (size_t i = 0; i < x[k].count; i++) ops_put(x[k].d, x[k].in, i, extra_value(&x[k], i));
      plait_tensor_t in, out;
      OK(plait_tensor_1d(&in, x[k].in, x[k].count, x[k].d));
      OK(plait_tensor_1d(&out, x[k].out, x[k].count, x[k].d));
      OK(plait_allreduce_async(x[k].name, &in, &out, x[k].op, NULL, &x[k].h));
    }
    plait_handle_t *ag = NULL;
    int64_t rows[2 * 3];
    char name[64];
    if (b == 2) {
      for (int i = 0; i < 6; i++) rows[i] = rank * 100 + i;
      plait_tensor_t t;
      OK(plait_tensor_1d(&t, rows, 2, PLAIT_INT64));
      t.ndim = 2;
      t.shape[1] = 3;
      snprintf(name, sizeof name, "%s/allgather", prefix);
      OK(plait_allgather_async(name, &t, NULL, &ag));
    }
    for (int k = 0; k < EXTRAS; k++) {
      if (batch_of[k] != b) continue;
      OK(plait_wait(x[k].h, 30));
      for (size_t i = 0; i < x[k].count; i++) {
        double g = ops_get(x[k].d, x[k].out, i), w = extra_value(&x[k], i);
        CHECK(g == w, "%s after the other ranks joined: element %zu is %.17g, expected this "
              "rank's own %.17g", x[k].name, i, g, w);
      }
    }
    if (b == 2) {
      OK(plait_wait(ag, 30));
      plait_tensor_t out;
      OK(plait_handle_output(ag, &out));
      CHECK(out.ndim == 2 && out.shape[0] == 2 && out.shape[1] == 3,
            "allgather with the others joined: shape [%lld, %lld]", (long long)out.shape[0],
            (long long)out.shape[1]);
      for (int i = 0; i < 6; i++)
        CHECK(((int64_t *)out.data)[i] == rank * 100 + i, "allgather row element %d", i);
      plait_release(ag);
    }
  }
  release_cases(x, EXTRAS);
  (void)n;
  plait_handle_t *h;
  OK(plait_join_async(NULL, &h));
  OK(plait_wait(h, 30));
  OK(plait_handle_join_rank(h, join_rank));
  plait_release(h);
  return 0;
}

static int join_round(int rank, int n, int last, const char *prefix) {
  /* batches every rank runs */
  tensor_case_t c[3];
  memset(c, 0, sizeof c);
  for (int b = 0; b < 2; b++) {
    for (int k = 0; k < 3; k++) {
      snprintf(c[k].name, sizeof c[k].name, "%s/common/%d/%d", prefix, b, k);
      c[k].d = k == 1 ? PLAIT_INT32 : PLAIT_FLOAT32;
      c[k].op = PLAIT_OP_SUM;
      c[k].count = 64 + (size_t)k;
      c[k].salt = (unsigned)(b * 3 + k);
      c[k].inplace = 1;
      if (submit(rank, &c[k])) return 1;
    }
    for (int k = 0; k < 3; k++) {
      OK(plait_wait(c[k].h, 30));
      if (verify(rank, n, &c[k])) return 1;
    }
    release_cases(c, 3);
    memset(c, 0, sizeof c);
  }
  int join_rank = -2;
  if (rank == last) {
    if (extras_then_join(rank, n, prefix, &join_rank)) return 1;
  } else {
    plait_handle_t *h;
    OK(plait_join_async(NULL, &h));
    OK(plait_wait(h, 30));
    OK(plait_handle_join_rank(h, &join_rank));
    plait_release(h);
  }
  CHECK(join_rank == last, "%s: plait_handle_join_rank gave %d; rank %d joined last", prefix,
        join_rank, last);
  return 0;
}

static int join_body(int rank, int n, void *arg) {
  (void)arg;
  if (join_round(rank, n, 0, "join1")) return 1;
  if (join_round(rank, n, n - 1, "join2")) return 1;
  /* after the joins every rank takes part again */
  tensor_case_t c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "after-join");
  c.d = PLAIT_INT32;
  c.op = PLAIT_OP_SUM;
  c.count = 10;
  c.inplace = 1;
  if (submit(rank, &c)) return 1;
  OK(plait_wait(c.h, 30));
  if (verify(rank, n, &c)) return 1;
  release_cases(&c, 1);
  return 0;
}

Test(ops_negotiation, join_uneven_batches_2ranks, .timeout = 90) {
  run_env(2, no_env, join_body, "join");
}
Test(ops_negotiation, join_uneven_batches_3ranks, .timeout = 90) {
  run_env(3, no_env, join_body, "join");
}
Test(ops_negotiation, join_uneven_batches_4ranks_nofusion, .timeout = 90) {
  run_env(4, nofusion_env, join_body, "join, no fusion");
}

/* Operations other than allreduce, allgather and barrier, submitted once the
 * other ranks have joined (the extra allreduce before them completes only
 * after that), fail naming the joined ranks, rather than wait forever; the
 * barrier completes (the joined ranks take part, tests/core/test_join.c). */
static int join_then_other_ops_body(int rank, int n, void *arg) {
  (void)arg, (void)n;
  if (rank != 0) {
    plait_handle_t *h;
    OK(plait_join_async(NULL, &h));
    OK(plait_wait(h, 30));
    plait_release(h);
    return 0;
  }
  int32_t x[4] = {1, 2, 3, 4};
  plait_tensor_t t;
  plait_handle_t *h, *hs[4];
  OK(plait_tensor_1d(&t, x, 4, PLAIT_INT32));
  OK(plait_allreduce_async("others-joined", &t, &t, PLAIT_OP_SUM, NULL, &h));
  OK(plait_wait(h, 30));
  plait_release(h);
  CHECK(x[0] == 1 && x[3] == 4, "allreduce with the others joined: %d %d", x[0], x[3]);
  static const char *what[4] = {"a broadcast", "a reducescatter", "an alltoall", "a barrier"};
  OK(plait_broadcast_async("late/broadcast", &t, 0, NULL, &hs[0]));
  OK(plait_reducescatter_async("late/reducescatter", &t, PLAIT_OP_SUM, NULL, &hs[1]));
  int64_t splits[PLAIT_TEST_MAX_RANKS] = {4}; /* all four rows to rank 0 */
  OK(plait_alltoall_async("late/alltoall", &t, splits, NULL, &hs[2]));
  OK(plait_barrier_async(NULL, &hs[3]));
  double deadline = ops_now() + 5;
  int fails = 0;
  for (int k = 0; k < 4; k++) {
    double left = deadline - ops_now();
    plait_result_t rc = plait_wait(hs[k], left > 0 ? left : 0);
    if (rc == PLAIT_ERR_TIMEOUT) {
      ops_say_at(rank, __FILE__, __LINE__, "%s submitted after every other rank joined is "
                 "still pending after 5 s; plait_join_async says it fails naming the joined "
                 "ranks", what[k]);
      fails = 1;
    } else if (k == 3 ? rc != PLAIT_SUCCESS
                      : rc == PLAIT_SUCCESS || !strstr(plait_last_error(), "joined")) {
      ops_say_at(rank, __FILE__, __LINE__, "%s with the other ranks joined: %s: %s", what[k],
                 plait_result_name(rc), plait_last_error());
      fails = 1;
    }
  }
  OK(plait_join_async(NULL, &h));
  OK(plait_wait(h, 30));
  plait_release(h);
  for (int k = 0; k < 4; k++) plait_release(hs[k]);
  return fails;
}

Test(ops_negotiation, join_then_other_ops_fail_3ranks, .timeout = 90) {
  run_env(3, no_env, join_then_other_ops_body, "other operations after the others joined");
}
