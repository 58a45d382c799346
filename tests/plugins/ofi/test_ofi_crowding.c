/*
 * How long the ofi progress loop yields before sleeping, from how crowded
 * the host is (plugins/ofi/engine/crowding.c, built from its source): "auto"
 * yields 2 ms where the host's ranks fit the CPUs this rank may use and
 * 300 us where they outnumber them; an explicit PLAIT_OFI_YIELD_US always
 * wins; a bad value names the variable.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <string.h>

#include "engine/crowding.h"

static double window(const char *value, int local_ranks, int cpus) {
  double y = -1;
  char err[256] = "";
  cr_assert_eq(ofi_yield_window(value, local_ranks, cpus, &y, err, sizeof err), PLAIT_SUCCESS,
               "%s", err);
  return y;
}

Test(ofi_crowding, crowded_when_ranks_outnumber_cpus) {
  cr_expect(!ofi_crowded(2, 2));
  cr_expect(!ofi_crowded(1, 2));
  cr_expect(ofi_crowded(3, 2));
  cr_expect(ofi_crowded(2, 1));
  cr_expect(ofi_crowded(2, 0)); /* no CPU count: taken as one */
}

Test(ofi_crowding, auto_yields_only_where_ranks_fit) {
  cr_expect_eq(window(NULL, 2, 2), OFI_YIELD_FIT_S);
  cr_expect_eq(window("auto", 2, 16), OFI_YIELD_FIT_S);
  cr_expect_eq(window(NULL, 3, 2), OFI_YIELD_CROWDED_S);
  cr_expect_eq(window("auto", 64, 16), OFI_YIELD_CROWDED_S);
  cr_expect_lt(OFI_YIELD_CROWDED_S, OFI_YIELD_FIT_S);
}

Test(ofi_crowding, explicit_value_wins) {
  cr_expect_eq(window("2000", 3, 2), 0.002);
  cr_expect_eq(window("0", 2, 2), 0.0);
  cr_expect_eq(window("1000000", 1, 1), 1.0);
}

Test(ofi_crowding, bad_value_named) {
  static const char *bad[] = {"", "-1", "1000001", "2ms", "yes", "1.5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    double y = 7;
    char err[256] = "";
    cr_expect_eq(ofi_yield_window(bad[i], 2, 2, &y, err, sizeof err), PLAIT_ERR_CONFIG, "%s",
                 bad[i]);
    cr_expect(strstr(err, "PLAIT_OFI_YIELD_US='") && strstr(err, bad[i]), "%s", err);
    cr_expect_eq(y, 7, "left alone on error");
  }
}

Test(ofi_crowding, cpus_are_this_process_affinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
  cr_expect_eq(ofi_cpus(), CPU_COUNT(&set));
  cr_expect_geq(ofi_cpus(), 1);
}
