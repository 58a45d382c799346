/*
 * Tests of the burst record (src/engine/negotiate/burst.c): which cached operations
 * ran in the same response list last time, and whether a set of ready ones
 * still misses one of those companions.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/negotiate/burst.h"

static plait_bursts_t B;

static void setup(void) { plait_bursts_init(&B); }
static void teardown(void) { plait_bursts_free(&B); }

TestSuite(burst, .init = setup, .fini = teardown);

Test(burst, unknown_ids_and_lone_ones_miss_nothing) {
  int none[] = {3, -1};
  cr_expect_eq(plait_bursts_incomplete(&B, none, 2), 0);
  int lone[] = {7};
  cr_assert_eq(plait_bursts_record(&B, lone, 1), PLAIT_SUCCESS);
  cr_expect_eq(plait_bursts_incomplete(&B, lone, 1), 0);
}

Test(burst, a_member_missing_is_seen_until_it_comes) {
  int abc[] = {0, 1, 2};
  cr_assert_eq(plait_bursts_record(&B, abc, 3), PLAIT_SUCCESS);
  int ab[] = {1, 0};
  cr_expect_eq(plait_bursts_incomplete(&B, ab, 2), 1);
  int all[] = {2, 0, -1, 1};
  cr_expect_eq(plait_bursts_incomplete(&B, all, 4), 0);
}

Test(burst, a_member_that_ran_elsewhere_is_no_longer_expected) {
  int abc[] = {0, 1, 2};
  cr_assert_eq(plait_bursts_record(&B, abc, 3), PLAIT_SUCCESS);
  int c[] = {2};
  cr_assert_eq(plait_bursts_record(&B, c, 1), PLAIT_SUCCESS);
  int ab[] = {0, 1};
  cr_expect_eq(plait_bursts_incomplete(&B, ab, 2), 0);
  int a[] = {0};
  cr_expect_eq(plait_bursts_incomplete(&B, a, 1), 1);
}

Test(burst, many_ids_and_many_bursts_reuse_their_numbers) {
  enum { N = 1000 };
  int ids[N];
  for (int i = 0; i < N; i++) ids[i] = i;
  for (int round = 0; round < 50; round++) /* every id alone, then all together, ... */
    for (int i = 0; i < N; i++) cr_assert_eq(plait_bursts_record(&B, &ids[i], 1), PLAIT_SUCCESS);
  cr_assert_eq(plait_bursts_record(&B, ids, N), PLAIT_SUCCESS);
  cr_expect_eq(plait_bursts_incomplete(&B, ids, N - 1), 1);
  cr_expect_eq(plait_bursts_incomplete(&B, ids, N), 0);
  cr_expect_leq(B.cap, 1024, "burst numbers are reused, not grown: room for %d", B.cap);
}

Test(burst, missing_counts_each_burst_once) {
  int abc[] = {0, 1, 2}, de[] = {3, 4};
  cr_assert_eq(plait_bursts_record(&B, abc, 3), PLAIT_SUCCESS);
  cr_assert_eq(plait_bursts_record(&B, de, 2), PLAIT_SUCCESS);
  int a[] = {0};
  cr_expect_eq(plait_bursts_missing(&B, a, 1), 2);
  int ad[] = {0, 3, 9, -1};
  cr_expect_eq(plait_bursts_missing(&B, ad, 4), 3, "2 of abc, 1 of de; unknown ids none");
  int abd[] = {1, 0, 3};
  cr_expect_eq(plait_bursts_missing(&B, abd, 3), 2);
  int all[] = {4, 2, 0, 3, 1};
  cr_expect_eq(plait_bursts_missing(&B, all, 5), 0);
  cr_expect_eq(plait_bursts_incomplete(&B, a, 1), 1, "a query after a count is its own");
  cr_expect_eq(plait_bursts_missing(&B, all, 5), 0);
}

Test(burst, a_list_records_its_cached_allreduces_that_did_not_fail) {
  plait_resp_entry_t ok[2] = {{.cache_id = 0, .assign_id = -1}, {.cache_id = -1, .assign_id = 1}};
  plait_resp_entry_t failed[1] = {{.cache_id = 2, .assign_id = -1}};
  plait_resp_entry_t bcast[1] = {{.cache_id = 3, .assign_id = -1}};
  plait_resp_entry_t uncached[1] = {{.cache_id = -1, .assign_id = -1}};
  plait_response_t r[4];
  memset(r, 0, sizeof r);
  r[0] = (plait_response_t){.coll = PLAIT_COLL_ALLREDUCE, .n = 2, .e = ok};
  r[1] = (plait_response_t){.coll = PLAIT_COLL_ALLREDUCE, .status = PLAIT_ERR_MISMATCH, .n = 1,
                            .e = failed};
  r[2] = (plait_response_t){.coll = PLAIT_COLL_BROADCAST, .n = 1, .e = bcast};
  r[3] = (plait_response_t){.coll = PLAIT_COLL_ALLREDUCE, .n = 1, .e = uncached};
  plait_response_list_t l;
  memset(&l, 0, sizeof l);
  l.n = 4;
  l.r = r;
  plait_bursts_record_list(&B, &l);
  int a[] = {0};
  cr_expect_eq(plait_bursts_missing(&B, a, 1), 1, "0 ran with 1 (its assigned id)");
  int ab[] = {0, 1};
  cr_expect_eq(plait_bursts_missing(&B, ab, 2), 0);
  int c[] = {2}, d[] = {3};
  cr_expect_eq(plait_bursts_missing(&B, c, 1), 0, "a failed response is no burst");
  cr_expect_eq(plait_bursts_missing(&B, d, 1), 0, "nor is a broadcast");
}
