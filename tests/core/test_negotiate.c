/*
 * Tests of rank 0's negotiation (src/engine/negotiate/negotiate.c, responses.c),
 * called directly: announcements from any number of ranks go in with
 * plait_neg_add, response lists come out of the tick plait_neg_plan. No
 * sockets, no forked ranks.
 *
 * Checked: readiness, the order of responses (the order operations became
 * ready), fusion through the tick, mismatches of every kind with a message
 * that names the tensor, the values and the ranks that sent each,
 * allgather/alltoall extras, groups released whole and failed whole, joins,
 * the stall inspector and its tombstones, the response cache's ids and the
 * order of cached responses, duplicate announcements, shutdown; dispatch:
 * what goes in the tick it becomes ready and what waits for companions from
 * its last burst (hold_s).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/net.h"
#include "engine/negotiate/negotiate.h"
#include "meta_util.h"

static plait_negotiator_t N;
static plait_cache_t C;

static void start(int size, uint64_t threshold, int cache, double stall_abort_s) {
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.fusion_threshold = threshold;
  cfg.stall_abort_s = stall_abort_s;
  cr_assert_eq(plait_cache_init(&C, cache), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_init(&N, size, &cfg, &C), PLAIT_SUCCESS);
}

static void stop(void) {
  plait_neg_free(&N);
  plait_cache_free(&C);
}

static void announce(int rank, const char *name, plait_meta_t m) {
  cr_assert_eq(plait_neg_add(&N, rank, name, &m, -1, N.lists_sent), PLAIT_SUCCESS,
               "rank %d announcing '%s': %s", rank, name, plait_last_error());
}

static void everyone(const char *name, plait_meta_t m) {
  for (int r = 0; r < N.size; r++) announce(r, name, m);
}

/* One tick at time now; a non-empty list counts as sent. */
static plait_response_list_t tick_at(double now) {
  plait_response_list_t l;
  int any = -1;
  cr_assert_eq(plait_neg_plan(&N, now, &l, &any), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(any, l.n > 0);
  if (any) N.lists_sent++;
  return l;
}

static plait_response_list_t tick(void) { return tick_at(plait_now()); }

/* "a b | c" : the names of each response, responses separated by " | ". */
static void names(const plait_response_list_t *l, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (uint32_t i = 0; i < l->n; i++)
    for (uint32_t j = 0; j < l->r[i].n; j++)
      used += (size_t)snprintf(out + used, cap - used, "%s%s", i && !j ? " | " : j ? " " : "",
                               l->r[i].e[j].name);
}

#define ASSERT_NAMES(l, want)                                                  \
  do {                                                                         \
    char got_[512];                                                            \
    names(&(l), got_, sizeof got_);                                            \
    cr_assert_str_eq(got_, want);                                              \
  } while (0)

/* ------------------------------------------------------------ readiness */

Test(negotiate, ready_only_once_every_rank_announced) {
  start(3, 1 << 20, 16, 0);
  announce(0, "w", f32(4));
  announce(2, "w", f32(4));
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 0, "two of three ranks: nothing to run");
  plait_responses_free(&l);
  announce(1, "w", f32(4));
  l = tick();
  ASSERT_NAMES(l, "w");
  cr_assert_eq(l.r[0].coll, PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(l.r[0].status, 0);
  cr_assert_eq(l.r[0].e[0].assign_id, 0, "the first agreed tensor gets cache id 0");
  cr_assert_eq(l.r[0].e[0].has_meta, 0, "no rank joined: no metadata travels");
  plait_responses_free(&l);
  l = tick();
  cr_assert_eq(l.n, 0, "planned once");
  plait_responses_free(&l);
  stop();
}

Test(negotiate, responses_follow_the_order_operations_became_ready) {
  start(2, 0, 0, 0); /* no fusion: one response each */
  announce(0, "a", f32(1));
  announce(0, "b", f32(1));
  announce(0, "c", f32(1));
  announce(1, "c", f32(1));
  announce(1, "a", f32(1));
  announce(1, "b", f32(1));
  plait_response_list_t l = tick();
  ASSERT_NAMES(l, "c | a | b");
  plait_responses_free(&l);
  stop();
}

Test(negotiate, fusion_through_the_tick_keeps_order_and_threshold) {
  start(2, 128, 0, 0);
  /* 16 float32 = 64 bytes: two fit in 128, a third does not */
  everyone("a", f32(16));
  everyone("h1", meta(PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT16, 8));
  everyone("b", f32(16));
  everyone("bc", meta(PLAIT_COLL_BROADCAST, PLAIT_FLOAT32, 16));
  everyone("c", f32(16));
  everyone("h2", meta(PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT16, 8));
  /* each differs from c in one part of the fusion key */
  plait_meta_t avg = f32(1), pre = f32(1), post = f32(1), dev = f32(1);
  avg.op = PLAIT_OP_AVERAGE, pre.prescale = 2, post.postscale = 2, dev.device = 0;
  everyone("avg", avg);
  everyone("pre", pre);
  everyone("post", post);
  everyone("dev", dev);
  everyone("avg2", avg);
  plait_response_list_t l = tick();
  ASSERT_NAMES(l, "a b | h1 h2 | bc | c | avg avg2 | pre | post | dev");
  plait_responses_free(&l);
  stop();
}

/* ----------------------------------------------------------- mismatches */

typedef struct mismatch {
  const char *what;     /* the field the message names */
  plait_meta_t base;    /* what ranks 0 and 2 send */
  plait_meta_t odd;     /* what rank 1 sends */
  const char *va, *vb;  /* the values, as the message writes them */
} mismatch_t;

static void check_mismatch(const mismatch_t *k) {
  start(3, 1 << 20, 16, 0);
  announce(0, "w", k->base);
  announce(1, "w", k->odd);
  announce(2, "w", k->base);
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 1, "%s: one response", k->what);
  const plait_response_t *x = &l.r[0];
  cr_assert_eq(x->status, PLAIT_ERR_MISMATCH, "%s: status %u", k->what, x->status);
  cr_assert_eq(x->e[0].assign_id, -1, "%s: a failed tensor is not cached", k->what);
  char want[512];
  snprintf(want, sizeof want, "%s 'w': mismatched %s across ranks: ranks 0, 2 sent %s; rank 1 "
           "sent %s", plait_coll_name((plait_coll_t)k->base.coll), k->what, k->va, k->vb);
  cr_assert_str_eq(x->message, want);
  plait_responses_free(&l);
  stop();
}

Test(negotiate, mismatch_of_every_kind_names_tensor_values_and_ranks) {
  mismatch_t k[11];
  int n = 0;
  plait_meta_t b = f32(4), o;
  o = b, o.coll = PLAIT_COLL_BROADCAST;
  k[n++] = (mismatch_t){"operation", b, o, "allreduce", "broadcast"};
  o = b, o.dtype = PLAIT_FLOAT64;
  k[n++] = (mismatch_t){"dtype", b, o, "float32", "float64"};
  o = b, o.op = PLAIT_OP_MAX;
  k[n++] = (mismatch_t){"reduction op", b, o, "sum", "max"};
  o = b, o.device = 0;
  k[n++] = (mismatch_t){"memory", b, o, "host", "device"};
  o = b, o.prescale = 0.5;
  k[n++] = (mismatch_t){"prescale factor", b, o, "1", "0.5"};
  o = b, o.postscale = 3;
  k[n++] = (mismatch_t){"postscale factor", b, o, "1", "3"};
  o = b, o.shape[0] = 5;
  k[n++] = (mismatch_t){"shape", b, o, "[4]", "[5]"};
  o = b, o.ndim = 2, o.shape[1] = 1;
  k[n++] = (mismatch_t){"shape", b, o, "[4]", "[4, 1]"};
  plait_meta_t bc = meta(PLAIT_COLL_BROADCAST, PLAIT_UINT8, 8);
  o = bc, o.root = 2;
  k[n++] = (mismatch_t){"root rank", bc, o, "0", "2"};
  plait_meta_t ag = meta(PLAIT_COLL_ALLGATHER, PLAIT_INT32, 2);
  ag.ndim = 2, ag.shape[1] = 3;
  o = ag, o.shape[0] = 7, o.shape[1] = 4; /* the first dimension may differ, the rest not */
  k[n++] = (mismatch_t){"shape after the first dimension", ag, o, "[3]", "[4]"};
  plait_meta_t g = f32(4);
  g.group = "g", g.group_size = 1;
  o = g, o.group = "h";
  k[n++] = (mismatch_t){"group", g, o, "g (1 members)", "h (1 members)"};
  for (int i = 0; i < n; i++) check_mismatch(&k[i]);
}

Test(negotiate, three_values_each_with_its_ranks) {
  start(4, 1 << 20, 0, 0);
  announce(0, "w", f32(4));
  announce(1, "w", meta(PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT64, 4));
  announce(2, "w", meta(PLAIT_COLL_ALLREDUCE, PLAIT_INT32, 4));
  announce(3, "w", meta(PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT64, 4));
  plait_response_list_t l = tick();
  cr_assert_str_eq(l.r[0].message, "allreduce 'w': mismatched dtype across ranks: rank 0 sent "
                   "float32; ranks 1, 3 sent float64; rank 2 sent int32");
  plait_responses_free(&l);
  stop();
}

Test(negotiate, allgather_and_alltoall_carry_what_every_rank_sent) {
  start(3, 1 << 20, 16, 0);
  for (int r = 0; r < 3; r++) {
    plait_meta_t m = meta(PLAIT_COLL_ALLGATHER, PLAIT_INT32, 2 + r); /* rows differ: fine */
    announce(r, "ag", m);
  }
  int64_t splits[3][3] = {{1, 0, 2}, {0, 0, 0}, {4, 5, 6}};
  for (int r = 0; r < 3; r++) {
    plait_meta_t m = meta(PLAIT_COLL_ALLTOALL, PLAIT_INT32, splits[r][0] + splits[r][1] +
                                                                splits[r][2]);
    m.splits = splits[r], m.nsplits = 3;
    announce(r, "a2a", m);
  }
  plait_response_list_t l = tick();
  ASSERT_NAMES(l, "ag | a2a");
  cr_assert_eq(l.r[0].status, 0, "%s", l.r[0].message ? l.r[0].message : "");
  cr_assert_eq(l.r[0].ndims, 3);
  for (int r = 0; r < 3; r++) cr_assert_eq(l.r[0].dims[r], 2 + r);
  cr_assert_eq(l.r[0].e[0].assign_id, -1, "allgather is never cached");
  cr_assert_eq(l.r[1].ndims, 9);
  for (int i = 0; i < 9; i++) cr_assert_eq(l.r[1].dims[i], splits[i / 3][i % 3]);
  plait_responses_free(&l);
  stop();
}

Test(negotiate, a_rank_announcing_a_name_twice_is_a_protocol_error) {
  start(2, 0, 0, 0);
  announce(1, "w", f32(1));
  plait_meta_t m = f32(1);
  cr_assert_eq(plait_neg_add(&N, 1, "w", &m, -1, 0), PLAIT_ERR_PROTOCOL);
  cr_assert_str_eq(plait_last_error(), "rank 1 announced 'w' twice");
  stop();
}

/* --------------------------------------------------------------- groups */

static plait_meta_t member(const char *group, uint32_t size) {
  plait_meta_t m = f32(2);
  m.group = (char *)group;
  m.group_size = size;
  return m;
}

Test(negotiate, a_group_is_released_whole) {
  start(2, 1 << 20, 0, 0);
  everyone("g.0", member("g.0", 3));
  everyone("x", f32(2));
  everyone("g.1", member("g.0", 3));
  plait_response_list_t l = tick();
  ASSERT_NAMES(l, "x");
  plait_responses_free(&l);
  everyone("g.2", member("g.0", 3));
  l = tick();
  ASSERT_NAMES(l, "g.0 g.1 g.2");
  plait_responses_free(&l);
  stop();
}

Test(negotiate, a_group_fails_whole_and_at_once) {
  start(2, 1 << 20, 0, 0);
  everyone("g.0", member("g.0", 3));
  announce(0, "g.1", member("g.0", 3));
  plait_meta_t bad = member("g.0", 3);
  bad.dtype = PLAIT_FLOAT64;
  announce(1, "g.1", bad);
  announce(0, "g.2", member("g.0", 3)); /* rank 1 will never send it now */
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 3, "the members fail now, without waiting for g.2");
  for (uint32_t i = 0; i < l.n; i++) {
    cr_assert_eq(l.r[i].status, PLAIT_ERR_MISMATCH, "response %u", i);
    cr_assert(strstr(l.r[i].message, "mismatched dtype"), "%s", l.r[i].message);
  }
  ASSERT_NAMES(l, "g.0 | g.1 | g.2");
  cr_assert(strstr(l.r[0].message, "allreduce 'g.0' failed with its group 'g.0': its member "
                   "'g.1' failed"), "%s", l.r[0].message);
  cr_assert(strstr(l.r[2].message, "allreduce 'g.2' failed with its group 'g.0'"), "%s",
            l.r[2].message);
  plait_responses_free(&l);
  /* rank 1's late g.2 was sent before it ran that list: recognised, dropped */
  plait_meta_t m = member("g.0", 3);
  cr_assert_eq(plait_neg_add(&N, 1, "g.2", &m, -1, N.lists_sent - 1), PLAIT_SUCCESS);
  cr_assert_eq(N.records.count, 0, "the tombstone drops the late announcement");
  stop();
}

/* ---------------------------------------------------------------- joins */

Test(negotiate, joined_ranks_count_for_allreduce_and_fail_a_broadcast) {
  start(3, 1 << 20, 16, 0);
  announce(2, "plait:join.0", meta(PLAIT_COLL_JOIN, PLAIT_UINT8, 0));
  announce(0, "w", f32(3));
  announce(1, "w", f32(3));
  announce(0, "b", meta(PLAIT_COLL_BROADCAST, PLAIT_UINT8, 3));
  announce(1, "b", meta(PLAIT_COLL_BROADCAST, PLAIT_UINT8, 3));
  plait_response_list_t l = tick();
  ASSERT_NAMES(l, "w | b");
  cr_assert_eq(l.r[0].status, 0);
  cr_assert(l.r[0].e[0].has_meta, "a joined rank needs the metadata to stand in");
  cr_assert_eq(l.r[0].e[0].meta.shape[0], 3);
  cr_assert_eq(l.r[1].status, PLAIT_ERR_MISMATCH);
  cr_assert_str_eq(l.r[1].message, "broadcast 'b' cannot run: rank 2 joined (plait_join) and "
                   "only takes part in allreduce, allgather and barrier (broadcast is not "
                   "supported with join, as in Horovod)");
  plait_responses_free(&l);
  announce(0, "plait:join.0", meta(PLAIT_COLL_JOIN, PLAIT_UINT8, 0));
  announce(1, "plait:join.0", meta(PLAIT_COLL_JOIN, PLAIT_UINT8, 0));
  l = tick();
  ASSERT_NAMES(l, "plait:join.0");
  cr_assert_eq(l.r[0].coll, PLAIT_COLL_JOIN);
  cr_assert_eq(l.r[0].join_rank, 1, "the last rank to join");
  plait_responses_free(&l);
  cr_assert_eq(N.njoined, 0, "after the join every rank is back");
  everyone("w2", f32(3));
  l = tick();
  cr_assert_eq(l.r[0].e[0].has_meta, 0, "no rank joined now");
  plait_responses_free(&l);
  stop();
}

/* ---------------------------------------------------- stalls, tombstones */

Test(negotiate, a_stalled_tensor_fails_naming_the_missing_ranks) {
  start(3, 1 << 20, 0, 5.0);
  announce(0, "s", f32(1));
  announce(2, "s", f32(1));
  double t0 = plait_now();
  plait_response_list_t l = tick_at(t0 + 1);
  cr_assert_eq(l.n, 0, "not stalled yet");
  plait_responses_free(&l);
  l = tick_at(t0 + 10);
  ASSERT_NAMES(l, "s");
  cr_assert_eq(l.r[0].status, PLAIT_ERR_STALLED);
  cr_assert(strstr(l.r[0].message, "'s' stalled for ") &&
            strstr(l.r[0].message, "(PLAIT_STALL_ABORT_S=5): rank 1 never submitted it"),
            "%s", l.r[0].message);
  plait_responses_free(&l);
  /* rank 1 sent 's' before it ran the list that failed it: dropped */
  plait_meta_t m = f32(1);
  cr_assert_eq(plait_neg_add(&N, 1, "s", &m, -1, N.lists_sent - 1), PLAIT_SUCCESS);
  cr_assert_eq(N.records.count, 0);
  cr_assert_eq(N.tombstones.count, 0, "every missing rank accounted for: tombstone gone");
  /* a later 's' is a new operation */
  announce(1, "s", f32(1));
  cr_assert_eq(N.records.count, 1);
  stop();
}

Test(negotiate, an_announcement_after_the_failure_is_a_new_operation) {
  start(2, 1 << 20, 0, 5.0);
  announce(0, "s", f32(1));
  plait_response_list_t l = tick_at(plait_now() + 10);
  cr_assert_eq(l.n, 1, "stalled past PLAIT_STALL_ABORT_S: failed");
  cr_assert_eq(l.r[0].status, PLAIT_ERR_STALLED);
  plait_responses_free(&l);
  cr_assert_eq(N.tombstones.count, 1);
  announce(1, "s", f32(1)); /* acked = lists_sent: it ran the failing list first */
  cr_assert_eq(N.records.count, 1, "kept: a new 's' waiting for rank 0");
  cr_assert_eq(N.tombstones.count, 0);
  stop();
}

/* -------------------------------------------------------- response cache */

Test(negotiate, cached_tensors_go_by_id_and_run_in_id_order) {
  start(2, 1 << 20, 16, 0);
  everyone("a", f32(1));
  everyone("b", f32(1));
  everyone("c", f32(1));
  plait_response_list_t l = tick();
  ASSERT_NAMES(l, "a b c");
  for (int i = 0; i < 3; i++) cr_assert_eq(l.r[0].e[i].assign_id, i);
  plait_responses_free(&l);
  /* next step: every rank announces them by id, in another order */
  const char *order[3] = {"c", "a", "b"};
  for (int i = 0; i < 3; i++)
    for (int r = 0; r < 2; r++) {
      plait_meta_t m = f32(1);
      int id = plait_cache_lookup(&C, order[i], &m);
      cr_assert_geq(id, 0);
      cr_assert_eq(plait_neg_add(&N, r, order[i], &m, id, N.lists_sent), PLAIT_SUCCESS);
    }
  l = tick();
  ASSERT_NAMES(l, "a b c"); /* ascending ids, as the bit-vector is read */
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(l.r[0].e[i].cache_id, i);
    cr_assert_eq(l.r[0].e[i].assign_id, -1);
  }
  plait_responses_free(&l);
  /* same name, other metadata: by name again, with the next id */
  everyone("a", f32(2));
  l = tick();
  cr_assert_eq(l.r[0].e[0].cache_id, -1);
  cr_assert_eq(l.r[0].e[0].assign_id, 3);
  plait_responses_free(&l);
  stop();
}

/* -------------------------------------------------------------- dispatch */

/* Every rank announces name by its cache id (as a rank does for a name it
 * has run before). */
static void everyone_by_id(const char *name, plait_meta_t m) {
  int id = plait_cache_lookup(&C, name, &m);
  cr_assert_geq(id, 0, "'%s' is not cached", name);
  for (int r = 0; r < N.size; r++)
    cr_assert_eq(plait_neg_add(&N, r, name, &m, id, N.lists_sent), PLAIT_SUCCESS, "%s",
                 plait_last_error());
}

/* a, b and c run together once: one burst. */
static void burst_abc(void) {
  everyone("a", f32(4));
  everyone("b", f32(4));
  everyone("c", f32(4));
  plait_response_list_t l = tick(); /* one list; fused when the threshold allows */
  uint32_t k = 0;
  for (uint32_t i = 0; i < l.n; i++) k += l.r[i].n;
  cr_assert_eq(k, 3);
  plait_responses_free(&l);
}

Test(dispatch, a_new_operation_goes_in_the_tick_it_becomes_ready) {
  start(3, 1 << 20, 16, 0);
  N.hold_s = 1000; /* however long the hold may be */
  everyone("x", f32(4));
  plait_response_list_t l = tick();
  ASSERT_NAMES(l, "x");
  cr_assert_eq(N.holding, 0);
  plait_responses_free(&l);
  stop();
}

Test(dispatch, a_lone_cached_operation_goes_in_the_same_tick) {
  start(2, 1 << 20, 16, 0);
  N.hold_s = 1000;
  for (int step = 0; step < 3; step++) {
    if (step)
      everyone_by_id("loss", f32(1));
    else
      everyone("loss", f32(1));
    plait_response_list_t l = tick();
    ASSERT_NAMES(l, "loss");
    plait_responses_free(&l);
  }
  stop();
}

Test(dispatch, a_burst_waits_for_its_companions_and_fuses_into_one_response) {
  start(2, 1 << 20, 16, 0);
  N.hold_s = 1000;
  burst_abc();
  double t = plait_now();
  everyone_by_id("a", f32(4));
  everyone_by_id("b", f32(4));
  plait_response_list_t l = tick_at(t);
  cr_assert_eq(l.n, 0, "a and b went without c, which ran with them last time");
  cr_assert_eq(N.holding, 1);
  cr_assert_eq(plait_neg_hold_until(&N), t + 1000);
  plait_responses_free(&l);
  everyone_by_id("c", f32(4));
  l = tick_at(t + 0.001);
  ASSERT_NAMES(l, "a b c");
  cr_assert_eq(l.n, 1, "one fused response");
  cr_assert_eq(N.holding, 0);
  plait_responses_free(&l);
  stop();
}

Test(dispatch, a_hold_ends_after_hold_s_and_the_burst_shrinks) {
  start(2, 1 << 20, 16, 0);
  N.hold_s = 0.5;
  burst_abc();
  double t = plait_now();
  everyone_by_id("a", f32(4));
  everyone_by_id("b", f32(4));
  plait_response_list_t l = tick_at(t);
  cr_assert_eq(l.n, 0);
  plait_responses_free(&l);
  l = tick_at(t + 0.25);
  cr_assert_eq(l.n, 0, "still within the hold");
  plait_responses_free(&l);
  l = tick_at(t + 0.5);
  ASSERT_NAMES(l, "a b");
  plait_responses_free(&l);
  /* a and b ran without c: next time they need not wait for it */
  everyone_by_id("a", f32(4));
  everyone_by_id("b", f32(4));
  l = tick_at(t + 0.6);
  ASSERT_NAMES(l, "a b");
  plait_responses_free(&l);
  /* c is alone in its burst now: it goes at once too */
  everyone_by_id("c", f32(4));
  l = tick_at(t + 0.7);
  ASSERT_NAMES(l, "c");
  plait_responses_free(&l);
  stop();
}

Test(dispatch, a_full_fusion_buffer_goes_without_waiting) {
  start(2, 32, 16, 0); /* two of the 16-byte tensors fill it */
  N.hold_s = 1000;
  burst_abc();
  everyone_by_id("a", f32(4));
  everyone_by_id("b", f32(4));
  plait_response_list_t l = tick();
  cr_assert_gt(l.n, 0, "a and b fill the buffer: c could not join them anyway");
  plait_responses_free(&l);
  stop();
}

Test(dispatch, nothing_waits_without_fusion_or_hold_time) {
  for (int k = 0; k < 2; k++) {
    start(2, k ? 0 : 1 << 20, 16, 0);
    N.hold_s = k ? 1000 : 0; /* fusion off, or PLAIT_CYCLE_TIME_MS=0 */
    burst_abc();
    everyone_by_id("a", f32(4));
    plait_response_list_t l = tick();
    ASSERT_NAMES(l, "a");
    plait_responses_free(&l);
    stop();
  }
}

Test(dispatch, a_failure_is_never_held) {
  start(2, 1 << 20, 16, 0);
  N.hold_s = 1000;
  burst_abc();
  everyone_by_id("a", f32(4));
  announce(0, "odd", f32(4));
  announce(1, "odd", f32(8)); /* a mismatch: an error response */
  plait_response_list_t l = tick();
  ASSERT_NAMES(l, "a | odd");
  cr_assert_eq(l.r[1].status, PLAIT_ERR_MISMATCH);
  plait_responses_free(&l);
  stop();
}

Test(dispatch, shutdown_releases_held_operations) {
  start(2, 1 << 20, 16, 0);
  N.hold_s = 1000;
  burst_abc();
  everyone_by_id("a", f32(4));
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 0);
  plait_responses_free(&l);
  cr_assert_eq(plait_neg_fail_all(&N, PLAIT_ERR_SHUTDOWN, "rank 1 shut down", &l), PLAIT_SUCCESS);
  ASSERT_NAMES(l, "a");
  cr_assert_eq(l.r[0].status, 0, "a was agreed: it runs");
  plait_responses_free(&l);
  stop();
}

/* ------------------------------------------------------------- shutdown */

Test(negotiate, fail_all_fails_every_pending_operation) {
  start(3, 1 << 20, 0, 0);
  announce(0, "p", f32(1));
  announce(1, "q", f32(1));
  plait_response_list_t l;
  cr_assert_eq(plait_neg_fail_all(&N, PLAIT_ERR_SHUTDOWN, "rank 1 shut down", &l), PLAIT_SUCCESS);
  ASSERT_NAMES(l, "p | q");
  for (int i = 0; i < 2; i++) cr_assert_eq(l.r[i].status, PLAIT_ERR_SHUTDOWN);
  cr_assert_str_eq(l.r[0].message, "'p' was pending: rank 1 shut down");
  plait_responses_free(&l);
  cr_assert_eq(N.records.count, 0);
  stop();
}
