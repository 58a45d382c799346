/*
 * A long PLAIT_CYCLE_TIME_MS (the longest a burst of cached allreduces is
 * held for its companions) never holds plait_shutdown: the coordinator's wait
 * (a poll on its wake-up descriptor and control sockets) ends at shutdown
 * whatever the setting. Before, the setting was capped at 10 s to keep
 * shutdown bounded: a minute's hold was refused at init.
 *
 * Each rank runs a burst of 4 allreduces twice (so the burst is known to
 * every rank's response cache), then submits only 2 of the 4 (on every
 * rank, or on rank 1 only): they wait for companions that never come (held
 * by the announcing rank or by rank 0, up to the minute). Then every rank
 * shuts down; shutdown must return within a few seconds (the bound is
 * generous for a loaded machine, far below the hold), and what was held ends
 * (run as coordination ends where every rank submitted it, else failed with
 * PLAIT_ERR_SHUTDOWN).
 */
#include <criterion/criterion.h>

#include <stdatomic.h>
#include <sys/mman.h>

#include "ops_util.h"

#define BURST 4
#define SHUTDOWN_BOUND_S 8.0 /* a loaded 2-core machine; the hold is 60 s */

static int run_burst(int rank, int nranks, int how_many, plait_handle_t **h, float *x) {
  for (int i = 0; i < how_many; i++) {
    char name[32];
    snprintf(name, sizeof name, "held/%d", i);
    x[i] = (float)(rank + 1);
    plait_tensor_t t;
    OK(plait_tensor_1d(&t, &x[i], 1, PLAIT_FLOAT32));
    OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[i]));
  }
  (void)nranks;
  return 0;
}

typedef struct {
  int how;          /* 0: every rank leaves a partial burst held; 1: only rank 1 */
  atomic_int *seen; /* shared: rank 1 looked at its held operations */
} job_t;

static int held_then_shutdown(int rank, int nranks, void *arg) {
  const job_t *job = arg;
  int how = job->how;
  plait_result_t rc = plait_init();
  if (rc) FAILF("plait_init: %s", plait_last_error());
  float x[BURST];
  plait_handle_t *h[BURST] = {0};
  float want = (float)(nranks * (nranks + 1) / 2);
  for (int step = 0; step < 2; step++) { /* the burst, whole, twice: cached */
    if (run_burst(rank, nranks, BURST, h, x)) return 1;
    for (int i = 0; i < BURST; i++) {
      OK(plait_wait(h[i], 60));
      CHECK(x[i] == want, "step %d: held/%d is %g, expected %g", step, i, x[i], want);
      plait_release(h[i]);
      h[i] = NULL;
    }
  }
  int partial = how == 0 || rank == 1 ? 2 : 0;
  if (run_burst(rank, nranks, partial, h, x)) return 1;
  ops_sleep(0.5);
  int held = 0;
  for (int i = 0; i < partial; i++) { /* held: its companions are expected */
    int done = 1;
    OK(plait_poll(h[i], &done));
    held += !done;
    if (done && how == 1)
      FAILF("rank 1's held/%d completed without ranks 0 and 2: %s: %s", i,
            plait_result_name(plait_wait(h[i], 0)), plait_last_error());
  }
  if (rank == 1) atomic_store(job->seen, 1);
  for (double end = ops_now() + 30; how == 1 && !atomic_load(job->seen) && ops_now() < end;)
    ops_sleep(0.05); /* the others shut down after rank 1 looked */
  double t0 = ops_now();
  rc = plait_shutdown();
  double took = ops_now() - t0;
  if (rc) FAILF("plait_shutdown: %s: %s", plait_result_name(rc), plait_last_error());
  CHECK(took < SHUTDOWN_BOUND_S, "plait_shutdown took %.1f s with PLAIT_CYCLE_TIME_MS=60000",
        took);
  for (int i = 0; i < partial; i++) {
    /* every rank submitted them (how 0): they may run as coordination ends;
     * only rank 1 did: they fail */
    rc = plait_wait(h[i], 5);
    CHECK(rc == PLAIT_ERR_SHUTDOWN || (how == 0 && rc == PLAIT_SUCCESS && x[i] == want),
          "held/%d ended with %s (value %g)", i, plait_result_name(rc), x[i]);
    plait_release(h[i]);
  }
  plait_test_say(rank, "shutdown took %.2f s", took);
  return 0;
}

static void run(int nranks, int how) {
  OPS_REQUIRE_GLOO();
  plait_test_clear_env();
  plait_test_set_plugin_path();
  const char *env[] = {"PLAIT_CYCLE_TIME_MS=60000", "PLAIT_TIMEOUT_S=20", NULL};
  plait_test_job_t job = {.nranks = nranks, .timeout_s = 100, .env = env};
  atomic_int *seen = mmap(NULL, sizeof *seen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
  cr_assert(seen != MAP_FAILED, "mmap");
  atomic_init(seen, 0);
  job_t arg = {how, seen};
  int rc = plait_test_run_ranks(&job, held_then_shutdown, &arg);
  munmap(seen, sizeof *seen);
  cr_assert_eq(rc, 0, "a rank failed (see above)");
}

Test(cycle_wait, a_minute_hold_everywhere_ends_at_shutdown_2ranks, .timeout = 120) { run(2, 0); }
Test(cycle_wait, a_minute_hold_everywhere_ends_at_shutdown_3ranks, .timeout = 120) { run(3, 0); }
Test(cycle_wait, a_minute_hold_on_rank1_ends_at_shutdown_3ranks, .timeout = 120) { run(3, 1); }
