/*
 * Tests of what a rank > 0 holds back before announcing it
 * (src/engine/negotiate/announce.c): cached allreduces wait for the rest of the burst
 * they last ran in, at most hold_s from the first held, within the fusion
 * threshold; anything else goes at once and takes what was held with it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/negotiate/announce.h"
#include "engine/submit/entry.h"

#define HOLD 0.5
#define THRESHOLD (64u << 20)

static plait_announce_t A;
static plait_cache_t C;

/* ids 0..5: float32 allreduces of 4 elements (16 bytes); id 6: a broadcast;
 * id 7: an allreduce on process set 1 */
static void setup(void) {
  plait_announce_init(&A);
  cr_assert_eq(plait_cache_init(&C, 16), PLAIT_SUCCESS);
  for (int id = 0; id < 8; id++) {
    plait_meta_t m;
    memset(&m, 0, sizeof m);
    m.coll = id == 6 ? PLAIT_COLL_BROADCAST : PLAIT_COLL_ALLREDUCE;
    m.pset = id == 7 ? 1 : 0;
    m.dtype = PLAIT_FLOAT32;
    m.op = PLAIT_OP_SUM;
    m.device = -1;
    m.ndim = 1;
    m.shape[0] = 4;
    m.prescale = m.postscale = 1.0;
    char name[16];
    snprintf(name, sizeof name, "t%d", id);
    cr_assert_eq(plait_cache_put(&C, id, name, &m), PLAIT_SUCCESS);
  }
}

static void teardown(void) {
  plait_announce_free(&A);
  plait_cache_free(&C);
}

TestSuite(announce, .init = setup, .fini = teardown);

/* A response list of one allreduce response with these cached ids. */
static void ran(const int *ids, int n) {
  plait_resp_entry_t e[8];
  memset(e, 0, sizeof e);
  for (int i = 0; i < n; i++) {
    e[i].cache_id = ids[i];
    e[i].assign_id = -1;
  }
  plait_response_t r;
  memset(&r, 0, sizeof r);
  r.coll = PLAIT_COLL_ALLREDUCE;
  r.n = (uint32_t)n;
  r.e = e;
  plait_response_list_t l;
  memset(&l, 0, sizeof l);
  l.n = 1;
  l.r = &r;
  plait_announce_ran(&A, &l);
}

/* A drained request list of these ids (-1: by name), as take_new makes it. */
static plait_request_list_t drained(const int *ids, int n) {
  plait_request_list_t q = {0, (uint32_t)n, n ? calloc((size_t)n, sizeof(plait_request_t)) : NULL,
                            0};
  for (int i = 0; i < n; i++) {
    q.r[i].cache_id = ids[i];
    q.r[i].name = ids[i] < 0 ? "by-name" : NULL;
  }
  return q;
}

/* Merges ids at time now; returns the ids that go (as a count, into out). */
static int merge(const int *ids, int n, int may_hold, double now, int *out) {
  plait_request_list_t q = drained(ids, n);
  plait_announce_merge(&A, &q, may_hold, &C, THRESHOLD, HOLD, now);
  for (uint32_t i = 0; i < q.n; i++) out[i] = q.r[i].cache_id;
  int k = (int)q.n;
  free(q.r);
  return k;
}

Test(announce, a_burst_trickling_in_goes_in_one_frame_in_order) {
  int burst[] = {0, 1, 2};
  ran(burst, 3);
  int out[8];
  cr_expect_eq(merge((int[]){0}, 1, 1, 10.0, out), 0);
  cr_expect_eq(plait_announce_until(&A, HOLD), 10.0 + HOLD);
  cr_expect_eq(A.missing, 2, "two companions to come");
  cr_expect_eq(merge((int[]){1}, 1, 1, 10.1, out), 0);
  cr_expect_eq(A.missing, 1);
  cr_expect_eq(plait_announce_until(&A, HOLD), 10.0 + HOLD, "the hold counts from the first");
  cr_assert_eq(merge((int[]){2}, 1, 1, 10.2, out), 3);
  cr_expect(out[0] == 0 && out[1] == 1 && out[2] == 2, "%d %d %d", out[0], out[1], out[2]);
  cr_expect_eq(plait_announce_until(&A, HOLD), 0, "nothing held after it went");
  cr_expect_eq(A.missing, 0);
}

Test(announce, lone_unknown_and_complete_ones_go_at_once) {
  int out[8];
  cr_expect_eq(merge((int[]){3}, 1, 1, 1.0, out), 1, "never ran: no burst to wait for");
  int lone[] = {4};
  ran(lone, 1);
  cr_expect_eq(merge((int[]){4}, 1, 1, 1.0, out), 1, "a burst of one is complete");
  int pair[] = {0, 1};
  ran(pair, 2);
  cr_expect_eq(merge((int[]){1, 0}, 2, 1, 1.0, out), 2, "the whole burst at once");
  cr_expect_eq(merge(NULL, 0, 1, 1.0, out), 0, "nothing drained, nothing held: nothing");
}

Test(announce, what_is_held_goes_when_the_hold_is_over) {
  int burst[] = {0, 1, 2};
  ran(burst, 3);
  int out[8];
  cr_expect_eq(merge((int[]){0}, 1, 1, 5.0, out), 0);
  cr_expect_eq(merge(NULL, 0, 1, 5.0 + HOLD / 2, out), 0, "still within the hold");
  cr_assert_eq(merge(NULL, 0, 1, 5.0 + HOLD, out), 1, "the hold is over: it goes alone");
  cr_expect_eq(out[0], 0);
  /* the next one starts a hold of its own */
  cr_expect_eq(merge((int[]){1}, 1, 1, 6.0, out), 0);
  cr_expect_eq(plait_announce_until(&A, HOLD), 6.0 + HOLD);
}

Test(announce, anything_else_takes_what_is_held_with_it) {
  int burst[] = {0, 1, 2};
  ran(burst, 3);
  int out[8];
  cr_expect_eq(merge((int[]){0}, 1, 1, 1.0, out), 0);
  cr_assert_eq(merge((int[]){-1}, 1, 1, 1.0, out), 2, "an operation sent by name");
  cr_expect(out[0] == 0 && out[1] == -1, "held first, then the new: %d %d", out[0], out[1]);
  cr_expect_eq(merge((int[]){1}, 1, 1, 2.0, out), 0);
  cr_expect_eq(merge((int[]){6}, 1, 1, 2.0, out), 2, "a broadcast");
  cr_expect_eq(merge((int[]){1}, 1, 1, 3.0, out), 0);
  cr_expect_eq(merge((int[]){7}, 1, 1, 3.0, out), 2, "an allreduce of another process set");
  cr_expect_eq(merge((int[]){1}, 1, 1, 4.0, out), 0);
  cr_expect_eq(merge(NULL, 0, 0, 4.0, out), 1, "may_hold 0 (a heartbeat, a join) sends it");
}

Test(announce, flags_and_a_full_threshold_do_not_wait) {
  int burst[] = {0, 1, 2};
  ran(burst, 3);
  plait_request_list_t q = drained((int[]){0}, 1);
  q.flags = PLAIT_REQ_SHUTDOWN;
  plait_announce_merge(&A, &q, 1, &C, THRESHOLD, HOLD, 1.0);
  cr_expect_eq(q.n, 1, "a frame with flags (shutdown, failure) holds nothing back");
  free(q.r);
  q = drained((int[]){0, 1}, 2);
  plait_announce_merge(&A, &q, 1, &C, 32, HOLD, 1.0); /* 32 bytes: two of 16 fill it */
  cr_expect_eq(q.n, 2, "the threshold's worth goes");
  free(q.r);
  q = drained((int[]){0}, 1);
  plait_announce_merge(&A, &q, 1, &C, 0, HOLD, 1.0);
  cr_expect_eq(q.n, 1, "fusion off: nothing to wait for");
  free(q.r);
  q = drained((int[]){0}, 1);
  plait_announce_merge(&A, &q, 1, &C, THRESHOLD, 0, 1.0);
  cr_expect_eq(q.n, 1, "no hold time");
  free(q.r);
}

Test(announce, a_member_that_ran_elsewhere_is_not_waited_for) {
  int burst[] = {0, 1, 2};
  ran(burst, 3);
  int moved[] = {2, 5};
  ran(moved, 2);
  int out[8];
  cr_expect_eq(merge((int[]){0, 1}, 2, 1, 1.0, out), 2);
}
