/*
 * The gloo transport plugin, called directly: each test forks real ranks on
 * loopback, which plait_init() (PLAIT_TRANSPORT=gloo) and then call the
 * plugin's collectives through plait_core_transport(), checking exact
 * results. 2, 3 and 4 ranks; sizes 0, 1, odd and not divisible by the rank
 * count (1001, 4097), and 8 MiB for a subset; every dtype and op. The matrix
 * itself is tests/harness/transport_matrix.c, shared with the ofi plugin's
 * tests (test_ofi_collectives.c).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "api/core.h"
#include "transport_matrix.h"

static void run_job(int nranks, tm_body_fn body) {
  char reason[1024] = "";
  int rc = tm_run("gloo", nranks, body, NULL, reason, sizeof reason);
  if (rc == TM_SKIPPED) cr_skip_test("the gloo transport cannot start here: %s", reason);
  cr_assert_eq(rc, TM_PASSED, "a rank of %d failed (see its messages above)", nranks);
}

static void run_lost_rank(int nranks, tm_loss_t how) {
  plait_test_job_t job;
  char reason[1024] = "";
  if (tm_run_lost_rank("gloo", nranks, how, NULL, &job, reason, sizeof reason) == TM_SKIPPED)
    cr_skip_test("the gloo transport cannot start here: %s", reason);
  char why[256] = "";
  cr_expect_eq(tm_check_lost_rank(&job, nranks, how, why, sizeof why), 0, "%s", why);
}

#define PER_RANK_COUNT(name, body)                                \
  Test(gloo, name##_2ranks, .timeout = 60) { run_job(2, body); }  \
  Test(gloo, name##_3ranks, .timeout = 60) { run_job(3, body); }  \
  Test(gloo, name##_4ranks, .timeout = 60) { run_job(4, body); }

PER_RANK_COUNT(allreduce, tm_allreduce)
PER_RANK_COUNT(allgatherv, tm_allgatherv)
PER_RANK_COUNT(broadcast, tm_broadcast)
PER_RANK_COUNT(alltoallv, tm_alltoallv)
PER_RANK_COUNT(reducescatter, tm_reducescatter)
PER_RANK_COUNT(barrier, tm_barrier)
PER_RANK_COUNT(subsets, tm_subsets)

/* These tests call the plugin directly from the main thread: no coordinator. */
static void no_coordinator(void) { plait_core_test_without_coordinator(1); }
TestSuite(gloo, .init = no_coordinator);

/* A job of one rank: the plugin makes no device, every call is local. */
Test(gloo, everything_1rank, .timeout = 60) { run_job(1, tm_everything); }

Test(gloo, errors_and_memory_2ranks, .timeout = 60) { run_job(2, tm_errors); }
Test(gloo, errors_and_memory_3ranks, .timeout = 60) { run_job(3, tm_errors); }

Test(gloo, rank_killed_between_ops_2ranks, .timeout = 60) {
  run_lost_rank(2, TM_KILLED_BETWEEN_OPS);
}
Test(gloo, rank_killed_mid_allreduce_3ranks, .timeout = 60) {
  run_lost_rank(3, TM_KILLED_MID_ALLREDUCE);
}
Test(gloo, rank_hung_3ranks, .timeout = 60) { run_lost_rank(3, TM_HUNG); }
