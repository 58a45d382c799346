/*
 * Can the ofi transport start here, with the FI_PROVIDER of the environment?
 * A job of two ranks (the harness's, so PLAIT_TEST_TRANSPORT applies) runs
 * plait_init. Exit 0: it started. Exit 77 (ctest's skip code for the ofi
 * re-runs, tests/harness/ofi_rerun.sh): every rank's plugin said that no libfabric
 * provider offers what it needs; the reason is printed. Exit 1: anything
 * else, which is a failure, not a reason to skip.
 */
#include <stdio.h>
#include <string.h>

#include "plait/plait.h"
#include "ranks.h"

static int probe(int rank, int n, void *arg) {
  (void)n, (void)arg;
  plait_result_t rc = plait_init();
  if (rc == PLAIT_ERR_UNSUPPORTED && strstr(plait_last_error(), "no libfabric provider")) {
    printf("ofi_probe: rank %d: %s\n", rank, plait_last_error());
    return 77;
  }
  if (rc != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
    return 1;
  }
  return plait_shutdown() == PLAIT_SUCCESS ? 0 : 1;
}

int main(void) {
  const char *env[] = {"PLAIT_TRANSPORT=ofi", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 60, .env = env};
  plait_test_run_ranks(&job, probe, NULL);
  int skipped = 0, ok = 0;
  for (int r = 0; r < job.nranks; r++) {
    skipped += job.exit_code[r] == 77;
    ok += job.exit_code[r] == 0;
  }
  if (ok == job.nranks) return 0;
  if (skipped == job.nranks) return 77;
  fprintf(stderr, "ofi_probe: the ofi transport failed to start for another reason\n");
  return 1;
}
