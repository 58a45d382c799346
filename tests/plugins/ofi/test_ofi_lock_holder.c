/*
 * A rank killed while it holds a lock in libfabric's shared memory (issue 16,
 * defect 4). libfabric's shm provider guards each rank's region with a spin
 * lock that the other ranks take too; a rank killed holding one left a
 * survivor spinning inside fi_cq_read() for ever (seen as a survivor silent
 * past 30 s with PLAIT_TIMEOUT_S=5 in 2 of 72 loaded runs of
 * failures/kill9_rank1_during_a_collective over shm).
 *
 * Random kills hit that window rarely; this test hits it every time: the
 * executable exports its own pthread_spin_lock (linked with ENABLE_EXPORTS),
 * which libfabric calls, and the victim kills itself right after taking its
 * n-th lock inside a 16 MiB allreduce. Every survivor must fail with
 * PLAIT_ERR_PEER_LOST naming the victim within LIMIT_S (the plugin's
 * watchdog gets it out: plugins/ofi/robustness/rescue.h). Skipped, with the reason,
 * where the ofi plugin or its shm provider cannot start.
 *
 * A rank stopped (SIGSTOP) holding such a lock for 2 s, well under
 * PLAIT_TIMEOUT_S, and then continued (issue 38, defect 5) is no loss: the
 * survivors spin meanwhile, and must wait for it instead of abandoning the
 * endpoint (the watchdog rescued them after 0.5 s of spinning, failing the
 * job with "stuck inside libfabric"); every allreduce after it is right.
 * One that is never continued is named lost within PLAIT_TIMEOUT_S + 5 s.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "failure_helpers.h"

TestSuite(ofi_lock_holder, .init = clean_plait_env);

#define ELEMS (4 * 1024 * 1024)
#define LIMIT_S 30 /* no hang; the watchdog needs 0.5 s of CPU, slow under heavy load */

static volatile int die_after = -1; /* locks still to take before dying; -1: never */
static volatile int stop_after = -1; /* locks still to take before stopping; -1: never */
static atomic_int *stopped_flag;    /* set before the victim stops itself */

int pthread_spin_lock(pthread_spinlock_t *lock) {
  static int (*real)(pthread_spinlock_t *);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_spin_lock");
  int rc = real(lock);
  if (die_after >= 0 && die_after-- == 0) raise(SIGKILL); /* holding it */
  if (stop_after >= 0 && stop_after-- == 0) { /* holding it, until the continuer comes */
    atomic_store(stopped_flag, 1);
    raise(SIGSTOP);
  }
  return rc;
}

typedef struct {
  int locks;
  shared_t *sh;
  int for_good; /* stopped holding the lock and never continued */
} holder_t;

#define STOP_T_S 5 /* PLAIT_TIMEOUT_S when the victim stays stopped */

/* 1 when plait_init's rc says the ofi transport with shm cannot start here
 * (the reason printed, flag[0] set: the test is skipped). */
static int cannot_start(int rank, holder_t *h, plait_result_t rc) {
  if (rc != PLAIT_ERR_UNSUPPORTED && rc != PLAIT_ERR_PLUGIN) return 0;
  plait_test_say(rank, "SKIP: the ofi transport with FI_PROVIDER=shm cannot start here: %s",
                 plait_last_error());
  atomic_store(&h->sh->flag[0], 1);
  return 1;
}

static int run(int rank, int n, void *arg) {
  holder_t *h = arg;
  float *x = calloc(ELEMS, sizeof *x);
  if (!x) FAIL("out of memory");
  plait_result_t rc = plait_init();
  if (cannot_start(rank, h, rc)) return 0;
  EXPECT_OK(rc);
  for (int i = 0; i < 2; i++) EXPECT_OK(allreduce_wait("grad", x, ELEMS, 60));
  if (rank == 1) {
    plait_handle_t *hd = NULL;
    die_after = h->locks;
    EXPECT_OK(allreduce("grad", x, ELEMS, PLAIT_OP_SUM, NULL, &hd));
    sleep(LIMIT_S + 30);
    return 1;
  }
  double t0 = now();
  rc = PLAIT_SUCCESS;
  for (int i = 0; i < 100 && rc == PLAIT_SUCCESS; i++) rc = allreduce_wait("grad", x, ELEMS, 120);
  plait_test_say(rank, "failed after %.2f s: %s: \"%s\"", now() - t0, plait_result_name(rc),
                 plait_last_error());
  EXPECT_ERR(rc, PLAIT_ERR_PEER_LOST, "rank 1");
  if (now() - t0 > LIMIT_S) FAIL("took %.1f s (limit %d s)", now() - t0, LIMIT_S);
  if (atomic_fetch_add(&h->sh->count, 1) + 1 == n - 1) { /* the victim may still be dying */
  }
  plait_shutdown();
  free(x);
  return 0;
}

static void killed_holding_lock(int locks) {
  const char *env[] = {"PLAIT_TRANSPORT=ofi", "FI_PROVIDER=shm", "PLAIT_TIMEOUT_S=5", NULL};
  holder_t h = {locks, shared_new(), 0};
  plait_test_job_t job = {.nranks = 3, .timeout_s = LIMIT_S + 20, .env = env};
  plait_test_run_ranks(&job, run, &h);
  if (atomic_load(&h.sh->flag[0])) {
    munmap(h.sh, sizeof *h.sh);
    cr_skip("the ofi transport with FI_PROVIDER=shm cannot start here (printed above)");
  }
  for (int r = 0; r < 3; r++)
    if (r != 1)
      cr_expect_eq(job.exit_code[r], 0, "rank %d (victim killed after its lock #%d)", r, locks);
  munmap(h.sh, sizeof *h.sh);
}

Test(ofi_lock_holder, killed_after_its_5th_lock, .timeout = 120) { killed_holding_lock(5); }
Test(ofi_lock_holder, killed_after_its_10th_lock, .timeout = 120) { killed_holding_lock(10); }
Test(ofi_lock_holder, killed_after_its_20th_lock, .timeout = 120) { killed_holding_lock(20); }

#define PAUSE_S 2.0
#define AFTER 20 /* allreduces after the pause, each checked */

static int paused_run(int rank, int n, void *arg) {
  holder_t *h = arg;
  float *x = malloc(ELEMS * sizeof *x);
  if (!x) FAIL("out of memory");
  plait_result_t rc = plait_init();
  if (cannot_start(rank, h, rc)) return 0;
  EXPECT_OK(rc);
  for (int i = 0; i < 2 + AFTER; i++) {
    if (i == 2 && rank == 1) {
      atomic_store(&h->sh->flag[2], (int)getpid());
      stopped_flag = &h->sh->flag[1];
      stop_after = h->locks;
    }
    for (size_t k = 0; k < ELEMS; k++) x[k] = (float)((rank + 1) * (i + 1) + (int)(k % 5));
    double t0 = now();
    rc = allreduce_wait("grad", x, ELEMS, 120);
    if (h->for_good && i == 2) { /* rank 1 is named, within T + margin */
      double took = now() - t0;
      plait_test_say(rank, "failed after %.2f s: %s", took, plait_last_error());
      EXPECT_ERR(rc, PLAIT_ERR_PEER_LOST, "rank 1");
      if (took > STOP_T_S + 5) FAIL("took %.1f s (PLAIT_TIMEOUT_S=%d + 5 s)", took, STOP_T_S);
      atomic_fetch_add(&h->sh->count, 1);
      plait_shutdown();
      free(x);
      return 0;
    }
    if (rc != PLAIT_SUCCESS)
      FAIL("allreduce %d failed after %.2f s (rank 1 stopped %s): %s: %s", i, now() - t0,
           atomic_load(&h->sh->flag[1]) ? "meanwhile" : "not yet", plait_result_name(rc),
           plait_last_error());
    if (i == 2) plait_test_say(rank, "the allreduce rank 1 stopped in took %.2f s", now() - t0);
    for (size_t k = 0; k < ELEMS; k += 997) {
      float want = (float)(n * (n + 1) / 2 * (i + 1) + n * (int)(k % 5));
      if (x[k] != want) FAIL("allreduce %d: element %zu is %g, expected %g", i, k, x[k], want);
    }
  }
  if (rank == 1 && !atomic_load(&h->sh->flag[1])) FAIL("rank 1 never took lock #%d", h->locks);
  EXPECT_OK(plait_shutdown());
  free(x);
  return 0;
}

/* The continuer: once the victim stopped itself, SIGCONT PAUSE_S later; for
 * good: SIGKILL once both survivors are done. */
static void continuer(shared_t *sh, int for_good) {
  double end = now() + LIMIT_S + 60;
  while (!atomic_load(&sh->flag[1]) && now() < end) usleep(2000);
  if (!atomic_load(&sh->flag[1])) _exit(1);
  if (for_good)
    while (atomic_load(&sh->count) < 2 && now() < end) usleep(10000);
  else
    usleep((useconds_t)(PAUSE_S * 1e6));
  kill((pid_t)atomic_load(&sh->flag[2]), for_good ? SIGKILL : SIGCONT);
  _exit(0);
}

static void stopped_holding_lock(int locks, int for_good) {
  const char *env[] = {"PLAIT_TRANSPORT=ofi", "FI_PROVIDER=shm",
                       for_good ? "PLAIT_TIMEOUT_S=5" : "PLAIT_TIMEOUT_S=15", NULL};
  holder_t h = {locks, shared_new(), for_good};
  pid_t cont = fork();
  cr_assert(cont >= 0, "fork");
  if (cont == 0) continuer(h.sh, for_good);
  plait_test_job_t job = {.nranks = 3, .timeout_s = LIMIT_S + 60, .env = env};
  int rc = plait_test_run_ranks(&job, paused_run, &h);
  kill(cont, SIGKILL);
  waitpid(cont, NULL, 0);
  int skipped = atomic_load(&h.sh->flag[0]), stopped = atomic_load(&h.sh->flag[1]);
  munmap(h.sh, sizeof *h.sh);
  if (skipped) cr_skip("the ofi transport with FI_PROVIDER=shm cannot start here (printed above)");
  cr_assert(stopped, "rank 1 was never stopped holding its lock #%d", locks);
  if (for_good)
    for (int r = 0; r < 3; r += 2)
      cr_expect_eq(job.exit_code[r], 0, "rank %d (victim stopped for good after its lock #%d)", r,
                   locks);
  else
    cr_assert_eq(rc, 0, "a rank failed after rank 1 was stopped holding its lock #%d for %.0f s "
                 "(see above)", locks, PAUSE_S);
}

Test(ofi_lock_holder, stopped_2s_after_its_10th_lock_then_continued, .timeout = 180) {
  stopped_holding_lock(10, 0); /* failed before: both survivors rescued after 0.5 s */
}
Test(ofi_lock_holder, stopped_2s_after_its_20th_lock_then_continued, .timeout = 180) {
  stopped_holding_lock(20, 0);
}
/* stopped for good: the survivors stop waiting for the lock at the timeout */
Test(ofi_lock_holder, stopped_for_good_after_its_10th_lock_is_named, .timeout = 180) {
  stopped_holding_lock(10, 1);
}
