/*
 * Deadlocks across real ranks on loopback (engine/negotiate/deadlock.h): ranks whose
 * submissions drifted apart (rank 0 waits on 'alltoall.noname.110', rank 1
 * on 'alltoall.noname.111', as after an automatic name consumed on one rank
 * only) fail on every rank with PLAIT_ERR_STALLED once nothing moved for
 * PLAIT_STALL_WARN_S, with a message naming each rank's pending names, and
 * the job goes on. Before the detection existed both waits ran into their
 * limit (PLAIT_ERR_TIMEOUT here; a hang without a limit).
 *
 * And no false verdicts: a rank with nothing pending is busy however long;
 * a rank with something pending that submits the match within the stall
 * time is slow, not stuck. A process set whose members wait on each other
 * while a rank outside the set is busy is a deadlock of its members only.
 *
 * And process sets where one rank has the same names in flight on two sets
 * from two threads, renamed on one set ('same.0_1', as TensorFlow renames a
 * duplicate node name in one graph): the set's stall is aborted with
 * PLAIT_STALL_ABORT_S, and without it the deadlock detection ends it.
 *
 * Gloo here; ctest runs the same suite over ofi shm and ofi tcp
 * (tests/CMakeLists.txt, plait_ofi_rerun).
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "ops_util.h"

#define WAIT_S 30 /* a wait's limit: far above the stall time of 2 s */

static int allreduce_named(int rank, const char *name, const plait_op_options_t *o, int members) {
  float v = 1;
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, o, &h));
  OK(plait_wait(h, WAIT_S));
  plait_release(h);
  CHECK(v == (float)members, "allreduce '%s' on %d ranks gave %g", name, members, v);
  return 0;
}

/* Waits on h, which must fail as a deadlock naming every want[] phrase. */
static int expect_deadlock(int rank, plait_handle_t *h, const char *const *want) {
  double t0 = ops_now();
  plait_result_t rc = plait_wait(h, WAIT_S);
  const char *why = plait_last_error();
  CHECK(rc == PLAIT_ERR_STALLED, "after %.1f s: %s: %s", ops_now() - t0, plait_result_name(rc),
        why);
  for (int i = 0; want[i]; i++) CHECK(strstr(why, want[i]), "\"%s\" does not say \"%s\"", why,
                                      want[i]);
  plait_test_say(rank, "failed after %.1f s: %s", ops_now() - t0, why);
  plait_release(h);
  return 0;
}

/* ------------------------------------------------- drifted automatic names */

static int drift_body(int rank, int n, void *arg) {
  (void)arg;
  float in[2] = {1, 1};
  int64_t splits[2] = {1, 1};
  char name[64];
  snprintf(name, sizeof name, "alltoall.noname.%d", 110 + rank);
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, in, 2, PLAIT_FLOAT32));
  OK(plait_alltoall_async(name, &t, splits, NULL, &h));
  const char *want[] = {"deadlock: no operation can complete: rank 0 waits on "
                        "'alltoall.noname.110'; rank 1 waits on 'alltoall.noname.111' (nothing "
                        "moved for ", "PLAIT_STALL_WARN_S=2)", NULL};
  if (expect_deadlock(rank, h, want)) return 1;
  /* the job goes on: the same kind again, matched this time, and an allreduce */
  OK(plait_alltoall_async("alltoall.noname.112", &t, splits, NULL, &h));
  OK(plait_wait(h, WAIT_S));
  plait_release(h);
  return allreduce_named(rank, "after", NULL, n);
}

static const char *const stall2[] = {"PLAIT_STALL_WARN_S=2", NULL};

Test(deadlock_ranks, drifted_names_fail_on_every_rank_and_the_job_goes_on_2ranks, .timeout = 150) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(2, stall2, 120, drift_body, NULL), 0, "a rank failed (see above)");
}

/* 3 ranks, each waiting on its own name. They meet in a barrier first, so
 * that all three names are pending before the stall time (4 s) can pass:
 * ranks 0 and 1 alone, each waiting on a name the other never submits, are
 * a deadlock already (of those two: "deadlock among ranks 0, 1"). */
static int three_body(int rank, int n, void *arg) {
  (void)arg;
  plait_handle_t *hb;
  OK(plait_barrier_async(NULL, &hb));
  OK(plait_wait(hb, WAIT_S));
  plait_release(hb);
  char name[32];
  snprintf(name, sizeof name, "mine.%d", rank);
  float v = 1;
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h));
  const char *want[] = {"rank 0 waits on 'mine.0'; rank 1 waits on 'mine.1'; rank 2 waits on "
                        "'mine.2'", NULL};
  if (expect_deadlock(rank, h, want)) return 1;
  return allreduce_named(rank, "after", NULL, n);
}

static const char *const stall4[] = {"PLAIT_STALL_WARN_S=4", NULL};

Test(deadlock_ranks, every_rank_on_its_own_name_3ranks, .timeout = 150) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(3, stall4, 120, three_body, NULL), 0, "a rank failed (see above)");
}

/* ------------------------------------------------------ no false verdicts */

/* Rank 1 computes (nothing pending) for twice the stall time before it
 * submits what rank 0 waits on: a wait, not a deadlock. */
static int busy_body(int rank, int n, void *arg) {
  (void)arg;
  if (rank == 1) ops_sleep(4);
  return allreduce_named(rank, "late", NULL, n);
}

Test(deadlock_ranks, a_rank_busy_with_nothing_pending_is_not_failed_2ranks, .timeout = 150) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(2, stall2, 120, busy_body, NULL), 0, "a rank failed (see above)");
}

/* Both ranks have something pending that the other has not submitted yet;
 * rank 1 submits the match after 1 s, well within the stall time (5 s):
 * slow, not stuck. */
static int slow_body(int rank, int n, void *arg) {
  (void)arg;
  float a = 1, b = 1;
  plait_tensor_t ta, tb;
  plait_handle_t *ha, *hb;
  OK(plait_tensor_1d(&ta, &a, 1, PLAIT_FLOAT32));
  OK(plait_tensor_1d(&tb, &b, 1, PLAIT_FLOAT32));
  if (rank == 0) {
    OK(plait_allreduce_async("a", &ta, &ta, PLAIT_OP_SUM, NULL, &ha));
    OK(plait_wait(ha, WAIT_S));
    OK(plait_allreduce_async("b", &tb, &tb, PLAIT_OP_SUM, NULL, &hb));
  } else {
    OK(plait_allreduce_async("b", &tb, &tb, PLAIT_OP_SUM, NULL, &hb));
    ops_sleep(1);
    OK(plait_allreduce_async("a", &ta, &ta, PLAIT_OP_SUM, NULL, &ha));
    OK(plait_wait(ha, WAIT_S));
  }
  OK(plait_wait(hb, WAIT_S));
  plait_release(ha);
  plait_release(hb);
  CHECK(a == (float)n && b == (float)n, "a %g, b %g", a, b);
  return 0;
}

static const char *const stall5[] = {"PLAIT_STALL_WARN_S=5", NULL};

Test(deadlock_ranks, a_slow_rank_that_submits_within_the_stall_time_is_not_failed_2ranks,
     .timeout = 150) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(2, stall5, 120, slow_body, NULL), 0, "a rank failed (see above)");
}

/* ------------------------------------------------------------ process sets */

/* Set 1 = {0, 1}: its members wait on different names while rank 2 computes
 * (nothing pending) until both have their verdict (a flag in shared memory:
 * a plait operation would be pending, and then waited on, too). */
static int set_body(int rank, int n, void *arg) {
  atomic_int *verdicts = arg;
  if (rank < 2) {
    char name[32];
    snprintf(name, sizeof name, "set.%d", rank);
    float v = 1;
    plait_tensor_t t;
    plait_handle_t *h;
    plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
    o.process_set = 1;
    OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
    OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, &o, &h));
    const char *want[] = {"deadlock among ranks 0, 1 (each of their operations waits for one of "
                          "them): rank 0 waits on 'set.0'; rank 1 waits on 'set.1'", NULL};
    int bad = expect_deadlock(rank, h, want);
    atomic_fetch_add(verdicts, 1);
    if (bad) return 1;
    if (allreduce_named(rank, "set.after", &o, 2)) return 1; /* the set goes on */
  } else {
    for (double t0 = ops_now(); atomic_load(verdicts) < 2 && ops_now() - t0 < 90;)
      ops_sleep(0.01);
    CHECK(atomic_load(verdicts) == 2, "set 1's members never reported their verdict");
  }
  return allreduce_named(rank, "after", NULL, n); /* and so does the job */
}

Test(deadlock_ranks, a_deadlocked_set_while_a_rank_outside_it_is_busy_3ranks, .timeout = 150) {
  OPS_REQUIRE_GLOO();
  atomic_int *verdicts = mmap(NULL, sizeof *verdicts, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(verdicts != MAP_FAILED, "mmap failed");
  atomic_store(verdicts, 0);
  const char *env[] = {"PLAIT_STALL_WARN_S=2", "PLAIT_PROCESS_SETS=0,1", NULL};
  cr_assert_eq(ops_run(3, env, 120, set_body, verdicts), 0, "a rank failed (see above)");
  munmap(verdicts, sizeof *verdicts);
}

/* ------------------------------- names renamed on one set only (TF graph) */

/* Sets 1 = {0, 1} and 2 = {1, 2}; each rank submits 'same.0' and 'same.1'
 * on every set it is in, all at once, as one tf.function does, except that
 * rank 1's set-2 names come as TF renames a duplicate node name in one graph
 * ('same.0_1', 'same.1_1'), from a second thread. Set 1 completes; set 2's
 * four operations each miss a member that never submits it. */
typedef struct {
  int rank;
  int32_t set;
  const char *suffix;
  float v[2];
  plait_handle_t *h[2];
  int rc;
} renamed_t;

static int renamed_submit(renamed_t *s) {
  int rank = s->rank;
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.process_set = s->set;
  for (int i = 0; i < 2; i++) {
    char name[32];
    snprintf(name, sizeof name, "same.%d%s", i, s->suffix);
    plait_tensor_t t;
    s->v[i] = 1;
    OK(plait_tensor_1d(&t, &s->v[i], 1, PLAIT_FLOAT32));
    OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, &o, &s->h[i]));
  }
  return 0;
}

static void *renamed_thread(void *arg) {
  renamed_t *s = arg;
  s->rc = renamed_submit(s);
  return NULL;
}

/* Set 1's operations: both succeed. */
static int renamed_ok(renamed_t *s) {
  int rank = s->rank;
  for (int i = 0; i < 2; i++) {
    OK(plait_wait(s->h[i], WAIT_S));
    plait_release(s->h[i]);
    CHECK(s->v[i] == 2, "set 1's 'same.%d' gave %g", i, s->v[i]);
  }
  return 0;
}

/* Set 2's operations: each fails with PLAIT_ERR_STALLED saying want. */
static int renamed_failed(renamed_t *s, const char *want) {
  for (int i = 0; i < 2; i++) {
    const char *w[] = {want, NULL};
    if (expect_deadlock(s->rank, s->h[i], w)) return 1;
  }
  return 0;
}

typedef struct {
  atomic_int *verdicts; /* set 2's members that have their verdict */
  const char *want;     /* what set 2's failures say */
} renamed_arg_t;

static int renamed_body(int rank, int n, void *arg) {
  const renamed_arg_t *r = arg;
  renamed_t a = {.rank = rank, .set = 1, .suffix = ""};
  renamed_t b = {.rank = rank, .set = 2, .suffix = rank == 1 ? "_1" : ""};
  if (rank == 1) { /* its two sets from two threads */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, renamed_thread, &b) == 0, "pthread_create failed");
    a.rc = renamed_submit(&a);
    pthread_join(th, NULL);
    if (a.rc || b.rc) return 1;
  } else if (renamed_submit(rank == 0 ? &a : &b)) {
    return 1;
  }
  if (rank < 2 && renamed_ok(&a)) return 1;
  if (rank > 0) {
    int bad = renamed_failed(&b, r->want);
    atomic_fetch_add(r->verdicts, 1);
    if (bad) return 1;
  } else { /* computes (nothing pending) until set 2's members have theirs */
    for (double t0 = ops_now(); atomic_load(r->verdicts) < 2 && ops_now() - t0 < 90;)
      ops_sleep(0.01);
    CHECK(atomic_load(r->verdicts) == 2, "set 2's members never reported their verdict");
  }
  return allreduce_named(rank, "after", NULL, n); /* the job goes on */
}

static void renamed_run(const char *const *env, const char *want) {
  renamed_arg_t r = {mmap(NULL, sizeof(atomic_int), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0), want};
  cr_assert(r.verdicts != MAP_FAILED, "mmap failed");
  atomic_store(r.verdicts, 0);
  cr_assert_eq(ops_run(3, env, 120, renamed_body, &r), 0, "a rank failed (see above)");
  munmap(r.verdicts, sizeof(atomic_int));
}

/* With PLAIT_STALL_ABORT_S, set 2's operations are aborted. */
Test(deadlock_ranks, a_stall_on_a_process_set_is_aborted_3ranks, .timeout = 150) {
  OPS_REQUIRE_GLOO();
  const char *env[] = {"PLAIT_STALL_ABORT_S=3", "PLAIT_PROCESS_SETS=0,1;1,2", NULL};
  renamed_run(env, "PLAIT_STALL_ABORT_S=3");
}

/* Without it (the default), the deadlock detection ends the same wait: set
 * 2's members wait on each other while rank 0 has nothing pending. */
Test(deadlock_ranks, renamed_names_on_a_process_set_are_a_deadlock_3ranks, .timeout = 150) {
  OPS_REQUIRE_GLOO();
  const char *env[] = {"PLAIT_STALL_WARN_S=2", "PLAIT_PROCESS_SETS=0,1;1,2", NULL};
  renamed_run(env, "deadlock among ranks 1, 2");
}

/* A name submitted again after its abort is a new operation (as TensorFlow
 * resubmits a failed collective of constant inputs): it is aborted again,
 * not dropped as a late announcement of the failed one, nor left waiting.
 * Rank 1 submits 'again' on set 2 = {1, 2} twice; rank 2 never does. */
static int again_body(int rank, int n, void *arg) {
  atomic_int *done = arg;
  if (rank == 1) {
    plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
    o.process_set = 2;
    for (int round = 0; round < 2; round++) {
      float v = 1;
      plait_tensor_t t;
      plait_handle_t *h;
      OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
      OK(plait_allreduce_async("again", &t, &t, PLAIT_OP_SUM, &o, &h));
      const char *want[] = {"'again' stalled for ", "rank 2 never submitted it", NULL};
      if (expect_deadlock(rank, h, want)) break;
      if (round == 1) atomic_store(done, 1);
    }
    atomic_store(done, atomic_load(done) ? 1 : -1);
  } else {
    for (double t0 = ops_now(); !atomic_load(done) && ops_now() - t0 < 90;) ops_sleep(0.01);
  }
  CHECK(atomic_load(done) == 1, "rank 1's second 'again' was not aborted");
  return allreduce_named(rank, "after", NULL, n);
}

Test(deadlock_ranks, a_name_submitted_again_after_its_abort_is_aborted_again_3ranks,
     .timeout = 150) {
  OPS_REQUIRE_GLOO();
  atomic_int *done = mmap(NULL, sizeof *done, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(done != MAP_FAILED, "mmap failed");
  atomic_store(done, 0);
  const char *env[] = {"PLAIT_STALL_ABORT_S=2", "PLAIT_PROCESS_SETS=0,1;1,2", NULL};
  cr_assert_eq(ops_run(3, env, 120, again_body, done), 0, "a rank failed (see above)");
  munmap(done, sizeof *done);
}
