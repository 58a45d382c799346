/*
 * A hostile neighbour during job start (issue 16, defect 1): an intruder
 * process (tests/harness/intruder.c) connects to every listening TCP socket
 * the ranks open, the moment it appears, and keeps the connection open idle
 * or sends random bytes on it. Every trial must still start, run correct
 * allreduces and shut down cleanly: a stray connection must neither break nor
 * join a job. Each suite runs TRIALS jobs of 3 ranks and prints how many
 * listeners the intruder reached (a run where it reached none proves nothing
 * and fails).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>

#include "failure_helpers.h"
#include "intruder.h"

TestSuite(intrusion, .init = clean_plait_env);

#define TRIALS 6
#define ELEMS 70000 /* more than one gloo segment per rank */

static int start_and_reduce(int rank, int n, void *arg) {
  shared_t *sh = arg;
  atomic_store(&sh->pid[rank], (int)getpid());
  usleep(20000); /* the intruder is watching before the first listener opens */
  float *x = calloc(ELEMS, sizeof *x);
  if (!x) FAIL("out of memory");
  EXPECT_OK(plait_init());
  for (int it = 0; it < 3; it++) {
    for (int i = 0; i < ELEMS; i++) x[i] = (float)(rank + i % 7);
    EXPECT_OK(allreduce_wait("grad", x, ELEMS, 20));
    for (int i = 0; i < ELEMS; i++)
      if (x[i] != (float)(n * (n - 1) / 2 + n * (i % 7)))
        FAIL("iteration %d: element %d is %g", it, i, (double)x[i]);
  }
  EXPECT_OK(plait_shutdown());
  free(x);
  return 0;
}

static void trials(int junk) {
  const char *env[] = {"PLAIT_TIMEOUT_S=5", "PLAIT_START_TIMEOUT_S=15", NULL};
  int broken = 0, reached = 0;
  for (int t = 0; t < TRIALS; t++) {
    shared_t *sh = shared_new();
    pid_t intruder = plait_test_intruder_start(sh->pid, 3, junk);
    cr_assert_gt(intruder, 0, "cannot start the intruder");
    plait_test_job_t job = {.nranks = 3, .timeout_s = 40, .env = env};
    int rc = plait_test_run_ranks(&job, start_and_reduce, sh);
    int hits = plait_test_intruder_stop(intruder);
    cr_expect_geq(hits, 0, "the intruder did not stop cleanly");
    reached += hits > 0 ? hits : 0;
    if (rc) {
      broken++;
      fprintf(stderr, "[intrusion] trial %d broken (intruder reached %d listeners)\n", t, hits);
    }
    munmap(sh, sizeof *sh);
  }
  fprintf(stderr, "[intrusion] %s intruder: %d of %d starts broken, %d listeners reached\n",
          junk ? "junk-sending" : "idle", broken, TRIALS, reached);
  cr_expect_eq(broken, 0, "%d of %d job starts broken by a stray connection", broken, TRIALS);
  cr_expect_gt(reached, 0, "the intruder never reached a listener: the test proves nothing");
}

Test(intrusion, idle_connections_to_every_listener, .timeout = 300) { trials(0); }
Test(intrusion, junk_sent_to_every_listener, .timeout = 300) { trials(1); }
