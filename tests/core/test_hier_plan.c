/*
 * The hierarchical allreduce's plan (src/engine/transport/hier_plan.h):
 * the layout from the hosts, when it runs, the shards, the mode's values.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "engine/transport/hier_plan.h"

#define MAXR 16

static int layout(const char *const *hosts, int n, int *of, int *idx, int *nh, int *per,
                  char *why) {
  uint64_t h[MAXR];
  for (int r = 0; r < n; r++) h[r] = plait_hier_host_hash(hosts[r]);
  return plait_hier_layout(h, n, of, idx, nh, per, why, 160);
}

Test(hier_plan, two_hosts_of_two_contiguous) {
  const char *hosts[] = {"a", "a", "b", "b"};
  int of[4], idx[4], nh, per, sets[4];
  char why[160] = "";
  cr_assert(layout(hosts, 4, of, idx, &nh, &per, why), "%s", why);
  cr_expect_eq(nh, 2);
  cr_expect_eq(per, 2);
  int want_of[] = {0, 0, 1, 1}, want_idx[] = {0, 1, 0, 1};
  cr_expect_arr_eq(of, want_of, sizeof of);
  cr_expect_arr_eq(idx, want_idx, sizeof idx);
  /* the cross set of local index 1: ranks 1 and 3 */
  cr_expect_eq(plait_hier_members(idx, 4, 1, sets), 2);
  cr_expect(sets[0] == 1 && sets[1] == 3);
}

Test(hier_plan, interleaved_ranks_number_hosts_by_their_lowest_rank) {
  const char *hosts[] = {"y", "x", "z", "y", "x", "z"};
  int of[6], idx[6], nh, per, sets[6];
  char why[160] = "";
  cr_assert(layout(hosts, 6, of, idx, &nh, &per, why), "%s", why);
  cr_expect(nh == 3 && per == 2);
  int want_of[] = {0, 1, 2, 0, 1, 2}, want_idx[] = {0, 0, 0, 1, 1, 1};
  cr_expect_arr_eq(of, want_of, sizeof of);
  cr_expect_arr_eq(idx, want_idx, sizeof idx);
  cr_expect_eq(plait_hier_members(of, 6, 1, sets), 2); /* host "x": ranks 1 and 4 */
  cr_expect(sets[0] == 1 && sets[1] == 4);
  cr_expect_eq(plait_hier_members(idx, 6, 0, sets), 3); /* cross set 0: 0, 1, 2 */
  cr_expect(sets[0] == 0 && sets[1] == 1 && sets[2] == 2);
}

Test(hier_plan, layouts_that_do_not_fit_say_why) {
  int of[8], idx[8], nh, per;
  char why[160];
  const char *one_host[] = {"a", "a", "a"};
  cr_expect_not(layout(one_host, 3, of, idx, &nh, &per, why));
  cr_expect(strstr(why, "one host"), "%s", why);
  const char *singles[] = {"a", "b", "c"};
  cr_expect_not(layout(singles, 3, of, idx, &nh, &per, why));
  cr_expect(strstr(why, "one rank per host"), "%s", why);
  const char *uneven[] = {"a", "a", "a", "b"};
  cr_expect_not(layout(uneven, 4, of, idx, &nh, &per, why));
  cr_expect(strstr(why, "different numbers of ranks (host of rank 0: 3, host 1: 1)"), "%s", why);
}

Test(hier_plan, when_it_runs) {
  const double job = plait_hier_auto_min_gain(0), shm = plait_hier_auto_min_gain(1);
  /* off: never */
  cr_expect_not(plait_hier_wanted(PLAIT_HIER_OFF, 0, 1 << 20, 4 << 20, 2, 3.0, shm));
  /* on: whenever each local rank gets an element, whatever the gain */
  cr_expect(plait_hier_wanted(PLAIT_HIER_ON, 1 << 20, 2, 8, 2, 1.25, job));
  cr_expect_not(plait_hier_wanted(PLAIT_HIER_ON, 0, 1, 4, 2, 3.0, job));
  /* auto: from the threshold up (per response: its bytes after fusion),
   * where the layout gains 2x or more with the steps within the host on the
   * job's transport */
  cr_expect_not(plait_hier_wanted(PLAIT_HIER_AUTO, 1 << 20, 262143, (1 << 20) - 4, 2, 3.0, job));
  cr_expect(plait_hier_wanted(PLAIT_HIER_AUTO, 1 << 20, 262144, 1 << 20, 2, 3.0, job));
  cr_expect_not(plait_hier_wanted(PLAIT_HIER_AUTO, 1 << 20, 262144, 1 << 20, 2, 1.5, job));
  cr_expect_not(plait_hier_wanted(PLAIT_HIER_AUTO, 0, 100, 400, 1, 3.0, job)); /* one per host */
}

/* With the steps within the host on shared memory auto runs it from a gain
 * of 1.5 (2 hosts x 2 ranks placed by block), still not at 1.25 (3 x 2 by
 * block), and still per response: below the threshold flat. */
Test(hier_plan, auto_with_the_local_steps_on_shared_memory) {
  const double job = plait_hier_auto_min_gain(0), shm = plait_hier_auto_min_gain(1);
  cr_expect_float_eq(job, 2.0, 1e-12);
  cr_expect_float_eq(shm, 1.5, 1e-12);
  cr_expect(plait_hier_wanted(PLAIT_HIER_AUTO, 1 << 20, 262144, 1 << 20, 2, 1.5, shm));
  cr_expect(plait_hier_wanted(PLAIT_HIER_AUTO, 1 << 20, 16777216, 64 << 20, 2, 1.5, shm));
  cr_expect_not(plait_hier_wanted(PLAIT_HIER_AUTO, 1 << 20, 262143, (1 << 20) - 4, 2, 1.5, shm));
  cr_expect_not(plait_hier_wanted(PLAIT_HIER_AUTO, 1 << 20, 16777216, 64 << 20, 2, 1.25, shm));
  cr_expect(plait_hier_wanted(PLAIT_HIER_AUTO, 1 << 20, 262144, 1 << 20, 2, 3.0, shm));
}

Test(hier_plan, gain_over_the_flat_ring_by_placement) {
  int of[6], idx[6], nh, per;
  char why[160];
  const char *block[] = {"a", "a", "b", "b"}, *cyclic[] = {"a", "b", "a", "b"};
  const char *block3[] = {"a", "a", "b", "b", "c", "c"};
  cr_assert(layout(block, 4, of, idx, &nh, &per, why));
  cr_expect_float_eq(plait_hier_flat_gain(of, 4, nh), 1.5, 1e-9);
  cr_assert(layout(cyclic, 4, of, idx, &nh, &per, why));
  cr_expect_float_eq(plait_hier_flat_gain(of, 4, nh), 3.0, 1e-9);
  cr_assert(layout(block3, 6, of, idx, &nh, &per, why));
  cr_expect_float_eq(plait_hier_flat_gain(of, 6, nh), 1.25, 1e-9);
}

Test(hier_plan, shards_cover_the_message_once) {
  size_t counts[4], offs[5];
  plait_hier_shards(10, 4, counts, offs);
  size_t want_c[] = {3, 3, 2, 2}, want_o[] = {0, 3, 6, 8, 10};
  cr_expect_arr_eq(counts, want_c, sizeof counts);
  cr_expect_arr_eq(offs, want_o, sizeof offs);
  plait_hier_shards(8, 4, counts, offs);
  for (int i = 0; i < 4; i++) cr_expect_eq(counts[i], 2);
  cr_expect_eq(offs[4], 8);
}

Test(hier_plan, mode_values) {
  plait_hier_mode_t m;
  const char *on[] = {"on", "1", "TRUE", "yes"}, *off[] = {"off", "0", "false", "No"};
  for (int i = 0; i < 4; i++) {
    cr_expect_eq(plait_hier_parse_mode("PLAIT_HIERARCHICAL_ALLREDUCE", on[i], &m), PLAIT_SUCCESS);
    cr_expect_eq(m, PLAIT_HIER_ON, "%s", on[i]);
    cr_expect_eq(plait_hier_parse_mode("PLAIT_HIERARCHICAL_ALLREDUCE", off[i], &m), PLAIT_SUCCESS);
    cr_expect_eq(m, PLAIT_HIER_OFF, "%s", off[i]);
  }
  cr_expect_eq(plait_hier_parse_mode("PLAIT_HIERARCHICAL_ALLREDUCE", "auto", &m), PLAIT_SUCCESS);
  cr_expect_eq(m, PLAIT_HIER_AUTO);
  cr_expect_eq(plait_hier_parse_mode("PLAIT_HIERARCHICAL_ALLREDUCE", "sometimes", &m),
               PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "PLAIT_HIERARCHICAL_ALLREDUCE='sometimes' is not valid: "
                                       "expected auto, on or off"), "%s", plait_last_error());
  cr_expect_eq(plait_hier_parse_mode("PLAIT_HIERARCHICAL_ALLGATHER", "x", &m), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "PLAIT_HIERARCHICAL_ALLGATHER='x' is not valid"), "%s",
            plait_last_error());
}
