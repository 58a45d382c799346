/*
 * Rank 0 records a control-tree AND item once for the subtree it covers
 * (plait_neg_add_cover, src/engine/negotiate/cover.c): one record lookup per
 * item, however many ranks the subtree holds, where it was one
 * plait_neg_add (a lookup, a metadata copy) per covered rank; and what it
 * records is what rank-by-rank announcements would: the same response (an
 * allgather's rows per rank included), the same mismatch text, the same
 * missing ranks in a stall (and a late item dropped against the
 * tombstone), the same deadlock verdict, the same "announced twice" error.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "meta_util.h"
#include "util/clock.h"

#define K 8

static void start(plait_negotiator_t *n, plait_cache_t *cache, int size, double abort_s) {
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.stall_abort_s = abort_s;
  cr_assert_eq(plait_cache_init(cache, 16), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_init(n, size, &cfg, cache), PLAIT_SUCCESS);
}

static void stop(plait_negotiator_t *n, plait_cache_t *cache) {
  plait_neg_free(n);
  plait_cache_free(cache);
}

/* Rank 0's own announcement, then one AND item per child of rank 0 below
 * skip (as rank 0 reads them in a tree of fan-out K with the AND). */
static void announce_tree(plait_negotiator_t *n, const char *name, plait_meta_t m,
                          plait_meta_t odd, int odd_root, int skip) {
  cr_assert_eq(plait_neg_add(n, 0, name, &m, -1, n->lists_sent), PLAIT_SUCCESS, "%s",
               plait_last_error());
  for (int c = 1; c <= K && c < n->size; c++)
    if (c != skip)
      cr_assert_eq(plait_neg_add_cover(n, c, K, name, c == odd_root ? &odd : &m, -1,
                                       n->lists_sent),
                   PLAIT_SUCCESS, "%s", plait_last_error());
}

static plait_response_list_t tick(plait_negotiator_t *n, double now) {
  plait_response_list_t l;
  int any = 0;
  cr_assert_eq(plait_neg_plan(n, now, &l, &any), PLAIT_SUCCESS, "%s", plait_last_error());
  if (any) n->lists_sent++;
  return l;
}

/* 20 operations: the lookups per operation are 1 + K at any size. */
static uint64_t lookups_per_op(int size) {
  plait_negotiator_t n;
  plait_cache_t cache;
  start(&n, &cache, size, 0);
  for (int op = 0; op < 20; op++) {
    announce_tree(&n, "g", f32(1), f32(1), 0, 0);
    plait_response_list_t l = tick(&n, plait_now());
    cr_assert(l.n == 1 && l.r[0].status == 0, "%d ranks, op %d: 'g' not released", size, op);
    plait_responses_free(&l);
  }
  uint64_t per = n.lookups / 20;
  stop(&n, &cache);
  return per;
}

Test(negotiate_cover, record_lookups_per_operation_do_not_grow_with_the_ranks) {
  uint64_t at64 = lookups_per_op(64), at256 = lookups_per_op(256), at1024 = lookups_per_op(1024);
  cr_expect_eq(at256, 1 + K, "256 ranks: %llu record lookups per operation (rank by rank: 256)",
               (unsigned long long)at256);
  cr_expect(at64 == at256 && at256 == at1024, "lookups per operation: %llu at 64 ranks, %llu at "
            "256, %llu at 1024", (unsigned long long)at64, (unsigned long long)at256,
            (unsigned long long)at1024);
}

Test(negotiate_cover, a_late_subtree_is_named_rank_by_rank_in_the_stall_and_dropped_after) {
  plait_negotiator_t n;
  plait_cache_t cache;
  start(&n, &cache, 256, 5.0);
  announce_tree(&n, "s", f32(1), f32(1), 0, 8); /* rank 8's subtree: 8, 65-72 */
  cr_assert_eq(n.records.count, 1, "not ready without rank 8's subtree");
  plait_response_list_t l = tick(&n, plait_now() + 10);
  cr_assert(l.n == 1 && l.r[0].status == PLAIT_ERR_STALLED, "stalled past the abort time");
  cr_expect(strstr(l.r[0].message, "(PLAIT_STALL_ABORT_S=5): ranks 8, 65, 66, 67, 68, 69, 70, 71, 72 never "
                                   "submitted it"),
            "%s", l.r[0].message);
  plait_responses_free(&l);
  /* the late subtree's item, sent before it ran the failing list: dropped
   * rank by rank against the tombstone, no new 's' */
  plait_meta_t m = f32(1);
  cr_assert_eq(plait_neg_add_cover(&n, 8, K, "s", &m, -1, n.lists_sent - 1), PLAIT_SUCCESS);
  cr_expect_eq(n.records.count, 0, "a stale AND item made a new record");
  cr_expect_eq(n.tombstones.count, 0, "every missing rank accounted for: tombstone gone");
  stop(&n, &cache);
}

/* The mismatch text of a subtree that sent other metadata is the text of
 * the same announcements made rank by rank. */
Test(negotiate_cover, a_mismatch_reads_as_it_does_rank_by_rank) {
  plait_negotiator_t a, b;
  plait_cache_t ca, cb;
  int size = 80;
  start(&a, &ca, size, 0);
  start(&b, &cb, size, 0);
  plait_meta_t m = f32(4), odd = f32(5);
  announce_tree(&a, "x", m, odd, 3, 0);
  for (int r = 0; r < size; r++) {
    int sub = r == 3 || (r >= 3 * K + 1 && r <= 3 * K + K); /* rank 3's subtree: 3, 25-32 */
    cr_assert_eq(plait_neg_add(&b, r, "x", sub ? &odd : &m, -1, 0), PLAIT_SUCCESS);
  }
  plait_response_list_t la = tick(&a, plait_now()), lb = tick(&b, plait_now());
  cr_assert(la.n == 1 && lb.n == 1 && la.r[0].status == PLAIT_ERR_MISMATCH);
  cr_expect_str_eq(la.r[0].message, lb.r[0].message);
  cr_expect(strstr(la.r[0].message, "ranks 3, 25, 26, 27, 28, 29, 30, 31, 32 sent [5]"), "%s", la.r[0].message);
  plait_responses_free(&la);
  plait_responses_free(&lb);
  stop(&a, &ca);
  stop(&b, &cb);
}

Test(negotiate_cover, a_rank_covered_twice_is_named) {
  plait_negotiator_t n;
  plait_cache_t cache;
  start(&n, &cache, 256, 0);
  plait_meta_t m = f32(1);
  cr_assert_eq(plait_neg_add(&n, 70, "d", &m, -1, 0), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_add_cover(&n, 8, K, "d", &m, -1, 0), PLAIT_ERR_PROTOCOL);
  cr_expect(strstr(plait_last_error(), "rank 70 announced 'd' twice"), "%s", plait_last_error());
  cr_assert_eq(plait_neg_add_cover(&n, -1, K, "d", &m, -1, 0), PLAIT_ERR_PROTOCOL);
  cr_expect(strstr(plait_last_error(), "rank -1's subtree"), "%s", plait_last_error());
  stop(&n, &cache);
}

/* An allgather's per-rank first dimensions, for covered ranks, are their
 * subtree root's: the response carries what rank-by-rank records give. */
Test(negotiate_cover, an_allgather_gives_each_covered_rank_its_rows) {
  plait_negotiator_t a, b;
  plait_cache_t ca, cb;
  int size = 30;
  start(&a, &ca, size, 0);
  start(&b, &cb, size, 0);
  plait_meta_t m = meta(PLAIT_COLL_ALLGATHER, PLAIT_FLOAT32, 3);
  announce_tree(&a, "ag", m, m, 0, 0);
  for (int r = 0; r < size; r++) cr_assert_eq(plait_neg_add(&b, r, "ag", &m, -1, 0), 0);
  plait_response_list_t la = tick(&a, plait_now()), lb = tick(&b, plait_now());
  cr_assert(la.n == 1 && lb.n == 1 && la.r[0].status == 0 && lb.r[0].status == 0);
  cr_assert(la.r[0].dims && lb.r[0].dims, "an allgather's response has its rows per rank");
  for (int r = 0; r < size; r++)
    cr_expect_eq(la.r[0].dims[r], lb.r[0].dims[r], "rank %d: %lld rows, rank by rank %lld", r,
                 (long long)la.r[0].dims[r], (long long)lb.r[0].dims[r]);
  cr_expect_eq(la.r[0].dims[size - 1], 3);
  plait_responses_free(&la);
  plait_responses_free(&lb);
  stop(&a, &ca);
  stop(&b, &cb);
}

/* Ticks a and b together every 0.1 s from t until a list comes out of a. */
static void tick_both_until_list(plait_negotiator_t *a, plait_negotiator_t *b, double t,
                                 plait_response_list_t *la, plait_response_list_t *lb) {
  for (int i = 0; i < 60; i++, t += 0.1) {
    *la = tick(a, t);
    *lb = tick(b, t);
    if (la->n || lb->n) return;
    plait_responses_free(la);
    plait_responses_free(lb);
  }
  cr_assert_fail("no verdict within 6 s");
}

/* Two subtrees each waiting on what only the other announced: the deadlock
 * verdict names the same ranks as for announcements made rank by rank. */
Test(negotiate_cover, a_deadlock_names_the_ranks_as_rank_by_rank) {
  plait_negotiator_t a, b;
  plait_cache_t ca, cb;
  int size = 20; /* rank 1's subtree: 1, 9-16; ranks 2-8's: 2-8, 17-19 */
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.stall_warn_s = 2;
  cr_assert_eq(plait_cache_init(&ca, 16) | plait_cache_init(&cb, 16), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_init(&a, size, &cfg, &ca) | plait_neg_init(&b, size, &cfg, &cb), 0);
  plait_meta_t m = f32(1);
  cr_assert_eq(plait_neg_add(&a, 0, "p", &m, -1, 0), 0);
  cr_assert_eq(plait_neg_add_cover(&a, 1, K, "p", &m, -1, 0), 0);
  for (int c = 2; c <= K; c++) cr_assert_eq(plait_neg_add_cover(&a, c, K, "q", &m, -1, 0), 0);
  for (int r = 0; r < size; r++) {
    int p = r <= 1 || (r >= 9 && r <= 16);
    cr_assert_eq(plait_neg_add(&b, r, p ? "p" : "q", &m, -1, 0), 0);
  }
  plait_response_list_t la, lb;
  tick_both_until_list(&a, &b, plait_now(), &la, &lb);
  cr_assert(la.n == 2 && lb.n == 2, "both fail together: %u and %u responses", la.n, lb.n);
  for (uint32_t i = 0; i < la.n; i++) {
    cr_assert(la.r[i].status == PLAIT_ERR_STALLED && la.r[i].message && lb.r[i].message);
    cr_expect_str_eq(la.r[i].message, lb.r[i].message);
  }
  cr_expect(strstr(la.r[0].message, "rank 1 waits on 'p'; rank 2 waits on 'q'") &&
            strstr(la.r[0].message, "and 12 more ranks"), "%s", la.r[0].message);
  plait_responses_free(&la);
  plait_responses_free(&lb);
  stop(&a, &ca);
  stop(&b, &cb);
}
