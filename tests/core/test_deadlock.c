/*
 * Tests of rank 0's deadlock detection (src/engine/negotiate/deadlock.c) through the
 * negotiator it is part of (src/engine/negotiate/negotiate.c): announcements in with
 * plait_neg_add, ticks at chosen times with plait_neg_plan, failures out in
 * the response lists. No sockets, no forked ranks. PLAIT_STALL_WARN_S is 2.
 *
 * Checked: ranks that wait on names nobody else submitted fail together
 * with PLAIT_ERR_STALLED and a message naming each rank's pending names,
 * only once nothing moved for the stall time, and the job goes on (late
 * announcements dropped, a matched operation runs); a rank with nothing
 * pending is busy, not deadlocked; an announcement within the stall time
 * puts the verdict off; a tick long after the last one (rank 0 was in a
 * collective) counts as movement; a joined rank counts as present and its
 * join is not failed; a group half ready (its ready member waits in the
 * ready list) does not hide a deadlock of its missing member and fails with
 * it; the names are bounded per rank; PLAIT_STALL_WARN_S=0
 * turns detection off; process sets: a set whose members wait on each other
 * while a rank outside is busy is a deadlock of its members only, and
 * operations that only a busy rank can complete are not.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "engine/transport/process_set.h"
#include "util/clock.h"

#define STALL 2.0
#define STEP 0.1 /* a tick every STEP seconds of the tick clock, as rank 0's poll gives */

static plait_negotiator_t N;
static plait_cache_t C;
static plait_psets_t *P;
static double T; /* the tick clock */

static void start_with(int size, double stall_warn_s) {
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.fusion_threshold = 1 << 20;
  cfg.stall_warn_s = stall_warn_s;
  cr_assert_eq(plait_cache_init(&C, 0), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_init(&N, size, &cfg, &C), PLAIT_SUCCESS);
  T = plait_now();
}

static void start(int size) { start_with(size, STALL); }

static void stop(void) {
  plait_neg_free(&N);
  plait_cache_free(&C);
  if (P) plait_psets_destroy(P);
  P = NULL;
}

static plait_meta_t meta(plait_coll_t coll, int32_t pset) {
  plait_meta_t m;
  memset(&m, 0, sizeof m);
  m.coll = (uint8_t)coll;
  m.dtype = PLAIT_FLOAT32;
  m.op = PLAIT_OP_SUM;
  m.device = -1;
  m.prescale = m.postscale = 1.0;
  m.ndim = 1;
  m.shape[0] = 4;
  m.pset = pset;
  return m;
}

static void announce_on(int rank, const char *name, plait_coll_t coll, int32_t pset) {
  plait_meta_t m = meta(coll, pset);
  cr_assert_eq(plait_neg_add(&N, rank, name, &m, -1, N.lists_sent), PLAIT_SUCCESS,
               "rank %d announcing '%s': %s", rank, name, plait_last_error());
}

static void announce(int rank, const char *name) {
  announce_on(rank, name, PLAIT_COLL_ALLREDUCE, 0);
}

/* Ticks every STEP until the clock reaches until or a list comes out;
 * returns that list (empty when none came). */
static plait_response_list_t run_until(double until) {
  plait_response_list_t l;
  memset(&l, 0, sizeof l);
  while (T < until) {
    T += STEP;
    int any = -1;
    cr_assert_eq(plait_neg_plan(&N, T, &l, &any), PLAIT_SUCCESS, "%s", plait_last_error());
    if (any) {
      N.lists_sent++;
      return l;
    }
    plait_responses_free(&l);
  }
  memset(&l, 0, sizeof l);
  return l;
}

/* The response for name in l, or NULL. */
static const plait_response_t *find(const plait_response_list_t *l, const char *name) {
  for (uint32_t i = 0; i < l->n; i++)
    for (uint32_t j = 0; j < l->r[i].n; j++)
      if (!strcmp(l->r[i].e[j].name, name)) return &l->r[i];
  return NULL;
}

static void expect_failed(const plait_response_list_t *l, const char *name, const char *words[]) {
  const plait_response_t *r = find(l, name);
  cr_assert(r, "'%s' is not in the list", name);
  cr_assert_eq(r->status, PLAIT_ERR_STALLED, "'%s': status %u", name, r->status);
  cr_assert(r->message, "'%s' failed without a message", name);
  for (int i = 0; words[i]; i++)
    cr_assert(strstr(r->message, words[i]), "'%s': \"%s\" does not say \"%s\"", name, r->message,
              words[i]);
}

/* --------------------------------------------------------------------- */

Test(deadlock, ranks_waiting_on_names_nobody_else_submitted_fail_together) {
  start(2);
  announce(0, "alltoall.noname.110");
  announce(1, "alltoall.noname.111");
  double t0 = T;
  plait_response_list_t l = run_until(t0 + STALL - 0.3);
  cr_assert_eq(l.n, 0, "failed before the stall time (at %.1f s)", T - t0);
  l = run_until(t0 + STALL + 1);
  cr_assert_eq(l.n, 2, "no verdict by %.1f s", T - t0);
  const char *words[] = {"deadlock: no operation can complete: rank 0 waits on "
                         "'alltoall.noname.110'; rank 1 waits on 'alltoall.noname.111' "
                         "(nothing moved for ", " s, PLAIT_STALL_WARN_S=2)", NULL};
  expect_failed(&l, "alltoall.noname.110", words);
  expect_failed(&l, "alltoall.noname.111", words);
  plait_responses_free(&l);
  cr_assert_eq(N.records.count, 0);
  /* announcements already on their way when the verdict went out: dropped */
  plait_meta_t m = meta(PLAIT_COLL_ALLREDUCE, 0);
  cr_assert_eq(plait_neg_add(&N, 1, "alltoall.noname.110", &m, -1, N.lists_sent - 1), 0);
  cr_assert_eq(plait_neg_add(&N, 0, "alltoall.noname.111", &m, -1, N.lists_sent - 1), 0);
  cr_assert_eq(N.records.count, 0, "stale announcements dropped");
  /* the job goes on */
  announce(0, "next");
  announce(1, "next");
  l = run_until(T + 1);
  cr_assert(find(&l, "next") && find(&l, "next")->status == 0, "'next' did not run");
  plait_responses_free(&l);
  stop();
}

Test(deadlock, a_rank_with_nothing_pending_is_busy_not_deadlocked) {
  start(2);
  announce(0, "a");
  plait_response_list_t l = run_until(T + 10 * STALL);
  cr_assert_eq(l.n, 0, "rank 1 has nothing pending: rank 0 waits, whatever the time");
  announce(1, "a");
  l = run_until(T + 1);
  cr_assert(find(&l, "a") && find(&l, "a")->status == 0);
  plait_responses_free(&l);
  stop();
}

Test(deadlock, operations_only_a_busy_rank_can_complete_are_not_deadlocked) {
  start(3);
  announce(0, "a");
  announce(1, "a"); /* 'a' waits for rank 2 alone, which has nothing pending */
  announce(1, "b");
  plait_response_list_t l = run_until(T + 10 * STALL);
  cr_assert_eq(l.n, 0, "rank 2 may still submit 'a' (and then 'b' may come)");
  stop();
}

Test(deadlock, an_announcement_within_the_stall_time_puts_the_verdict_off) {
  start(2);
  announce(0, "a");
  announce(1, "b");
  double t0 = T;
  plait_response_list_t l = run_until(t0 + 1.5);
  cr_assert_eq(l.n, 0);
  announce(1, "c"); /* rank 1 moved: still unmatched, but it moved */
  l = run_until(t0 + 1.5 + STALL - 0.3);
  cr_assert_eq(l.n, 0, "failed %.1f s after rank 1 last moved", T - t0 - 1.5);
  l = run_until(T + 1);
  cr_assert_eq(l.n, 3, "no verdict by %.1f s after the last movement", T - t0 - 1.5);
  const char *words[] = {"rank 0 waits on 'a'; rank 1 waits on 'b', 'c'", NULL};
  expect_failed(&l, "c", words);
  plait_responses_free(&l);
  stop();
}

Test(deadlock, a_slow_rank_that_submits_within_the_stall_time_is_not_failed) {
  start(2);
  announce(0, "a");
  announce(1, "b");
  double t0 = T;
  plait_response_list_t l = run_until(t0 + STALL - 0.5);
  cr_assert_eq(l.n, 0);
  announce(0, "b"); /* rank 0 was slow, not stuck */
  l = run_until(T + 1);
  cr_assert(find(&l, "b") && find(&l, "b")->status == 0, "'b' did not run");
  plait_responses_free(&l);
  l = run_until(T + 3 * STALL);
  cr_assert_eq(l.n, 0, "rank 1 has nothing pending now: 'a' only stalls");
  announce(1, "a");
  l = run_until(T + 1);
  cr_assert(find(&l, "a") && find(&l, "a")->status == 0, "'a' did not run");
  plait_responses_free(&l);
  stop();
}

Test(deadlock, a_tick_long_after_the_last_counts_as_movement) {
  start(2);
  announce(0, "a");
  announce(1, "b");
  plait_response_list_t l = run_until(T + 0.5);
  cr_assert_eq(l.n, 0);
  /* rank 0's thread was in a collective for longer than the stall time */
  T += 3 * STALL;
  l = run_until(T + STALL - 0.3);
  cr_assert_eq(l.n, 0, "failed right after rank 0 came back");
  l = run_until(T + 1);
  cr_assert_eq(l.n, 2, "no verdict a stall time after rank 0 came back");
  plait_responses_free(&l);
  stop();
}

Test(deadlock, a_joined_rank_is_present_and_its_join_is_not_failed) {
  start(3);
  announce_on(2, "plait:join.0", PLAIT_COLL_JOIN, 0);
  announce(0, "x"); /* misses rank 1 (rank 2 joined: present for allreduce) */
  announce(1, "y");
  plait_response_list_t l = run_until(T + STALL + 1);
  cr_assert_eq(l.n, 2, "no verdict");
  const char *words[] = {"rank 0 waits on 'x'; rank 1 waits on 'y'; rank 2 waits on "
                         "'plait:join.0'", NULL};
  expect_failed(&l, "x", words);
  expect_failed(&l, "y", words);
  cr_assert_null(find(&l, "plait:join.0"), "the join was failed");
  plait_responses_free(&l);
  announce_on(0, "plait:join.0", PLAIT_COLL_JOIN, 0);
  announce_on(1, "plait:join.0", PLAIT_COLL_JOIN, 0);
  l = run_until(T + 1);
  cr_assert(find(&l, "plait:join.0") && find(&l, "plait:join.0")->status == 0, "join failed");
  plait_responses_free(&l);
  stop();
}

/* A group's ready member waits (in the ready list) for the others; the
 * missing member is part of the deadlock, and failing it fails the group. */
Test(deadlock, a_group_half_ready_does_not_hide_the_deadlock) {
  start(2);
  plait_meta_t g = meta(PLAIT_COLL_ALLREDUCE, 0);
  g.group = "g", g.group_size = 2;
  cr_assert_eq(plait_neg_add(&N, 0, "g1", &g, -1, 0), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_add(&N, 0, "g2", &g, -1, 0), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_add(&N, 1, "g1", &g, -1, 0), PLAIT_SUCCESS);
  announce(1, "z"); /* rank 1 went on to something rank 0 never submits */
  plait_response_list_t l = run_until(T + STALL + 1);
  cr_assert_eq(l.n, 3, "no verdict (%u responses)", l.n);
  const char *words[] = {"rank 0 waits on 'g2'; rank 1 waits on 'z'", NULL};
  expect_failed(&l, "g2", words);
  expect_failed(&l, "z", words);
  const plait_response_t *g1 = find(&l, "g1");
  cr_assert(g1 && g1->status == PLAIT_ERR_STALLED && strstr(g1->message, "'g2'"),
            "the group's ready member did not fail with it: %s", g1 ? g1->message : "absent");
  plait_responses_free(&l);
  stop();
}

Test(deadlock, the_names_are_bounded_per_rank) {
  start(2);
  char name[200];
  for (int i = 0; i < 5; i++) {
    snprintf(name, sizeof name, "n%d", i);
    announce(0, name);
  }
  memset(name, 'z', 150);
  name[150] = '\0';
  announce(1, name);
  plait_response_list_t l = run_until(T + STALL + 1);
  cr_assert_eq(l.n, 6);
  const char *words[] = {"rank 0 waits on 'n0', 'n1', 'n2' and 2 more; rank 1 waits on 'zzzz",
                         "zzz...' (nothing moved", NULL};
  expect_failed(&l, "n4", words);
  cr_assert_lt(strlen(find(&l, "n4")->message), 400, "%s", find(&l, "n4")->message);
  plait_responses_free(&l);
  stop();
}

Test(deadlock, stall_warn_s_0_turns_detection_off) {
  start_with(2, 0);
  announce(0, "a");
  announce(1, "b");
  plait_response_list_t l = run_until(T + 10 * STALL);
  cr_assert_eq(l.n, 0);
  stop();
}

/* --------------------------------------------------------- process sets */

static plait_result_t fake_subset(void *state, const int *ranks, int n, void **sub) {
  (void)state, (void)ranks, (void)n;
  *sub = NULL;
  return PLAIT_SUCCESS;
}
static plait_result_t fake_finalize(void *state) {
  (void)state;
  return PLAIT_SUCCESS;
}
static const char *fake_last_error(void *state) {
  (void)state;
  return "";
}
static plait_transport_t FT;

/* 3 ranks; set 1 = {0, 1}, set 2 = {1, 2}. */
static void start_sets(void) {
  start(3);
  memset(&FT, 0, sizeof FT);
  FT.struct_size = sizeof FT;
  FT.name = "fake";
  FT.subset = fake_subset;
  FT.finalize = fake_finalize;
  FT.last_error = fake_last_error;
  P = plait_psets_create(0, 3, &FT, NULL, 1);
  cr_assert(P);
  int32_t id = 0;
  const int64_t a[] = {0, 1}, b[] = {1, 2};
  cr_assert_eq(plait_psets_apply_add(P, a, 2, &id), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_psets_apply_add(P, b, 2, &id), PLAIT_SUCCESS, "%s", plait_last_error());
  N.psets = P;
}

Test(deadlock, a_set_whose_members_wait_on_each_other_while_another_rank_is_busy) {
  start_sets();
  announce_on(0, "p", PLAIT_COLL_ALLREDUCE, 1);
  announce_on(1, "q", PLAIT_COLL_ALLREDUCE, 1);
  /* rank 2 is busy: nothing pending. No rank outside set 1 can help. */
  plait_response_list_t l = run_until(T + STALL + 1);
  cr_assert_eq(l.n, 2, "no verdict");
  const char *words[] = {"deadlock among ranks 0, 1 (each of their operations waits for one of "
                         "them): rank 0 waits on 'p'; rank 1 waits on 'q'", NULL};
  expect_failed(&l, "p", words);
  expect_failed(&l, "q", words);
  plait_responses_free(&l);
  stop();
}

Test(deadlock, a_set_operation_that_a_busy_member_can_complete_is_not_deadlocked) {
  start_sets();
  announce_on(0, "p", PLAIT_COLL_ALLREDUCE, 1); /* misses rank 1 */
  announce_on(1, "r", PLAIT_COLL_ALLREDUCE, 2); /* misses rank 2, which is busy */
  plait_response_list_t l = run_until(T + 10 * STALL);
  cr_assert_eq(l.n, 0, "rank 2 may still submit 'r', then rank 1 'p'");
  announce_on(2, "r", PLAIT_COLL_ALLREDUCE, 2);
  l = run_until(T + 1);
  cr_assert(find(&l, "r") && find(&l, "r")->status == 0, "'r' did not run");
  plait_responses_free(&l);
  stop();
}

Test(deadlock, a_global_operation_waiting_on_a_deadlocked_set_fails_too) {
  start_sets();
  announce_on(0, "p", PLAIT_COLL_ALLREDUCE, 1);
  announce_on(1, "q", PLAIT_COLL_ALLREDUCE, 1);
  announce(2, "g"); /* needs ranks 0 and 1, which wait on each other */
  plait_response_list_t l = run_until(T + STALL + 1);
  cr_assert_eq(l.n, 3, "no verdict");
  const char *words[] = {"deadlock: no operation can complete: rank 0 waits on 'p'; rank 1 waits "
                         "on 'q'; rank 2 waits on 'g'", NULL};
  expect_failed(&l, "g", words);
  plait_responses_free(&l);
  stop();
}
