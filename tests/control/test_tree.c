/*
 * The control-plane tree (src/control/tree.h, PLAIT_CONTROL_FANOUT):
 *
 *  - its shape: every rank but 0 is the child of exactly one parent, fan-out
 *    at most k, depth log_k;
 *  - 16 ranks with k=2 (depth 4) and 32 ranks with k=4 (depth 3) over real
 *    ranks on loopback: allreduces (cached after the first step), a
 *    broadcast and by-name operations give exactly the sums the star gives,
 *    and rank 0 sends a list to its k children only (its control messages,
 *    against the same job run as a star: fewer by about (N-1)/k);
 *  - a job of k+1 ranks or fewer has no tree (the shape test; nothing of
 *    the tree is connected or sent then); unset, the variable is 8: a job
 *    of 12 ranks is a tree;
 *  - a mismatch from a rank at depth 3 and a stall of another fail every
 *    rank naming the rank, as on the star (rank 0 records each relayed
 *    request as its origin's own);
 *  - the AND of cached ids on the way up (src/engine/negotiate/tree_and.h): in a
 *    32-rank job with k=2, rank 1 (a subtree of 16 ranks) sends no more
 *    control bytes per operation than rank 7 (a subtree of 4), both with 2
 *    children (without the AND, rank 1 forwards 16 announcements per
 *    operation and rank 7 4); a cached operation that a rank at depth 3
 *    never submits fails by the stall abort naming it, as on the star;
 *  - process sets (two halves of 16 ranks, k=2) and join through the tree;
 *  - kill -9 of a mid-tree rank in a 16-rank job (k=2, rank 3: parent of 7
 *    and 8, grandparent of 15), over gloo and over ofi/shm: every survivor's
 *    operation fails with PLAIT_ERR_PEER_LOST naming rank 3, within the
 *    timeout, and plait_shutdown returns.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "control/tree.h"
#include "failure_helpers.h"

TestSuite(tree, .init = clean_plait_env);

Test(tree, shape_every_rank_has_one_parent) {
  const int ks[] = {2, 3, 4, 8, 16};
  const int sizes[] = {4, 5, 16, 17, 18, 32, 100, 256, 4096};
  for (size_t a = 0; a < sizeof ks / sizeof *ks; a++)
    for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++) {
      int k = ks[a], n = sizes[b];
      int *seen = calloc((size_t)n, sizeof *seen);
      cr_assert_not_null(seen);
      for (int r = 0; r < n; r++) {
        int first, m = plait_tree_children(r, k, n, &first);
        cr_assert(m >= 0 && m <= k, "k=%d n=%d rank %d: %d children", k, n, r, m);
        for (int c = first; c < first + m; c++) {
          cr_assert_eq(plait_tree_parent(c, k), r, "k=%d n=%d: %d's parent", k, n, c);
          seen[c]++;
        }
      }
      cr_assert_eq(seen[0], 0);
      for (int r = 1; r < n; r++) cr_assert_eq(seen[r], 1, "k=%d n=%d: rank %d seen %d times", k,
                                               n, r, seen[r]);
      free(seen);
      cr_assert_eq(plait_tree_active(k, n), n > k + 1, "k=%d n=%d", k, n);
    }
  cr_assert_eq(plait_tree_parent(0, 4), -1);
  cr_assert_eq(plait_tree_depth(2, 16), 4); /* 0; 1-2; 3-6; 7-14; 15 */
  cr_assert_eq(plait_tree_depth(4, 32), 3); /* 0; 1-4; 5-20; 21-31 */
  cr_assert_eq(plait_tree_depth(8, 256), 3);
  cr_assert_eq(plait_tree_depth(16, 4096), 3);
  cr_assert_eq(plait_tree_depth(16, 17), 0); /* the star */
  cr_assert_eq(plait_tree_active(0, 100) + plait_tree_active(1, 100), 0);
}

#define STEPS 12
#define GRADS 3
#define ELEMS 64

typedef struct {
  atomic_llong messages0, bytes0; /* rank 0's control messages and bytes sent */
} counts_t;

/* Steps of GRADS cached allreduces, a broadcast and a fresh name each step;
 * every result checked exactly. */
static int workload(int rank, int n, void *arg) {
  counts_t *out = arg;
  EXPECT_OK(plait_init());
  float x[GRADS][ELEMS], b[ELEMS];
  for (int step = 0; step < STEPS; step++) {
    plait_handle_t *h[GRADS + 2];
    char name[32];
    for (int g = 0; g < GRADS; g++) {
      for (int i = 0; i < ELEMS; i++) x[g][i] = (float)(rank + step + g + i);
      snprintf(name, sizeof name, "grad.%d", g);
      EXPECT_OK(allreduce(name, x[g], ELEMS, PLAIT_OP_SUM, NULL, &h[g]));
    }
    for (int i = 0; i < ELEMS; i++) b[i] = (float)(rank * 1000 + i);
    plait_tensor_t bt = f32(b, ELEMS);
    EXPECT_OK(plait_broadcast_async("weights", &bt, n - 1, NULL, &h[GRADS]));
    float fresh[1] = {(float)rank};
    snprintf(name, sizeof name, "fresh.%d", step); /* never cached: by name */
    EXPECT_OK(allreduce(name, fresh, 1, PLAIT_OP_SUM, NULL, &h[GRADS + 1]));
    for (int i = 0; i < GRADS + 2; i++) {
      EXPECT_OK(plait_wait(h[i], 60));
      EXPECT_OK(plait_release(h[i]));
    }
    for (int g = 0; g < GRADS; g++)
      for (int i = 0; i < ELEMS; i++) {
        float want = (float)(n * (n - 1) / 2 + n * (step + g + i));
        if (x[g][i] != want) FAIL("step %d grad.%d[%d] = %g, want %g", step, g, i, x[g][i], want);
      }
    for (int i = 0; i < ELEMS; i++)
      if (b[i] != (float)((n - 1) * 1000 + i)) FAIL("broadcast[%d] = %g", i, b[i]);
    if (fresh[0] != (float)(n * (n - 1) / 2)) FAIL("fresh.%d = %g", step, fresh[0]);
  }
  plait_stats_t st = {.struct_size = sizeof st};
  EXPECT_OK(plait_stats(&st));
  if (rank == 0) {
    atomic_store(&out->messages0, (long long)st.control_messages);
    atomic_store(&out->bytes0, (long long)st.control_bytes);
  }
  EXPECT_OK(plait_shutdown());
  return 0;
}

/* One job of n ranks with PLAIT_CONTROL_FANOUT=k (k < 0: unset, the
 * default); rank 0's counts. */
static void run_job(int n, int k, counts_t *got) {
  char fan[48];
  snprintf(fan, sizeof fan, "PLAIT_CONTROL_FANOUT=%d", k);
  const char *env[] = {"PLAIT_TIMEOUT_S=30", k < 0 ? NULL : fan, NULL};
  counts_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(sh != MAP_FAILED);
  memset(sh, 0, sizeof *sh);
  plait_test_job_t job = {.nranks = n, .timeout_s = 240, .env = env};
  int rc = plait_test_run_ranks(&job, workload, sh);
  cr_assert_eq(rc, 0, "%d ranks, PLAIT_CONTROL_FANOUT=%d: a rank failed (see above)", n, k);
  *got = *sh;
  munmap(sh, sizeof *sh);
}

/* The tree against the star, the same job: same results (checked in the
 * ranks), and rank 0 sends to its k children only. */
static void tree_against_star(int n, int k) {
  counts_t star, tree;
  run_job(n, 0, &star);
  run_job(n, k, &tree);
  long long ms = atomic_load(&star.messages0), mt = atomic_load(&tree.messages0);
  fprintf(stderr, "%d ranks: rank 0 sent %lld control messages as a star, %lld with a tree of "
          "fan-out %d\n", n, ms, mt, k);
  /* each list: n-1 messages from rank 0 as a star, k with the tree */
  cr_expect_gt(ms, 0);
  cr_expect_lt(mt * (n - 1), ms * k * 2, "rank 0 sent %lld messages with the tree, %lld as a star",
               mt, ms);
}

Test(tree, sixteen_ranks_fanout_2_same_results_as_the_star, .timeout = 600) {
  tree_against_star(16, 2);
}

Test(tree, thirty_two_ranks_fanout_4_same_results_as_the_star, .timeout = 900) {
  tree_against_star(32, 4);
}

/* The default is a tree of fan-out 8 from 10 ranks on: at 12 ranks, with
 * the variable unset, rank 0 sends each list to 8 ranks, not 11 (about 8/11
 * of the star's messages; the star's own count is the same job with 0). */
Test(tree, the_default_is_a_tree_of_fanout_8_from_10_ranks, .timeout = 600) {
  counts_t star, dflt;
  run_job(12, 0, &star);
  run_job(12, -1, &dflt);
  long long ms = atomic_load(&star.messages0), md = atomic_load(&dflt.messages0);
  fprintf(stderr, "12 ranks: rank 0 sent %lld control messages as a star, %lld by default\n",
          ms, md);
  cr_expect_gt(ms, 0);
  cr_expect_lt(md * 100, ms * 85, "rank 0 sent %lld messages by default, %lld as a star: "
               "not the tree of fan-out 8 (8/11 of the star's)", md, ms);
}

/* ---- the AND of cached ids: bytes per rank constant in N ----------------- */

#define AND_RANKS 32
#define AND_STEPS 40

typedef struct {
  atomic_llong bytes[AND_RANKS], messages[AND_RANKS];
} rank_bytes_t;

/* Steps of 3 cached allreduces (after the first), each rank's control bytes. */
static int cached_steps(int rank, int n, void *arg) {
  rank_bytes_t *out = arg;
  EXPECT_OK(plait_init());
  for (int step = 0; step < AND_STEPS; step++)
    for (int g = 0; g < 3; g++) {
      float x[4] = {(float)rank, 1, 2, 3};
      char name[16];
      snprintf(name, sizeof name, "and.%d", g);
      EXPECT_OK(allreduce_wait(name, x, 4, 60));
      if (x[0] != (float)(n * (n - 1) / 2) || x[3] != (float)(3 * n))
        FAIL("step %d %s = %g %g", step, name, x[0], x[3]);
    }
  plait_stats_t st = {.struct_size = sizeof st};
  EXPECT_OK(plait_stats(&st));
  atomic_store(&out->bytes[rank], (long long)st.control_bytes);
  atomic_store(&out->messages[rank], (long long)st.control_messages);
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(tree, and_of_cached_ids_keeps_bytes_per_rank_constant_in_the_subtree, .timeout = 600) {
  const char *env[] = {"PLAIT_CONTROL_FANOUT=2", "PLAIT_TIMEOUT_S=30", NULL};
  rank_bytes_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
  cr_assert(sh != MAP_FAILED);
  memset(sh, 0, sizeof *sh);
  plait_test_job_t job = {.nranks = AND_RANKS, .timeout_s = 400, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, cached_steps, sh), 0, "a rank failed (see above)");
  long long b1 = atomic_load(&sh->bytes[1]), b7 = atomic_load(&sh->bytes[7]);
  fprintf(stderr, "%d ranks, k=2, %d cached allreduces: control bytes sent by rank 1 (16 "
          "ranks below it) %lld, by rank 7 (4) %lld, by rank 0 %lld\n", AND_RANKS,
          3 * AND_STEPS, b1, b7, (long long)atomic_load(&sh->bytes[0]));
  cr_assert_gt(b7, 0);
  /* without the AND: about 2.5x (16 announcements per operation against 4) */
  cr_expect_lt(b1, b7 * 3 / 2, "rank 1 sent %lld bytes, rank 7 %lld", b1, b7);
  munmap(sh, sizeof *sh);
}

/* ---- a mid-tree rank lost ---------------------------------------------- */

#define VICTIM 3

static int lose_mid_tree_rank(int rank, int n, void *arg) {
  shared_t *sh = arg;
  atomic_store(&sh->pid[rank], (int)getpid());
  EXPECT_OK(plait_init());
  float x[16] = {0};
  for (int i = 0; i < 3; i++) EXPECT_OK(allreduce_wait("grad", x, 16, 60));
  if (rank == VICTIM) raise(SIGKILL);
  plait_result_t rc = PLAIT_SUCCESS;
  double t0 = now();
  int i;
  for (i = 0; i < 1000 && rc == PLAIT_SUCCESS; i++) {
    t0 = now();
    rc = allreduce_wait("grad", x, 16, 60);
  }
  double took = now() - t0;
  plait_test_say(rank, "failed after %.2f s: %s: \"%s\"", took, plait_result_name(rc),
                 plait_last_error());
  EXPECT_ERR(rc, PLAIT_ERR_PEER_LOST, "rank 3");
  if (took > 20) FAIL("noticed the loss after %.1f s (PLAIT_TIMEOUT_S=5)", took);
  atomic_fetch_add(&sh->count, 1);
  await_flag(&sh->count, n - 1, 30);
  double t1 = now();
  plait_shutdown();
  if (now() - t1 > 20) FAIL("plait_shutdown took %.1f s", now() - t1);
  return 0;
}

static void lose_rank_3(const char *transport) {
  shared_t *sh = shared_new();
  char tr[48];
  snprintf(tr, sizeof tr, "PLAIT_TRANSPORT=%s", transport);
  const char *env[] = {tr, "FI_PROVIDER=shm", "PLAIT_CONTROL_FANOUT=2", "PLAIT_TIMEOUT_S=5", NULL};
  plait_test_job_t job = {.nranks = 16, .timeout_s = 240, .env = env};
  plait_test_run_ranks(&job, lose_mid_tree_rank, sh);
  for (int r = 0; r < 16; r++)
    if (r != VICTIM)
      cr_expect_eq(job.exit_code[r], 0, "%s: rank %d did not see rank %d named", transport, r,
                   VICTIM);
  munmap(sh, sizeof *sh);
}

Test(tree, kill9_mid_tree_rank_gloo, .timeout = 300) { lose_rank_3("gloo"); }

Test(tree, kill9_mid_tree_rank_ofi_shm, .timeout = 300) {
  if (access(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", R_OK))
    cr_skip_test("the ofi transport plugin was not built (is libfabric-dev installed?)");
  lose_rank_3("ofi");
}

/* ---- rank 0's errors through the tree, word for word ------------------ */

#define ODD 11  /* at depth 3 with k=2: 11 -> 5 -> 2 -> 0 */
#define LATE 9  /* 9 -> 4 -> 1 -> 0 */

/* Step 0 caches "m" on every rank; at step 1 rank ODD sends another length
 * (by name, up the tree): every rank fails naming rank ODD. Then "lonely",
 * which rank LATE never submits (it waits on "after"), fails by
 * PLAIT_STALL_ABORT_S naming it (no deadlock check: PLAIT_STALL_WARN_S=0). */
static int errors_through_the_tree(int rank, int n, void *arg) {
  shared_t *sh = arg;
  EXPECT_OK(plait_init());
  float x[8] = {0};
  EXPECT_OK(allreduce_wait("m", x, 8, 60));
  plait_result_t rc = allreduce_wait("m", x, rank == ODD ? 4 : 8, 60);
  EXPECT_ERR(rc, PLAIT_ERR_MISMATCH, "'m'", "rank 11 sent");
  if (rank != LATE) {
    rc = allreduce_wait("lonely", x, 8, 60);
    EXPECT_ERR(rc, PLAIT_ERR_STALLED, "'lonely'", "rank 9 never submitted it");
    atomic_fetch_add(&sh->count, 1);
  } else if (!await_flag(&sh->count, n - 1, 120)) { /* "after" only then: it must not stall */
    FAIL("the others did not see 'lonely' fail");
  }
  EXPECT_OK(allreduce_wait("after", x, 8, 60)); /* the job goes on */
  /* "after" is cached now: the others' ids wait in the AND above rank 9
   * (ranks 4 and 1) until their hold ends, then go up in detail */
  if (rank != LATE) {
    rc = allreduce_wait("after", x, 8, 60);
    EXPECT_ERR(rc, PLAIT_ERR_STALLED, "'after'", "rank 9 never submitted it");
    atomic_fetch_add(&sh->count, 1);
  } else if (!await_flag(&sh->count, 2 * (n - 1), 120)) {
    FAIL("the others did not see the cached 'after' fail");
  }
  EXPECT_OK(allreduce_wait("last", x, 8, 60));
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(tree, mismatch_and_stall_name_the_rank_as_on_the_star, .timeout = 300) {
  const char *env[] = {"PLAIT_CONTROL_FANOUT=2", "PLAIT_STALL_WARN_S=0", "PLAIT_STALL_ABORT_S=2",
                       NULL};
  plait_test_job_t job = {.nranks = 16, .timeout_s = 240, .env = env};
  shared_t *sh = shared_new();
  cr_assert_eq(plait_test_run_ranks(&job, errors_through_the_tree, sh), 0,
               "a rank did not see rank 0's error (see above)");
  munmap(sh, sizeof *sh);
}

/* ---- process sets and join through the tree -------------------------- */

/* PLAIT_PROCESS_SETS="0,...,7;8,...,15" (ids 1 and 2): each half
 * allreduces within its set (cached after the first step, relayed across
 * the other half's ranks in the tree); then ranks 0-7 join while 8-15 run
 * two more global allreduces (the joined contribute zeros), and join. */
static int sets_and_join(int rank, int n, void *arg) {
  (void)arg;
  EXPECT_OK(plait_init());
  float x[4];
  for (int step = 0; step < 5; step++) {
    for (int i = 0; i < 4; i++) x[i] = (float)(rank + i);
    plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
    o.process_set = rank < 8 ? 1 : 2;
    plait_handle_t *h = NULL;
    EXPECT_OK(allreduce("half", x, 4, PLAIT_OP_SUM, &o, &h));
    EXPECT_OK(plait_wait(h, 60));
    EXPECT_OK(plait_release(h));
    int base = rank < 8 ? 0 : 8; /* the sum of the set's ranks, plus 8 * i */
    for (int i = 0; i < 4; i++)
      if (x[i] != (float)(8 * base + 28 + 8 * i)) FAIL("step %d half[%d] = %g", step, i, x[i]);
  }
  if (rank >= 8)
    for (int step = 0; step < 2; step++) {
      for (int i = 0; i < 4; i++) x[i] = 1;
      EXPECT_OK(allreduce_wait("late", x, 4, 60));
      for (int i = 0; i < 4; i++)
        if (x[i] != (float)(n - 8)) FAIL("late[%d] = %g with 8 ranks joined", i, x[i]);
    }
  plait_handle_t *j = NULL;
  EXPECT_OK(plait_join_async(NULL, &j));
  EXPECT_OK(plait_wait(j, 60));
  EXPECT_OK(plait_release(j));
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(tree, process_sets_and_join_through_the_tree, .timeout = 300) {
  const char *env[] = {"PLAIT_CONTROL_FANOUT=2",
                       "PLAIT_PROCESS_SETS=0,1,2,3,4,5,6,7;8,9,10,11,12,13,14,15", NULL};
  plait_test_job_t job = {.nranks = 16, .timeout_s = 240, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, sets_and_join, NULL), 0, "a rank failed (see above)");
}
