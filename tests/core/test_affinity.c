/*
 * util/affinity: PLAIT_THREAD_AFFINITY (Horovod's HOROVOD_THREAD_AFFINITY).
 * Each local rank takes the id at its index; blanks around ids are allowed,
 * ids past the local size ignored; an entry that is not an id, a list too
 * short for the local size, and a CPU the process may not run on are
 * refused with an error naming the variable, the value and what is wrong.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <string.h>

#include "util/affinity.h"
#include "util/error.h"

static cpu_set_t cpus(int lo, int hi) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int c = lo; c <= hi; c++) CPU_SET(c, &s);
  return s;
}

static int pick(const char *list, int local_rank, int local_size) {
  cpu_set_t s = cpus(0, 63);
  int cpu = -2;
  plait_result_t rc = plait_affinity_cpu(list, local_rank, local_size, &s, &cpu);
  cr_assert_eq(rc, PLAIT_SUCCESS, "'%s' rank %d of %d: %s", list, local_rank, local_size,
               plait_last_error());
  return cpu;
}

static void refused(const char *list, int local_rank, int local_size, const cpu_set_t *allowed,
                    const char *why) {
  int cpu = -2;
  plait_result_t rc = plait_affinity_cpu(list, local_rank, local_size, allowed, &cpu);
  cr_assert_eq(rc, PLAIT_ERR_CONFIG, "'%s' was taken (cpu %d)", list, cpu);
  cr_assert_eq(cpu, -1);
  const char *msg = plait_last_error();
  cr_assert(strstr(msg, "PLAIT_THREAD_AFFINITY='"), "%s", msg);
  cr_assert(strstr(msg, list), "%s", msg);
  cr_assert(strstr(msg, why), "'%s' wanted in: %s", why, msg);
}

Test(affinity, each_local_rank_takes_its_own_id) {
  cr_assert_eq(pick("3,5,7", 0, 3), 3);
  cr_assert_eq(pick("3,5,7", 1, 3), 5);
  cr_assert_eq(pick("3,5,7", 2, 3), 7);
  cr_assert_eq(pick("12", 0, 1), 12);
}

Test(affinity, unset_or_blank_is_not_pinned) {
  cr_assert_eq(pick(NULL, 0, 2), -1);
  cr_assert_eq(pick("", 1, 2), -1);
  cr_assert_eq(pick("  ", 1, 2), -1);
}

Test(affinity, blanks_around_ids_and_extra_ids_are_taken) {
  cr_assert_eq(pick(" 1, 33", 1, 2), 33); /* as Horovod's docs write it */
  cr_assert_eq(pick("4 ,8 ", 0, 2), 4);
  cr_assert_eq(pick("2,4,6,8", 1, 2), 4);
}

Test(affinity, entries_that_are_not_ids_are_refused) {
  cpu_set_t s = cpus(0, 63);
  refused("0,x", 0, 2, &s, "'x' is not a CPU id");
  refused("0,-1", 0, 2, &s, "'-1' is not a CPU id");
  refused("1x,2", 1, 2, &s, "'1x' is not a CPU id");
  refused("0,,1", 0, 3, &s, "'' is not a CPU id");
  refused("0,1,", 0, 2, &s, "'' is not a CPU id");
  refused("0 1", 0, 1, &s, "'0 1' is not a CPU id");
  refused("0,99999999999999999999", 0, 2, &s, "is not a CPU id");
}

Test(affinity, fewer_ids_than_local_ranks_are_refused) {
  cpu_set_t s = cpus(0, 63);
  refused("0", 0, 2, &s, "1 CPU id for 2 ranks on this host");
  refused("0,1", 1, 3, &s, "2 CPU ids for 3 ranks on this host");
}

Test(affinity, a_cpu_the_process_may_not_use_is_refused_naming_the_allowed_ones) {
  cpu_set_t s = cpus(0, 1);
  CPU_SET(4, &s);
  CPU_SET(5, &s);
  CPU_SET(6, &s);
  refused("0,2", 1, 2, &s, "CPU 2 (local rank 1's) is not one this process may run on "
                          "(allowed: 0-1,4-6)");
  refused("0,5000", 1, 2, NULL, "CPU 5000 (local rank 1's)");
  int cpu = -2;
  cr_assert_eq(plait_affinity_cpu("0,5", 1, 2, &s, &cpu), PLAIT_SUCCESS);
  cr_assert_eq(cpu, 5);
}

Test(affinity, an_unknown_local_rank_is_refused) {
  cpu_set_t s = cpus(0, 63);
  refused("0,1", -1, -1, &s, "the local rank is not known");
}
