/*
 * Blame under SIGSTOP (issue 16, defect 6): one of 3 ranks is stopped while
 * the others are inside a 16 MiB allreduce with it. Every survivor must fail
 * with PLAIT_ERR_PEER_LOST within PLAIT_TIMEOUT_S + MARGIN_S of the stop,
 * naming the stopped rank as lost and no other rank. Each victim (rank 0
 * included) is tried TRIALS times; every survivor prints how long it took and
 * what it said. The transport is the default (Gloo) unless PLAIT_TEST_TRANSPORT
 * says otherwise.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>

#include "failure_helpers.h"

TestSuite(blame, .init = clean_plait_env);

#define TIMEOUT_S 2
/* docs/design.md, "What plait promises under faults and attack": the blame
 * round (2 x the heartbeat period + 1 s = 2 s) and 3 s for a loaded machine. */
#define MARGIN_S 5
#define TRIALS 3
#define ELEMS (4 * 1024 * 1024)

typedef struct {
  shared_t *sh;
  int victim;
  _Atomic double stopped_at;
} blame_t;

/* 1 when msg names `victim` as the lost rank and no other rank as lost. */
static int blames_only(const char *msg, int victim, int n) {
  char want[48];
  snprintf(want, sizeof want, "rank %d was lost", victim);
  if (!strstr(msg, want) || strstr(msg, " were lost")) return 0;
  for (int r = 0; r < n; r++) {
    char other[48];
    snprintf(other, sizeof other, "rank %d was lost", r);
    if (r != victim && strstr(msg, other)) return 0;
  }
  return 1;
}

static int stop_one(int rank, int n, void *arg) {
  blame_t *b = arg;
  atomic_store(&b->sh->pid[rank], (int)getpid());
  float *x = calloc(ELEMS, sizeof *x);
  if (!x) FAIL("out of memory");
  EXPECT_OK(plait_init());
  for (int i = 0; i < 2; i++) EXPECT_OK(allreduce_wait("grad", x, ELEMS, 30));
  if (rank == b->victim) {
    plait_handle_t *h = NULL;
    EXPECT_OK(allreduce("grad", x, ELEMS, PLAIT_OP_SUM, NULL, &h));
    usleep(3000); /* negotiated, the collective under way */
    atomic_store(&b->stopped_at, now());
    raise(SIGSTOP);
    return 1; /* killed by the last survivor */
  }
  plait_result_t rc = PLAIT_SUCCESS;
  for (int i = 0; i < 100 && rc == PLAIT_SUCCESS; i++) rc = allreduce_wait("grad", x, ELEMS, 60);
  double took = now() - atomic_load(&b->stopped_at);
  const char *msg = plait_last_error();
  plait_test_say(rank, "victim %d: failed %.2f s after the stop: %s: \"%s\"", b->victim, took,
                 plait_result_name(rc), msg);
  int bad = 0;
  if (rc != PLAIT_ERR_PEER_LOST) bad = 1, plait_test_say(rank, "expected PLAIT_ERR_PEER_LOST");
  if (!blames_only(msg, b->victim, n))
    bad = 1, plait_test_say(rank, "does not name rank %d alone as lost", b->victim);
  if (took > TIMEOUT_S + MARGIN_S)
    bad = 1, plait_test_say(rank, "took %.2f s, more than PLAIT_TIMEOUT_S + %d s", took, MARGIN_S);
  if (atomic_fetch_add(&b->sh->count, 1) + 1 == n - 1)
    kill(atomic_load(&b->sh->pid[b->victim]), SIGKILL);
  plait_shutdown();
  free(x);
  return bad;
}

static void stop_trials(int victim) {
  const char *env[] = {"PLAIT_TIMEOUT_S=2", NULL};
  int wrong = 0;
  for (int t = 0; t < TRIALS; t++) {
    blame_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(b != MAP_FAILED);
    memset(b, 0, sizeof *b);
    b->sh = shared_new();
    b->victim = victim;
    plait_test_job_t job = {.nranks = 3, .timeout_s = 60, .env = env};
    plait_test_run_ranks(&job, stop_one, b);
    for (int r = 0; r < 3; r++)
      if (r != victim && job.exit_code[r] != 0) wrong++;
    munmap(b->sh, sizeof *b->sh);
    munmap(b, sizeof *b);
  }
  cr_expect_eq(wrong, 0, "%d survivor(s) in %d trials blamed wrongly, late or not at all (victim %d)",
               wrong, TRIALS, victim);
}

Test(blame, sigstop_rank0_mid_collective, .timeout = 200) { stop_trials(0); }
Test(blame, sigstop_rank1_mid_collective, .timeout = 200) { stop_trials(1); }
Test(blame, sigstop_rank2_mid_collective, .timeout = 200) { stop_trials(2); }
