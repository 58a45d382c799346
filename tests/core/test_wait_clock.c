/*
 * plait_wait's timeout does not follow the wall clock: it is measured on
 * CLOCK_MONOTONIC, so setting the system time forward or back neither
 * stretches nor cuts it.
 *
 * Nobody may set this machine's clock in a test, so this binary interposes
 * clock_gettime: while `shifted` is set, CLOCK_REALTIME reads one day ahead
 * of the kernel's. A plait_wait that computed its deadline from
 * CLOCK_REALTIME (and waited on a CLOCK_REALTIME condition variable, whose
 * deadline the kernel reads unshifted) would then wait a day: the job's
 * timeout fails the test. On CLOCK_MONOTONIC it returns PLAIT_ERR_TIMEOUT
 * after its 0.3 s. No duration is asserted.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "plait/plait.h"
#include "ranks.h"

static atomic_int shifted;

/* Interposes libc's: the core (linked statically) calls this one. */
int clock_gettime(clockid_t id, struct timespec *ts) {
  int rc = (int)syscall(SYS_clock_gettime, id, ts);
  if (rc == 0 && id == CLOCK_REALTIME && atomic_load(&shifted)) ts->tv_sec += 86400;
  return rc;
}

TestSuite(wait_clock, .init = plait_test_clear_env);

/* Shared by the two ranks: rank 0 has finished its timed-out wait. */
typedef struct {
  atomic_int waited;
} shared_t;

static int rank_fn(int rank, int nranks, void *arg) {
  (void)nranks;
  shared_t *sh = arg;
  if (plait_init() != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s", plait_last_error());
    return 1;
  }
  float x[4] = {1, 2, 3, 4};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32);
  plait_handle_t *h = NULL;
  int fails = 0;
  if (rank == 0) {
    if (plait_allreduce_async("late", &t, &t, PLAIT_OP_SUM, NULL, &h) != PLAIT_SUCCESS) {
      plait_test_say(rank, "allreduce: %s", plait_last_error());
      return 1;
    }
    /* rank 1 has not submitted "late": the wait must time out */
    atomic_store(&shifted, 1);
    plait_result_t rc = plait_wait(h, 0.3);
    atomic_store(&shifted, 0);
    if (rc != PLAIT_ERR_TIMEOUT) {
      plait_test_say(rank, "plait_wait(0.3 s) with the wall clock a day ahead gave %s: %s",
                     plait_result_name(rc), plait_last_error());
      fails++;
    }
    atomic_store(&sh->waited, 1);
  } else {
    /* submit only once rank 0's wait is over (bounded: the job times out) */
    while (!atomic_load(&sh->waited)) usleep(1000);
    if (plait_allreduce_async("late", &t, &t, PLAIT_OP_SUM, NULL, &h) != PLAIT_SUCCESS) {
      plait_test_say(rank, "allreduce: %s", plait_last_error());
      return 1;
    }
  }
  if (plait_wait(h, 60) != PLAIT_SUCCESS) {
    plait_test_say(rank, "wait: %s", plait_last_error());
    fails++;
  }
  plait_release(h);
  if (x[3] != 8) {
    plait_test_say(rank, "sum %g, expected 8", x[3]);
    fails++;
  }
  if (plait_shutdown() != PLAIT_SUCCESS) fails++;
  return fails != 0;
}

Test(wait_clock, timeout_ignores_the_wall_clock, .timeout = 120) {
  shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(sh != MAP_FAILED);
  atomic_init(&sh->waited, 0);
  plait_test_job_t job = {.nranks = 2, .timeout_s = 90};
  cr_expect_eq(plait_test_run_ranks(&job, rank_fn, sh), 0,
               "a rank failed (a wall-clock deadline would keep rank 0 waiting a day)");
  munmap(sh, sizeof *sh);
}
