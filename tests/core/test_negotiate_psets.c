/*
 * Rank 0's negotiation with process sets (src/engine/negotiate/negotiate.c,
 * negotiate_pset.c, responses.c, process_set.c), called directly: a job of 4
 * ranks with set 1 = {1, 2} and set 2 = {2, 3} (made through a fake
 * transport whose subset entry records nothing), announcements in with
 * plait_neg_add, responses out of plait_neg_plan. No sockets, no ranks.
 *
 * Checked: readiness counts a set's members only; the same name on two sets
 * and on the global set are three operations; fusion only within a set;
 * allgather dims by the set's members; a rank outside the set and an unknown
 * set fail the operation at once; a removal with an operation pending fails
 * naming it, and succeeds once nothing is pending; mismatched adds name the
 * ranks and their sets.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "meta_util.h"
#include "engine/transport/process_set.h"
#include "util/clock.h"

static plait_negotiator_t N;
static plait_cache_t C;
static plait_psets_t *P;

static plait_result_t fake_subset(void *state, const int *ranks, int n, void **sub) {
  (void)state, (void)ranks, (void)n;
  *sub = NULL; /* rank 0 is in neither set: nothing to make */
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

static plait_transport_t T;

static void start(void) {
  memset(&T, 0, sizeof T);
  T.struct_size = sizeof T;
  T.name = "fake";
  T.subset = fake_subset;
  T.finalize = fake_finalize;
  T.last_error = fake_last_error;
  P = plait_psets_create(0, 4, &T, NULL, 1);
  cr_assert(P);
  int32_t id = 0;
  const int64_t a[] = {1, 2}, b[] = {2, 3};
  cr_assert_eq(plait_psets_apply_add(P, a, 2, &id), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(id, 1);
  cr_assert_eq(plait_psets_apply_add(P, b, 2, &id), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(id, 2);
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.fusion_threshold = 1 << 20;
  cr_assert_eq(plait_cache_init(&C, 64), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_init(&N, 4, &cfg, &C), PLAIT_SUCCESS);
  N.psets = P;
}

static void stop(void) {
  plait_neg_free(&N);
  plait_cache_free(&C);
  plait_psets_destroy(P);
}

TestSuite(negotiate_psets, .init = start, .fini = stop);

static plait_meta_t on(int32_t pset, plait_coll_t coll, int64_t rows) {
  plait_meta_t m = meta(coll, PLAIT_FLOAT32, rows);
  m.pset = pset;
  return m;
}

static void announce(int rank, const char *name, plait_meta_t m) {
  cr_assert_eq(plait_neg_add(&N, rank, name, &m, -1, N.lists_sent), PLAIT_SUCCESS,
               "rank %d announcing '%s': %s", rank, name, plait_last_error());
}

static plait_response_list_t tick(void) {
  plait_response_list_t l;
  int any = -1;
  cr_assert_eq(plait_neg_plan(&N, plait_now(), &l, &any), PLAIT_SUCCESS, "%s", plait_last_error());
  if (any) N.lists_sent++;
  return l;
}

Test(negotiate_psets, ready_when_the_sets_members_announced) {
  announce(1, "x", on(1, PLAIT_COLL_ALLREDUCE, 4));
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 0, "ready after 1 of 2 members");
  plait_responses_free(&l);
  announce(2, "x", on(1, PLAIT_COLL_ALLREDUCE, 4));
  l = tick();
  cr_assert_eq(l.n, 1, "not ready when both members announced");
  cr_assert_eq(l.r[0].pset, 1);
  cr_assert_eq(l.r[0].status, 0, "%s", l.r[0].message ? l.r[0].message : "");
  cr_assert_str_eq(l.r[0].e[0].name, "x");
  plait_responses_free(&l);
}

Test(negotiate_psets, one_name_on_three_sets_is_three_operations) {
  for (int r = 0; r < 4; r++) announce(r, "g", on(0, PLAIT_COLL_ALLREDUCE, 2));
  announce(2, "g", on(1, PLAIT_COLL_ALLREDUCE, 3)); /* rank 2 is in both sets */
  announce(2, "g", on(2, PLAIT_COLL_ALLREDUCE, 5));
  announce(1, "g", on(1, PLAIT_COLL_ALLREDUCE, 3));
  announce(3, "g", on(2, PLAIT_COLL_ALLREDUCE, 5));
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 3, "%u responses", l.n);
  int seen[3] = {0};
  for (uint32_t i = 0; i < l.n; i++) {
    cr_assert_eq(l.r[i].status, 0, "%s", l.r[i].message ? l.r[i].message : "");
    seen[l.r[i].pset]++;
  }
  cr_assert(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
  plait_responses_free(&l);
}

Test(negotiate_psets, fusion_stays_within_a_set) {
  const char *names[] = {"a", "b"};
  for (int k = 0; k < 2; k++) {
    for (int r = 1; r <= 2; r++) announce(r, names[k], on(1, PLAIT_COLL_ALLREDUCE, 8));
    for (int r = 2; r <= 3; r++) announce(r, names[k], on(2, PLAIT_COLL_ALLREDUCE, 8));
  }
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 2, "%u responses: one fused per set", l.n);
  for (uint32_t i = 0; i < 2; i++) cr_assert_eq(l.r[i].n, 2, "response %u has %u", i, l.r[i].n);
  cr_assert_neq(l.r[0].pset, l.r[1].pset);
  plait_responses_free(&l);
}

Test(negotiate_psets, allgather_dims_go_by_the_sets_members) {
  announce(3, "ag", on(2, PLAIT_COLL_ALLGATHER, 7));
  announce(2, "ag", on(2, PLAIT_COLL_ALLGATHER, 1));
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 1);
  cr_assert_eq(l.r[0].ndims, 2, "%u dims for a set of 2", l.r[0].ndims);
  cr_assert(l.r[0].dims[0] == 1 && l.r[0].dims[1] == 7, "dims %lld %lld",
            (long long)l.r[0].dims[0], (long long)l.r[0].dims[1]);
  plait_responses_free(&l);
}

Test(negotiate_psets, outside_the_set_or_an_unknown_set_fails_at_once) {
  announce(0, "out", on(1, PLAIT_COLL_ALLREDUCE, 1));
  announce(1, "gone", on(7, PLAIT_COLL_ALLREDUCE, 1));
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 2);
  cr_assert_eq(l.r[0].status, PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(l.r[0].message, "rank 0 is not a member of process set 1"), "%s",
            l.r[0].message);
  cr_assert_eq(l.r[1].status, PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(l.r[1].message, "process set 7, which does not exist"), "%s",
            l.r[1].message);
  plait_responses_free(&l);
}

static plait_meta_t removal(int32_t id) {
  plait_meta_t m = on(0, PLAIT_COLL_PSET_REMOVE, 0);
  m.ndim = 0;
  m.root = id;
  return m;
}

Test(negotiate_psets, removal_fails_while_an_operation_is_pending) {
  announce(1, "pending", on(1, PLAIT_COLL_ALLREDUCE, 1));
  for (int r = 0; r < 4; r++) announce(r, "rm.0", removal(1));
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 1);
  cr_assert_eq(l.r[0].status, PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(l.r[0].message, "process set 1 cannot be removed") &&
            strstr(l.r[0].message, "'pending'"), "%s", l.r[0].message);
  plait_responses_free(&l);
  announce(2, "pending", on(1, PLAIT_COLL_ALLREDUCE, 1));
  for (int r = 0; r < 4; r++) announce(r, "rm.1", removal(1));
  l = tick();
  cr_assert_eq(l.n, 2);
  cr_assert_eq(l.r[0].status, 0);
  cr_assert_eq(l.r[1].status, 0, "%s", l.r[1].message ? l.r[1].message : "");
  cr_assert_eq(l.r[1].coll, PLAIT_COLL_PSET_REMOVE);
  plait_responses_free(&l);
}

Test(negotiate_psets, mismatched_adds_name_the_ranks_and_their_sets) {
  int64_t a[] = {0, 1}, b[] = {0, 3};
  for (int r = 0; r < 4; r++) {
    plait_meta_t m = on(0, PLAIT_COLL_PSET_ADD, 0);
    m.ndim = 0;
    m.nsplits = 2;
    m.splits = r < 2 ? a : b;
    announce(r, "add.0", m);
  }
  plait_response_list_t l = tick();
  cr_assert_eq(l.n, 1);
  cr_assert_eq(l.r[0].status, PLAIT_ERR_MISMATCH);
  cr_assert(strstr(l.r[0].message, "process set ranks") &&
            strstr(l.r[0].message, "ranks 0, 1 sent [0, 1]") &&
            strstr(l.r[0].message, "ranks 2, 3 sent [0, 3]"), "%s", l.r[0].message);
  plait_responses_free(&l);
}
