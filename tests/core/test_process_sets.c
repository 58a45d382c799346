/*
 * Process sets through the public C ABI (docs/process-sets.md), at 3 and 4
 * ranks: sets known at init (PLAIT_PROCESS_SETS), overlapping and disjoint;
 * many small allreduces on two sets at once with the same names (fused per
 * set, matched per set), every other operation on a set, a set's barrier;
 * dynamic sets (PLAIT_DYNAMIC_PROCESS_SETS=1) added, used, removed while
 * idle and their id used again; and the errors: an operation on a set this
 * rank is not in, an unknown id, the global set removed, adding without the
 * flag, ranks that add different sets, a set removed with an operation
 * pending.
 */
#include <criterion/criterion.h>

#include <sys/mman.h>

#include "ops_util.h"

/* opts for set id. */
static plait_op_options_t on(int32_t id) {
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.process_set = id;
  return o;
}

static int member(const int *ranks, int n, int rank) {
  for (int i = 0; i < n; i++)
    if (ranks[i] == rank) return 1;
  return 0;
}

/* The sets of PLAIT_PROCESS_SETS below: 3 ranks "0,1;1,2" (overlapping at
 * rank 1), 4 ranks "0,1;1,2,3;2,3" (0,1 and 2,3 disjoint, 1,2,3 overlapping
 * both). */
typedef struct {
  int n;
  int ranks[4];
} set_t;
static const set_t sets3[] = {{2, {0, 1}}, {2, {1, 2}}};
static const set_t sets4[] = {{2, {0, 1}}, {3, {1, 2, 3}}, {2, {2, 3}}};

#define K 24 /* tensors per set and round: small, so they fuse */

/* Queries agree with the sets made at init. */
static int check_queries(int rank, const set_t *sets, int nsets) {
  int32_t ids[8];
  int nids = 0;
  OK(plait_process_set_ids(ids, 8, &nids));
  CHECK(nids == nsets + 1, "%d ids, expected %d", nids, nsets + 1);
  for (int s = 0; s < nsets; s++) {
    CHECK(ids[s + 1] == s + 1, "id %d is %d", s + 1, ids[s + 1]);
    int size = 0, me = -2, got[8], n = 0;
    OK(plait_process_set_size(s + 1, &size));
    OK(plait_process_set_rank(s + 1, &me));
    OK(plait_process_set_ranks(s + 1, got, 8, &n));
    CHECK(size == sets[s].n && n == sets[s].n, "set %d: size %d, %d ranks", s + 1, size, n);
    int want = -1;
    for (int i = 0; i < sets[s].n; i++) {
      CHECK(got[i] == sets[s].ranks[i], "set %d: rank %d is %d", s + 1, i, got[i]);
      if (sets[s].ranks[i] == rank) want = i;
    }
    CHECK(me == want, "set %d: this rank is %d there, expected %d", s + 1, me, want);
  }
  int n = 0;
  EXPECT_RC(PLAIT_ERR_BUFFER_TOO_SMALL, plait_process_set_ranks(0, NULL, 0, &n));
  return 0;
}

/* K allreduces named t/0..t/K-1 on every set this rank is in, all at once
 * (the same names on different sets), then checked: the sum over the set's
 * members of (rank + 1) * (i + 1). */
static int fused_traffic(int rank, const set_t *sets, int nsets) {
  static float buf[8][K][5];
  plait_handle_t *h[8][K];
  memset(h, 0, sizeof h);
  for (int s = 0; s < nsets; s++) {
    if (!member(sets[s].ranks, sets[s].n, rank)) continue;
    plait_op_options_t o = on(s + 1);
    for (int i = 0; i < K; i++) {
      char name[32];
      snprintf(name, sizeof name, "t/%d", i);
      for (int j = 0; j < 5; j++) buf[s][i][j] = (float)((rank + 1) * (i + 1));
      plait_tensor_t t;
      OK(plait_tensor_1d(&t, buf[s][i], 5, PLAIT_FLOAT32));
      OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, &o, &h[s][i]));
    }
  }
  for (int s = 0; s < nsets; s++)
    for (int i = 0; i < K; i++) {
      if (!h[s][i]) continue;
      OK(plait_wait(h[s][i], 60));
      plait_release(h[s][i]);
      float want = 0;
      for (int m = 0; m < sets[s].n; m++) want += (float)((sets[s].ranks[m] + 1) * (i + 1));
      CHECK(buf[s][i][4] == want, "set %d, t/%d: %g, expected %g", s + 1, i, buf[s][i][4], want);
    }
  return 0;
}

/* allgather, broadcast (root: the set's last rank, a rank of the job),
 * alltoall, reducescatter, average and a barrier on set id. */
static int other_ops(int rank, int32_t id, const set_t *set) {
  plait_op_options_t o = on(id);
  int n = set->n, me = -1, root = set->ranks[n - 1];
  for (int i = 0; i < n; i++)
    if (set->ranks[i] == rank) me = i;
  plait_handle_t *h;
  plait_tensor_t t, out;
  /* allgather: member i gives i + 1 rows of value rank */
  float rows[8];
  for (int i = 0; i < 8; i++) rows[i] = (float)rank;
  OK(plait_tensor_1d(&t, rows, (size_t)me + 1, PLAIT_FLOAT32));
  OK(plait_allgather_async("o/gather", &t, &o, &h));
  OK(plait_wait(h, 60));
  OK(plait_handle_output(h, &out));
  int64_t k = 0;
  for (int i = 0; i < n; i++)
    for (int r = 0; r <= i; r++, k++)
      CHECK(((float *)out.data)[k] == (float)set->ranks[i], "allgather row %lld", (long long)k);
  CHECK(out.shape[0] == k, "allgather: %lld rows, expected %lld", (long long)out.shape[0],
        (long long)k);
  plait_release(h);
  /* broadcast from a root named by its rank in the job */
  float b[3] = {(float)rank, (float)rank, (float)rank};
  OK(plait_tensor_1d(&t, b, 3, PLAIT_FLOAT32));
  OK(plait_broadcast_async("o/bcast", &t, root, &o, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  CHECK(b[2] == (float)root, "broadcast from rank %d: %g", root, b[2]);
  /* alltoall: one row to each member, value 10 * rank + destination index */
  float a[4], rs[8];
  for (int i = 0; i < n; i++) a[i] = (float)(10 * rank + i);
  OK(plait_tensor_1d(&t, a, (size_t)n, PLAIT_FLOAT32));
  OK(plait_alltoall_async("o/a2a", &t, NULL, &o, &h));
  OK(plait_wait(h, 60));
  OK(plait_handle_output(h, &out));
  for (int i = 0; i < n; i++)
    CHECK(((float *)out.data)[i] == (float)(10 * set->ranks[i] + me), "alltoall from %d", i);
  plait_release(h);
  /* reducescatter: n rows of 1 + rank: each member gets its row of the sum */
  float sum = 0;
  for (int i = 0; i < n; i++) rs[i] = (float)(1 + rank), sum += (float)(1 + set->ranks[i]);
  OK(plait_tensor_1d(&t, rs, (size_t)n, PLAIT_FLOAT32));
  OK(plait_reducescatter_async("o/rs", &t, PLAIT_OP_SUM, &o, &h));
  OK(plait_wait(h, 60));
  OK(plait_handle_output(h, &out));
  CHECK(out.shape[0] == 1 && ((float *)out.data)[0] == sum, "reducescatter: %g, expected %g",
        ((float *)out.data)[0], sum);
  plait_release(h);
  /* average divides by the set's size */
  float v = (float)rank;
  OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
  OK(plait_allreduce_async("o/avg", &t, &t, PLAIT_OP_AVERAGE, &o, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  float want = 0;
  for (int i = 0; i < n; i++) want += (float)set->ranks[i];
  CHECK(fabsf(v - want / (float)n) < 1e-6f, "average: %g, expected %g", v, want / (float)n);
  OK(plait_barrier_async(&o, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  return 0;
}

static int global_allreduce(int rank, int n, const char *name) {
  float v = 1;
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  CHECK(v == (float)n, "global allreduce '%s': %g", name, v);
  return 0;
}

static int init_sets_body(int rank, int n, void *arg) {
  (void)arg;
  const set_t *sets = n == 3 ? sets3 : sets4;
  int nsets = n == 3 ? 2 : 3;
  if (check_queries(rank, sets, nsets)) return 1;
  plait_stats_t before, after;
  OK(ops_stats(&before));
  for (int round = 0; round < 3; round++) {
    if (fused_traffic(rank, sets, nsets)) return 1;
    if (global_allreduce(rank, n, "g/between")) return 1;
  }
  OK(ops_stats(&after));
  CHECK(after.fused_responses > before.fused_responses, "no fused response on the sets");
  for (int s = 0; s < nsets; s++)
    if (member(sets[s].ranks, sets[s].n, rank) && other_ops(rank, s + 1, &sets[s])) return 1;
  return global_allreduce(rank, n, "g/end");
}

static void run(int n, const char *const *env, ops_body_fn body) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(n, env, 120, body, NULL), 0, "a rank failed (see above)");
}

static const char *const init3[] = {"PLAIT_PROCESS_SETS=0,1;1,2", NULL};
static const char *const init4[] = {"PLAIT_PROCESS_SETS=0,1;1,2,3;2,3", NULL};
Test(process_sets, init_sets_overlapping_3ranks, .timeout = 150) { run(3, init3, init_sets_body); }
Test(process_sets, init_sets_overlapping_and_disjoint_4ranks, .timeout = 150) {
  run(4, init4, init_sets_body);
}

/* Errors that need no collective: every rank sees them at once. */
static int errors_body(int rank, int n, void *arg) {
  (void)arg;
  int32_t id = -1;
  int in[2] = {1, 2};
  EXPECT_RC(PLAIT_ERR_UNSUPPORTED, plait_process_set_add(in, 2, &id));
  CHECK(strstr(plait_last_error(), "PLAIT_DYNAMIC_PROCESS_SETS"), "%s", plait_last_error());
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_process_set_remove(0));
  CHECK(strstr(plait_last_error(), "global"), "%s", plait_last_error());
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_process_set_remove(7));
  CHECK(strstr(plait_last_error(), "process set 7"), "%s", plait_last_error());
  float v = 1;
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
  plait_op_options_t o = on(7);
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_allreduce_async("e/unknown", &t, &t, PLAIT_OP_SUM,
                                                              &o, &h));
  CHECK(strstr(plait_last_error(), "process set 7 does not exist"), "%s", plait_last_error());
  o = on(1); /* "1,2": rank 0 is not in it */
  if (rank == 0) {
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_allreduce_async("e/outside", &t, &t,
                                                                PLAIT_OP_SUM, &o, &h));
    CHECK(strstr(plait_last_error(), "rank 0 is not a member of process set 1 (ranks [1, 2])"),
          "%s", plait_last_error());
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_barrier_async(&o, &h));
    int me = 5;
    OK(plait_process_set_rank(1, &me));
    CHECK(me == -1, "rank in a set this rank is not in: %d", me);
  } else if (rank <= 2) {
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_broadcast_async("e/root", &t, 0, &o, &h));
    CHECK(strstr(plait_last_error(), "root 0 is not a member of process set 1"), "%s",
          plait_last_error());
    EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_join_async(&o, &h));
  }
  return global_allreduce(rank, n, "e/after");
}

static const char *const errors_env[] = {"PLAIT_PROCESS_SETS=1,2", NULL};
Test(process_sets, errors_3ranks, .timeout = 150) { run(3, errors_env, errors_body); }

/* Dynamic sets: added, used, removed while idle; the id comes back. Then
 * ranks that add different sets, and a removal with an operation pending. */
static int dynamic_body(int rank, int n, void *arg) {
  (void)arg;
  int32_t a = -1, b = -1, again = -1;
  int ra[2] = {1, 0}, rb[3] = {n - 1, 1, 2}; /* any order */
  OK(plait_process_set_add(ra, 2, &a));
  OK(plait_process_set_add(rb, n - 1, &b));
  CHECK(a == 1 && b == 2, "ids %d and %d, expected 1 and 2", a, b);
  set_t sa = {2, {0, 1}}, sb = {3, {1, 2, n - 1}};
  if (n == 3) sb.n = 2, sb.ranks[1] = 2; /* 1,2 */
  if (rank <= 1 && other_ops(rank, a, &sa)) return 1;
  if (member(sb.ranks, sb.n, rank) && other_ops(rank, b, &sb)) return 1;
  OK(plait_process_set_remove(a)); /* idle: nothing pending on it */
  plait_op_options_t o = on(a);
  float v = 1;
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_allreduce_async("d/gone", &t, &t, PLAIT_OP_SUM, &o,
                                                              &h));
  int rc3[2] = {0, n - 1};
  OK(plait_process_set_add(rc3, 2, &again));
  CHECK(again == a, "the freed id %d was not used again (got %d)", a, again);
  /* mismatched add: rank 0 asks for {0, 1}, the others for {0} (neither
   * exists, so every rank gets as far as negotiating it) */
  int m0[2] = {0, 1}, m1[1] = {0};
  int32_t bad = -1;
  EXPECT_RC(PLAIT_ERR_MISMATCH, plait_process_set_add(rank == 0 ? m0 : m1, rank == 0 ? 2 : 1,
                                                      &bad));
  CHECK(strstr(plait_last_error(), "process set ranks") && strstr(plait_last_error(), "[0, 1]") &&
        strstr(plait_last_error(), "[0]") && strstr(plait_last_error(), "rank 0 sent"),
        "%s", plait_last_error());
  /* removal with an operation pending: rank 0 submits on set `again`, rank
   * n-1 does not yet; every rank asks to remove it */
  o = on(again);
  if (rank == 0) OK(plait_allreduce_async("d/pending", &t, &t, PLAIT_OP_SUM, &o, &h));
  EXPECT_RC(PLAIT_ERR_INVALID_ARGUMENT, plait_process_set_remove(again));
  CHECK(strstr(plait_last_error(), "'d/pending'") && strstr(plait_last_error(), "pending"), "%s",
        plait_last_error());
  if (rank == n - 1) OK(plait_allreduce_async("d/pending", &t, &t, PLAIT_OP_SUM, &o, &h));
  if (rank == 0 || rank == n - 1) {
    OK(plait_wait(h, 60));
    plait_release(h);
    CHECK(v == 2, "d/pending: %g", v);
  }
  OK(plait_process_set_remove(again)); /* nothing pending now */
  OK(plait_process_set_remove(b));
  int nids = 0;
  int32_t ids[4];
  OK(plait_process_set_ids(ids, 4, &nids));
  CHECK(nids == 1 && ids[0] == 0, "%d sets left, expected the global one", nids);
  return global_allreduce(rank, n, "d/after");
}

static const char *const dynamic_env[] = {"PLAIT_DYNAMIC_PROCESS_SETS=1", NULL};
static const char *const dynamic_hvd_env[] = {"HOROVOD_DYNAMIC_PROCESS_SETS=1", NULL};
Test(process_sets, dynamic_3ranks, .timeout = 150) { run(3, dynamic_env, dynamic_body); }
Test(process_sets, dynamic_4ranks_horovod_variable, .timeout = 150) {
  run(4, dynamic_hvd_env, dynamic_body);
}

/* PLAIT_PROCESS_SETS that differs between ranks fails plait_init on every
 * rank, naming what differs, instead of leaving some ranks waiting. */
static int mismatched_init_rank(int rank, int nranks, void *arg) {
  (void)nranks, (void)arg;
  setenv("PLAIT_PROCESS_SETS", rank == 1 ? "0,1;1,2" : rank == 2 ? "0,2" : "0,1", 1);
  plait_result_t rc = plait_init();
  if (rc == PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init succeeded with mismatched PLAIT_PROCESS_SETS");
    plait_shutdown();
    return 1;
  }
  const char *why = plait_last_error();
  int ok = rc == PLAIT_ERR_MISMATCH && strstr(why, "PLAIT_PROCESS_SETS") &&
           (strstr(why, "number of sets") || strstr(why, "process set ranks"));
  if (!ok) plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), why);
  return !ok;
}

Test(process_sets, mismatched_init_sets_3ranks, .timeout = 150) {
  OPS_REQUIRE_GLOO();
  const char *env[] = {"PLAIT_TIMEOUT_S=15", NULL};
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = 3;
  job.timeout_s = 120;
  job.env = env;
  cr_assert_eq(plait_test_run_ranks(&job, mismatched_init_rank, NULL), 0,
               "a rank failed (see above)");
}

/* The stall inspector counts a set's members only: an operation on set
 * "1,2" that rank 1 submits and rank 2 never does names rank 2 alone (not
 * rank 0, which is not in the set) and fails after PLAIT_STALL_ABORT_S.
 * The other ranks wait for rank 1's verdict (a flag in shared memory, not a
 * plait operation, which would stall too) before the job goes on. */
static int stall_body(int rank, int n, void *arg) {
  volatile int *done = arg;
  if (rank == 1) {
    float v = 1;
    plait_tensor_t t;
    plait_handle_t *h;
    plait_op_options_t o = on(1);
    OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
    OK(plait_allreduce_async("stall/alone", &t, &t, PLAIT_OP_SUM, &o, &h));
    plait_result_t rc = plait_wait(h, 60);
    const char *why = plait_last_error();
    *done = 1;
    CHECK(rc == PLAIT_ERR_STALLED, "%s: %s", plait_result_name(rc), why);
    CHECK(strstr(why, "'stall/alone'") && strstr(why, "rank 2 never submitted it") &&
          !strstr(why, "rank 0") && !strstr(why, "ranks 0"), "%s", why);
    plait_release(h);
  } else {
    for (double t0 = ops_now(); !*done && ops_now() - t0 < 90;) ops_sleep(0.01);
    CHECK(*done, "rank 1 never reported its stalled operation");
  }
  return global_allreduce(rank, n, "stall/after"); /* the job goes on */
}

static const char *const stall_env[] = {"PLAIT_PROCESS_SETS=1,2", "PLAIT_STALL_ABORT_S=2",
                                        "PLAIT_STALL_WARN_S=1", NULL};
Test(process_sets, stall_names_the_sets_missing_member_3ranks, .timeout = 150) {
  OPS_REQUIRE_GLOO();
  int *done = mmap(NULL, sizeof *done, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(done != MAP_FAILED, "mmap failed");
  *done = 0;
  cr_assert_eq(ops_run(3, stall_env, 120, stall_body, done), 0, "a rank failed (see above)");
  munmap(done, sizeof *done);
}
