/*
 * Rank 0's work per announcement does not grow with the job
 * (src/engine/negotiate/negotiate.c, bench/scale): the readiness rule
 * looked at every rank's slot of a record on every announcement (whether a
 * joined rank counts as present), so a record announced by N ranks cost
 * O(N^2) slot reads, 65,536 at 256 ranks and 16.8 million at 4,096, per
 * operation. Without a join it now looks at none (n->rank_scans counts what
 * it looks at); with one it still counts the joined ranks (test_negotiate's
 * join tests).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "meta_util.h"
#include "util/clock.h"

#define RANKS 256

Test(negotiate_scale, no_rank_scan_per_announcement_without_a_join) {
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  plait_cache_t cache;
  plait_negotiator_t n;
  cr_assert_eq(plait_cache_init(&cache, 16), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_init(&n, RANKS, &cfg, &cache), PLAIT_SUCCESS);
  plait_meta_t m = f32(1);
  for (int step = 0; step < 2; step++) { /* by name, then by its cache id */
    int id = step ? 0 : -1;
    for (int r = RANKS - 1; r >= 0; r--) /* rank 0 last: its slot is the last one found */
      cr_assert_eq(plait_neg_add(&n, r, "tiny", &m, id, n.lists_sent), PLAIT_SUCCESS, "%s",
                   plait_last_error());
    plait_response_list_t l;
    int any = 0;
    cr_assert_eq(plait_neg_plan(&n, plait_now(), &l, &any), PLAIT_SUCCESS, "%s",
                 plait_last_error());
    cr_assert(any && l.n == 1 && l.r[0].status == 0, "step %d: 'tiny' not released", step);
    n.lists_sent++;
    plait_responses_free(&l);
  }
  cr_expect_eq(n.rank_scans, 0, "the readiness rule looked at %llu rank slots for 2 x %d "
               "announcements of %d ranks", (unsigned long long)n.rank_scans, RANKS, RANKS);
  plait_neg_free(&n);
  plait_cache_free(&cache);
}
