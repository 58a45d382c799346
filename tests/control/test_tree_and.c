/*
 * Tests of the AND of cached ids on the way up the control tree
 * (src/engine/tree_and.c), at one relaying rank, without sockets: rank 3 of
 * a 16-rank job with fan-out 2 (children 7, which relays rank 15, and the
 * leaf 8). What it sends up is read back as rank 0 reads a RELAYED frame.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"
#include "engine/negotiate/tree_and.h"

#define N 16
#define K 2
#define ME 3
#define HOLD 0.5

static plait_control_t C;
static plait_cache_t CACHE;
static plait_and_t A;

typedef struct {
  int and_item, origin, one;
  int32_t id;
  uint64_t acked;
  uint32_t flags, nreq;
} item_t;

static item_t got[64];
static int ngot;

/* ids 0..3: allreduces of the global set; id 4: one of process set 1 */
static void setup(void) {
  memset(&C, 0, sizeof C);
  C.rank = ME;
  C.size = N;
  C.tree.fanout = K;
  C.tree.parent_fd = C.tree.listen_fd = -1;
  C.tree.parent = plait_tree_parent(ME, K);
  C.tree.nchildren = plait_tree_children(ME, K, N, &C.tree.first_child);
  cr_assert_eq(plait_cache_init(&CACHE, 16), PLAIT_SUCCESS);
  for (int id = 0; id < 5; id++) {
    plait_meta_t m;
    memset(&m, 0, sizeof m);
    m.coll = PLAIT_COLL_ALLREDUCE;
    m.pset = id == 4 ? 1 : 0;
    char name[16];
    snprintf(name, sizeof name, "g%d", id);
    cr_assert_eq(plait_cache_put(&CACHE, id, name, &m), PLAIT_SUCCESS);
  }
  cr_assert_eq(plait_and_init(&A, &C, &CACHE, HOLD), PLAIT_SUCCESS);
  cr_assert(plait_and_on(&A));
  cr_assert_eq(A.nslots, 3);
  ngot = 0;
}

static void teardown(void) {
  plait_and_free(&A);
  plait_cache_free(&CACHE);
  plait_tree_close(&C.tree);
}

TestSuite(tree_and, .init = setup, .fini = teardown);

static plait_result_t on_payload(void *arg, int origin, const uint8_t *p, size_t len) {
  (void)arg;
  plait_request_list_t l;
  cr_assert_eq(plait_requests_decode(p, len, &l), PLAIT_SUCCESS);
  got[ngot++] = (item_t){0, origin, 0, -1, l.acked, l.flags, l.n};
  plait_requests_free(&l);
  return PLAIT_SUCCESS;
}

static plait_result_t on_and(void *arg, const plait_tree_and_t *a) {
  (void)arg;
  got[ngot++] = (item_t){1, a->root, a->one, a->id, a->acked, 0, 0};
  return PLAIT_SUCCESS;
}

/* What went up since the last call, read as rank 0 would (via: rank 1,
 * whose subtree holds rank 3's); the batch emptied. */
static int sent(void) {
  ngot = 0;
  plait_frame_t f;
  plait_tree_up_frame(&C, &f);
  if (!f.type) return 0;
  cr_assert_eq(plait_tree_each_item(&C, 1, &f, on_payload, on_and, NULL), PLAIT_SUCCESS);
  plait_wr_free(&C.tree.up);
  C.tree.up_count = 0;
  return ngot;
}

/* origin announces ids (cache ids; -1: a tensor by name, coll) with acked. */
static void announce(int origin, uint64_t acked, uint32_t flags, int n, const int *ids,
                     uint8_t coll, double now) {
  plait_request_t r[8];
  memset(r, 0, sizeof r);
  for (int i = 0; i < n; i++) {
    r[i].cache_id = ids[i];
    r[i].name = ids[i] < 0 ? "fresh" : NULL;
    r[i].meta.coll = coll;
  }
  plait_request_list_t l = {flags, (uint32_t)n, r, acked};
  plait_writer_t w = {0};
  cr_assert_eq(plait_requests_encode(&w, &l), PLAIT_SUCCESS);
  cr_assert_eq(plait_and_payload(&A, origin, w.data + PLAIT_WIRE_HEADER_SIZE,
                                 w.len - PLAIT_WIRE_HEADER_SIZE, now), PLAIT_SUCCESS);
  plait_wr_free(&w);
}

static void cached(int origin, uint64_t acked, int id, double now) {
  announce(origin, acked, 0, 1, &id, PLAIT_COLL_ALLREDUCE, now);
}

static void child_and(int root, uint64_t acked, int id, double now) {
  plait_tree_and_t it = {root, 0, id, acked};
  cr_assert_eq(plait_and_item(&A, &it, now), PLAIT_SUCCESS);
}

static void expect_and(int i, int root, int one, int id, uint64_t acked) {
  cr_assert(got[i].and_item, "item %d: a payload of rank %d, not an AND", i, got[i].origin);
  cr_expect_eq(got[i].origin, root, "item %d: root %d, want %d", i, got[i].origin, root);
  cr_expect_eq(got[i].one, one, "item %d", i);
  cr_expect_eq(got[i].id, id, "item %d", i);
  cr_expect_eq(got[i].acked, acked, "item %d", i);
}

Test(tree_and, whole_subtree_goes_up_as_one_item) {
  cached(ME, 5, 0, 1.0);
  cached(8, 5, 0, 1.0);
  cr_assert_eq(sent(), 0, "held until rank 7's subtree has it too");
  child_and(7, 5, 0, 1.0);
  cr_assert_eq(sent(), 1);
  expect_and(0, ME, 0, 0, 5);
  /* the next step's: the same again, one item, whatever the order */
  child_and(7, 6, 0, 2.0);
  cached(8, 6, 0, 2.0);
  cached(ME, 6, 0, 2.0);
  cr_assert_eq(sent(), 1);
  expect_and(0, ME, 0, 0, 6);
  cr_assert_eq(plait_and_until(&A), 0, "nothing held");
}

Test(tree_and, partial_subtree_sends_its_detail_after_hold) {
  cached(ME, 5, 1, 1.0);
  cached(8, 5, 1, 1.0);
  plait_and_tick(&A, 1.0 + HOLD / 2);
  cr_assert_eq(sent(), 0);
  cr_expect_eq(plait_and_until(&A), 1.0 + HOLD);
  plait_and_tick(&A, 1.0 + HOLD); /* rank 7's subtree is late: who has it goes up */
  cr_assert_eq(sent(), 2);
  expect_and(0, ME, 1, 1, 5); /* rank 3 alone */
  expect_and(1, 8, 0, 1, 5);  /* rank 8's subtree (itself) */
  child_and(7, 5, 1, 2.0);    /* the late one follows at once */
  cr_assert_eq(sent(), 1);
  expect_and(0, 7, 0, 1, 5);
  /* every slot seen: the next instance is held and ANDed afresh */
  cached(ME, 6, 1, 3.0);
  cached(8, 6, 1, 3.0);
  child_and(7, 6, 1, 3.0);
  cr_assert_eq(sent(), 1);
  expect_and(0, ME, 0, 1, 6);
}

Test(tree_and, another_acked_count_sends_the_detail_at_once) {
  cached(ME, 5, 2, 1.0);
  cached(8, 6, 2, 1.0);
  cr_assert_eq(sent(), 2);
  expect_and(0, ME, 1, 2, 5);
  expect_and(1, 8, 0, 2, 6);
}

Test(tree_and, names_flags_and_other_sets_go_as_they_came_after_what_was_held) {
  cached(8, 5, 3, 1.0); /* held ... */
  announce(8, 5, PLAIT_REQ_SHUTDOWN, 0, NULL, 0, 1.0); /* ... goes first, then the flag */
  cr_assert_eq(sent(), 2);
  expect_and(0, 8, 0, 3, 5);
  cr_expect(!got[1].and_item && got[1].origin == 8 && got[1].flags == PLAIT_REQ_SHUTDOWN);
  int by_name = -1, other_set = 4;
  announce(8, 5, 0, 1, &by_name, PLAIT_COLL_ALLREDUCE, 1.0);
  cached(ME, 5, other_set, 1.0);
  cr_assert_eq(sent(), 2);
  cr_expect(!got[0].and_item && got[0].origin == 8 && got[0].nreq == 1);
  cr_expect(!got[1].and_item && got[1].origin == ME && got[1].nreq == 1);
  /* an AND from below rank 7 (not its whole subtree) goes on as it came */
  plait_tree_and_t deep = {15, 0, 0, 5};
  cr_assert_eq(plait_and_item(&A, &deep, 1.0), PLAIT_SUCCESS);
  cr_assert_eq(sent(), 1);
  expect_and(0, 15, 0, 0, 5);
}

Test(tree_and, a_name_sent_by_name_releases_its_held_id_at_once) {
  cached(ME, 5, 2, 1.0); /* "g2" by id from rank 3 and rank 7's subtree ... */
  child_and(7, 5, 2, 1.0);
  plait_request_t q = {.name = "g2", .cache_id = -1}; /* ... and by name (other metadata) */
  q.meta.coll = PLAIT_COLL_ALLREDUCE;
  q.meta.ndim = 1;
  q.meta.shape[0] = 4;
  plait_request_list_t l = {0, 1, &q, 5};
  plait_writer_t w = {0};
  cr_assert_eq(plait_requests_encode(&w, &l), PLAIT_SUCCESS);
  cr_assert_eq(plait_and_payload(&A, 8, w.data + PLAIT_WIRE_HEADER_SIZE,
                                 w.len - PLAIT_WIRE_HEADER_SIZE, 1.0), PLAIT_SUCCESS);
  plait_wr_free(&w);
  cr_assert_eq(sent(), 3, "rank 0 sees the mismatch now, not after the hold");
  expect_and(0, ME, 1, 2, 5);
  expect_and(1, 7, 0, 2, 5);
  cr_expect(!got[2].and_item && got[2].origin == 8 && got[2].nreq == 1);
}

Test(tree_and, a_join_below_stops_the_holding_until_a_join_ran) {
  cached(ME, 5, 0, 1.0);
  int by_name = -1;
  announce(8, 5, 0, 1, &by_name, PLAIT_COLL_JOIN, 1.0);
  cr_assert_eq(sent(), 2);
  expect_and(0, ME, 1, 0, 5); /* what was held, then the join */
  cr_expect(!got[1].and_item && got[1].origin == 8);
  cached(ME, 6, 1, 2.0); /* rank 8 joined: it will never announce id 1 */
  cr_assert_eq(sent(), 1);
  cr_expect(!got[0].and_item && got[0].origin == ME);
  plait_response_t r = {.coll = PLAIT_COLL_JOIN};
  plait_response_list_t l = {.n = 1, .r = &r};
  plait_and_ran(&A, &l);
  cached(ME, 7, 1, 3.0);
  cr_assert_eq(sent(), 0, "held again");
}

Test(tree_and, hold_time_follows_the_stall_settings) {
  cr_expect_eq(plait_and_hold_s(60, 0, 0.001), 1.0);
  cr_expect_eq(plait_and_hold_s(0, 2, 0.001), 0.5);
  cr_expect_eq(plait_and_hold_s(1, 0, 0.001), 0.25);
  cr_expect_eq(plait_and_hold_s(0.001, 0, 0.01), 0.01);
}

Test(tree_and, off_where_this_rank_relays_nothing) {
  plait_and_t b;
  plait_control_t leaf = C;
  leaf.rank = 8;
  leaf.tree.nchildren = 0;
  cr_assert_eq(plait_and_init(&b, &leaf, &CACHE, HOLD), PLAIT_SUCCESS);
  cr_expect(!plait_and_on(&b));
  plait_and_free(&b);
}
