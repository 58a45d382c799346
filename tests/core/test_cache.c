/*
 * Tests of the response cache (src/engine/negotiate/cache.c) directly (plait_cache_*)
 * and of the id sets that stand for cached tensors on the wire (a list of
 * ids or a bit-vector, src/engine/negotiate/messages.c): ids given in order
 * and never reused, exact-metadata lookups, eligibility, a full cache, and
 * random id sets (fixed seed, printed on failure) that must come back from
 * the requests and responses messages as the same ids, in ascending order,
 * resolving to the same names through every rank's copy of the cache.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/wire.h"
#include "engine/negotiate/cache.h"
#include "engine/negotiate/messages.h"
#include "meta_util.h"

#define SEED 0xCAC4Eu

static plait_cache_t C;


Test(cache, ids_in_order_until_full) {
  cr_assert_eq(plait_cache_init(&C, 3), PLAIT_SUCCESS);
  plait_meta_t m = f32(4);
  for (int id = 0; id < 3; id++) {
    char name[8];
    snprintf(name, sizeof name, "t%d", id);
    cr_assert_eq(plait_cache_next_id(&C), id);
    cr_assert_eq(plait_cache_put(&C, id, name, &m), PLAIT_SUCCESS);
    cr_assert_eq(plait_cache_lookup(&C, name, &m), id);
    cr_assert_str_eq(plait_cache_get(&C, id)->name, name);
  }
  cr_assert_eq(plait_cache_next_id(&C), -1, "full: new tensors go by name");
  cr_assert_eq(plait_cache_put(&C, 3, "t3", &m), PLAIT_ERR_PROTOCOL);
  cr_assert_str_eq(plait_last_error(), "response cache id 3 out of order (next is 3 of 3)");
  cr_assert_null(plait_cache_get(&C, 3));
  cr_assert_null(plait_cache_get(&C, -1));
  plait_cache_free(&C);
}

Test(cache, an_id_out_of_order_is_refused) {
  cr_assert_eq(plait_cache_init(&C, 8), PLAIT_SUCCESS);
  plait_meta_t m = f32(1);
  cr_assert_eq(plait_cache_put(&C, 1, "a", &m), PLAIT_ERR_PROTOCOL);
  cr_assert_str_eq(plait_last_error(), "response cache id 1 out of order (next is 0 of 8)");
  cr_assert_eq(plait_cache_put(&C, 0, "a", &m), PLAIT_SUCCESS);
  cr_assert_eq(plait_cache_put(&C, 0, "b", &m), PLAIT_ERR_PROTOCOL, "ids are never reused");
  plait_cache_free(&C);
}

Test(cache, capacity_zero_caches_nothing) {
  cr_assert_eq(plait_cache_init(&C, 0), PLAIT_SUCCESS);
  plait_meta_t m = f32(1);
  cr_assert_eq(plait_cache_next_id(&C), -1);
  cr_assert_eq(plait_cache_lookup(&C, "a", &m), -1);
  cr_assert_eq(plait_cache_put(&C, 0, "a", &m), PLAIT_ERR_PROTOCOL);
  plait_cache_free(&C);
}

Test(cache, only_kinds_whose_metadata_every_rank_shares) {
  plait_meta_t m = f32(1);
  int want[PLAIT_COLL_MAX_ + 1] = {0, 1, 0, 1, 0, 1, 0, 0};
  for (int c = 1; c <= PLAIT_COLL_MAX_; c++) {
    m.coll = (uint8_t)c;
    cr_assert_eq(plait_cache_eligible(&m), want[c], "%s", plait_coll_name((plait_coll_t)c));
  }
}

/* A hit needs the same name and exactly the same metadata; the cache keeps
 * its own copy of what it was given. */
Test(cache, lookups_need_exactly_the_same_metadata) {
  cr_assert_eq(plait_cache_init(&C, 8), PLAIT_SUCCESS);
  plait_meta_t m = f32(6);
  m.ndim = 2, m.shape[0] = 2, m.shape[1] = 3;
  char group[] = "grp";
  m.group = group, m.group_size = 2;
  cr_assert_eq(plait_cache_put(&C, 0, "w", &m), PLAIT_SUCCESS);
  group[0] = 'X'; /* the caller's string changes: the cache's copy does not */
  m.group = "grp";
  cr_assert_eq(plait_cache_lookup(&C, "w", &m), 0);
  cr_assert_eq(plait_cache_lookup(&C, "v", &m), -1);
  plait_meta_t o;
#define MISS(change)                                                           \
  o = m;                                                                       \
  change;                                                                      \
  cr_assert_eq(plait_cache_lookup(&C, "w", &o), -1, "hit despite %s", #change)
  MISS(o.dtype = PLAIT_FLOAT64);
  MISS(o.op = PLAIT_OP_MAX);
  MISS(o.device = 0);
  MISS(o.root = 1);
  MISS(o.prescale = 0.5);
  MISS(o.postscale = 2);
  MISS(o.shape[1] = 4);
  MISS(o.ndim = 1);
  MISS(o.group = "other");
  MISS(o.group = NULL);
  MISS(o.group_size = 3);
  MISS(o.coll = PLAIT_COLL_BROADCAST);
#undef MISS
  o = m;
  o.coll = PLAIT_COLL_ALLGATHER;
  cr_assert_eq(plait_cache_lookup(&C, "w", &o), -1, "ineligible kinds never hit");
  /* the same name with new metadata takes a new id; the name now means it */
  plait_meta_t n = f32(9);
  cr_assert_eq(plait_cache_put(&C, 1, "w", &n), PLAIT_SUCCESS);
  cr_assert_eq(plait_cache_lookup(&C, "w", &n), 1);
  cr_assert_eq(plait_cache_lookup(&C, "w", &m), -1);
  plait_cache_free(&C);
}

/* ----------------------------------------------------- ids on the wire */

static uint64_t rng;
static uint32_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

/* A random set of n distinct ids below cap, in random order. */
static int random_ids(int32_t *ids, int cap) {
  static uint8_t pick[4096];
  memset(pick, 0, (size_t)cap);
  int dense = next() % 2, n = 0;
  for (int id = 0; id < cap; id++)
    if (dense ? next() % 4 != 0 : next() % 64 == 0) pick[id] = 1, ids[n++] = id;
  for (int i = n - 1; i > 0; i--) { /* shuffle */
    int j = (int)(next() % (uint32_t)(i + 1));
    int32_t t = ids[i];
    ids[i] = ids[j], ids[j] = t;
  }
  return n;
}

static int cmp_id(const void *a, const void *b) {
  return (*(const int32_t *)a > *(const int32_t *)b) - (*(const int32_t *)a < *(const int32_t *)b);
}

/* A rank's cache: name "t<id>" for every id below cap. */
static void fill(plait_cache_t *c, int cap) {
  cr_assert_eq(plait_cache_init(c, cap), PLAIT_SUCCESS);
  plait_meta_t m = f32(1);
  for (int id = 0; id < cap; id++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", id);
    cr_assert_eq(plait_cache_put(c, id, name, &m), PLAIT_SUCCESS);
  }
}

Test(cache, id_sets_survive_requests_and_responses_as_list_or_bits) {
  enum { TRIALS = 300 };
  static int32_t ids[4096], sorted[4096];
  plait_cache_t mine;
  rng = SEED;
  int bits_seen = 0, lists_seen = 0;
  for (int trial = 0; trial < TRIALS; trial++) {
    int cap = 1 + (int)(next() % 2000);
    int n = random_ids(ids, cap);
    memcpy(sorted, ids, sizeof *ids * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_id);
    size_t nbits = n ? (size_t)sorted[n - 1] + 1 : 0;
    int want_bits = n > 0 && (nbits + 7) / 8 < 4u * (size_t)n;
    /* REQUESTS: a rank announces cached tensors by id, in any order */
    plait_request_t *rq = calloc((size_t)(n ? n : 1), sizeof *rq);
    for (int i = 0; i < n; i++) rq[i].cache_id = ids[i];
    plait_request_list_t rl = {0, (uint32_t)n, rq, 7}, back;
    plait_writer_t w = {0};
    cr_assert_eq(plait_requests_encode(&w, &rl), PLAIT_SUCCESS);
    size_t payload = w.len - PLAIT_WIRE_HEADER_SIZE;
    size_t list_size = 4 + 8 + 4 + 1 + 4 + 4 * (size_t)n, bits_size = 21 + (nbits + 7) / 8;
    cr_assert_eq(payload, want_bits ? bits_size : list_size,
                 "seed %#x trial %d: %d ids below %zu took %zu bytes", SEED, trial, n, nbits,
                 payload);
    want_bits ? bits_seen++ : lists_seen++;
    cr_assert_eq(plait_requests_decode(w.data + PLAIT_WIRE_HEADER_SIZE, payload, &back),
                 PLAIT_SUCCESS, "seed %#x trial %d: %s", SEED, trial, plait_last_error());
    cr_assert_eq(back.n, (uint32_t)n);
    cr_assert_eq(back.acked, 7);
    for (int i = 0; i < n; i++)
      cr_assert_eq(back.r[i].cache_id, sorted[i], "seed %#x trial %d: id %d", SEED, trial, i);
    plait_requests_free(&back);
    free(rq);
    plait_wr_free(&w);
    /* RESPONSES: rank 0 answers with the ascending ids; a rank resolves them */
    if (n == 0) continue;
    plait_resp_entry_t *e = calloc((size_t)n, sizeof *e);
    for (int i = 0; i < n; i++) e[i].cache_id = sorted[i], e[i].assign_id = -1;
    plait_response_t x = {.coll = PLAIT_COLL_ALLREDUCE, .n = (uint32_t)n, .e = e,
                          .join_rank = -1};
    plait_response_list_t l = {.flags = 0, .shutdown_rank = -1, .n = 1, .r = &x}, got;
    memset(&w, 0, sizeof w);
    cr_assert_eq(plait_responses_encode(&w, &l), PLAIT_SUCCESS);
    cr_assert_eq(plait_responses_decode(w.data + PLAIT_WIRE_HEADER_SIZE,
                                        w.len - PLAIT_WIRE_HEADER_SIZE, &got),
                 PLAIT_SUCCESS, "seed %#x trial %d: %s", SEED, trial, plait_last_error());
    cr_assert_eq(got.n, 1);
    cr_assert_eq(got.r[0].n, (uint32_t)n);
    fill(&mine, cap);
    for (int i = 0; i < n; i++) {
      cr_assert_eq(got.r[0].e[i].cache_id, sorted[i], "seed %#x trial %d: entry %d", SEED,
                   trial, i);
      cr_assert_null(got.r[0].e[i].name, "names of cached entries are the receiver's to find");
      char want[16];
      snprintf(want, sizeof want, "t%d", sorted[i]);
      cr_assert_str_eq(plait_cache_get(&mine, got.r[0].e[i].cache_id)->name, want);
    }
    plait_cache_free(&mine);
    plait_responses_free(&got);
    plait_wr_free(&w);
    free(e);
  }
  cr_assert(bits_seen > 10 && lists_seen > 10, "both forms exercised: %d bits, %d lists",
            bits_seen, lists_seen);
}

Test(cache, requests_resolve_by_name_or_by_id) {
  cr_assert_eq(plait_cache_init(&C, 4), PLAIT_SUCCESS);
  plait_meta_t m = f32(8);
  cr_assert_eq(plait_cache_put(&C, 0, "w", &m), PLAIT_SUCCESS);
  const char *name;
  const plait_meta_t *meta;
  plait_request_t by_name = {"x", -1, f32(3)};
  cr_assert_eq(plait_cache_resolve(&C, 1, &by_name, &name, &meta), PLAIT_SUCCESS);
  cr_expect_str_eq(name, "x");
  cr_expect_eq(meta, &by_name.meta);
  plait_request_t by_id = {NULL, 0, {0}};
  cr_assert_eq(plait_cache_resolve(&C, 1, &by_id, &name, &meta), PLAIT_SUCCESS);
  cr_expect_str_eq(name, "w");
  cr_expect_eq(meta->shape[0], 8);
  plait_request_t unknown = {NULL, 3, {0}};
  cr_expect_eq(plait_cache_resolve(&C, 2, &unknown, &name, &meta), PLAIT_ERR_PROTOCOL);
  cr_expect(strstr(plait_last_error(), "rank 2") && strstr(plait_last_error(), "id 3"), "%s",
            plait_last_error());
  plait_cache_free(&C);
}

/* A peer's list from rank 0 (plait_cache_resolve_responses): ids become the
 * slot's name, borrowed; an assigned id is recorded with this rank's own
 * metadata of that name, else the list's; an unknown id or an assignment
 * without metadata is a protocol error. */
Test(cache, a_peer_resolves_a_response_list) {
  cr_assert_eq(plait_cache_init(&C, 4), PLAIT_SUCCESS);
  plait_namemap_t local;
  cr_assert_eq(plait_namemap_init(&local), 0);
  plait_meta_t m8 = f32(8), m5 = f32(5);
  cr_assert_eq(plait_cache_put(&C, 0, "w", &m8), PLAIT_SUCCESS);
  plait_entry_t mine;
  memset(&mine, 0, sizeof mine);
  mine.meta = f32(6);
  char key[PLAIT_OP_KEY_MAX];
  cr_assert_eq(plait_namemap_put(&local, plait_op_key(key, 0, "x"), &mine), 0);
  plait_resp_entry_t e[3] = {
      {NULL, 0, -1, 0, {0}, 0},         /* by id 0 */
      {"x", -1, 1, 1, m5, 0},           /* assigned 1: this rank's metadata wins */
      {"y", -1, 2, 1, m5, 0},           /* assigned 2: the list's metadata */
  };
  plait_response_t r = {PLAIT_COLL_ALLREDUCE, 0, NULL, 3, e, NULL, 0, -1, 0};
  plait_response_list_t l = {0, -1, 1, &r, {0}};
  cr_assert_eq(plait_cache_resolve_responses(&C, &local, &l), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_expect_str_eq(e[0].name, "w");
  cr_expect(e[0].name_borrowed);
  cr_expect_eq(plait_cache_get(&C, 1)->meta.shape[0], 6);
  cr_expect_eq(plait_cache_get(&C, 2)->meta.shape[0], 5);
  plait_resp_entry_t unknown = {NULL, 3, -1, 0, {0}, 0};
  r = (plait_response_t){PLAIT_COLL_ALLREDUCE, 0, NULL, 1, &unknown, NULL, 0, -1, 0};
  cr_expect_eq(plait_cache_resolve_responses(&C, &local, &l), PLAIT_ERR_PROTOCOL);
  cr_expect(strstr(plait_last_error(), "cache id 3, which was never assigned"), "%s",
            plait_last_error());
  plait_resp_entry_t bare = {"z", -1, 3, 0, {0}, 0};
  r.e = &bare;
  cr_expect_eq(plait_cache_resolve_responses(&C, &local, &l), PLAIT_ERR_PROTOCOL);
  cr_expect(strstr(plait_last_error(), "cached 'z' without metadata"), "%s", plait_last_error());
  plait_namemap_free(&local);
  plait_cache_free(&C);
}
