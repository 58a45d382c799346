/*
 * A rank paused for well under PLAIT_TIMEOUT_S (SIGSTOP, then SIGCONT 2 s
 * later; the timeout is 15 s) leaves the job running and correct. 3 ranks
 * run 40 steps of collectives, each checked for its values: 8 small fused
 * allreduces, one of 4 MiB, a broadcast from a root that moves round and an
 * allgather. At step 12 the victim asks a pauser process (forked by the test
 * before the job) to stop it, and goes on submitting: it is stopped inside
 * whatever it is doing (often a collective), the others wait in theirs, and
 * after SIGCONT every step, before, during and after the pause, must be
 * right and nobody named lost. Rank 0 (the coordinator) and rank 1 are
 * paused, in separate jobs. On gloo here; tests/plugins/ofi/CMakeLists.txt
 * runs it again on ofi shm and tcp (PLAIT_TEST_TRANSPORT).
 * And every rank stopped together for 8 s (PLAIT_TIMEOUT_S=3), between
 * operations, then continued: a stall the whole host shares (on a loaded
 * machine, a test's ranks all descheduled) loses nobody. Before, the first
 * rank to run again named the others lost, before they could send
 * (liveness_busy_set's 1 GiB case so failed under load, every rank naming
 * another "silent for 2.5 s" at the same instant). Also stopped inside 32 MiB
 * allreduces: over ofi every rank then timed out in the transport
 * (test_blame_ofi_tcp's flake under load).
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops_util.h"

#define STEPS 40
#define PAUSE_AT 12
#define PAUSE_S 2.0
#define SMALL 8
#define SMALL_LEN 257
#define BIG_LEN ((size_t)1 << 20) /* floats: 4 MiB */
#define BCAST_LEN 1000
#define GATHER_LEN 100

typedef struct {
  int victim;
  atomic_int victim_pid; /* set by the victim when it wants to be paused */
  atomic_int paused;     /* the pauser: 1 stopped it, 2 continued it */
  double stopped_at, resumed_at;
  double step_at[STEPS]; /* when rank 0 finished each step */
} pause_t;

static float value(int rank, int step, int i) { return (float)((rank + 1) * 1000 + step * 10 + i); }

/* The expected sum over the ranks of value(r, step, i). */
static float sum_of(int nranks, int step, int i) {
  float s = 0;
  for (int r = 0; r < nranks; r++) s += value(r, step, i);
  return s;
}

typedef struct {
  float small[SMALL][SMALL_LEN];
  float *big;
  int32_t bcast[BCAST_LEN];
  float gather[GATHER_LEN];
  plait_handle_t *h[SMALL + 3];
} step_bufs_t;

static int submit_step(int rank, int step, step_bufs_t *b) {
  plait_tensor_t t;
  for (int i = 0; i < SMALL; i++) {
    char name[32];
    snprintf(name, sizeof name, "pr/small/%d", i);
    for (int k = 0; k < SMALL_LEN; k++) b->small[i][k] = value(rank, step, i);
    OK(plait_tensor_1d(&t, b->small[i], SMALL_LEN, PLAIT_FLOAT32));
    OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &b->h[i]));
  }
  for (size_t k = 0; k < BIG_LEN; k++) b->big[k] = value(rank, step, SMALL) + (float)(k % 7);
  OK(plait_tensor_1d(&t, b->big, (int64_t)BIG_LEN, PLAIT_FLOAT32));
  OK(plait_allreduce_async("pr/big", &t, &t, PLAIT_OP_SUM, NULL, &b->h[SMALL]));
  for (int k = 0; k < BCAST_LEN; k++) b->bcast[k] = rank * 100000 + step * 100 + k % 100;
  OK(plait_tensor_1d(&t, b->bcast, BCAST_LEN, PLAIT_INT32));
  int n = 0;
  OK(plait_size(&n));
  OK(plait_broadcast_async("pr/bcast", &t, step % n, NULL, &b->h[SMALL + 1]));
  for (int k = 0; k < GATHER_LEN; k++) b->gather[k] = value(rank, step, k);
  OK(plait_tensor_1d(&t, b->gather, GATHER_LEN, PLAIT_FLOAT32));
  OK(plait_allgather_async("pr/gather", &t, NULL, &b->h[SMALL + 2]));
  return 0;
}

static int check_step(int rank, int nranks, int step, step_bufs_t *b) {
  for (int i = 0; i < SMALL + 3; i++) {
    plait_result_t rc = plait_wait(b->h[i], 120);
    if (rc) FAILF("step %d, operation %d: %s: %s", step, i, plait_result_name(rc),
                  plait_last_error());
  }
  for (int i = 0; i < SMALL; i++)
    for (int k = 0; k < SMALL_LEN; k++)
      CHECK(b->small[i][k] == sum_of(nranks, step, i), "step %d: pr/small/%d[%d] is %g, "
            "expected %g", step, i, k, b->small[i][k], sum_of(nranks, step, i));
  for (size_t k = 0; k < BIG_LEN; k++) {
    float want = sum_of(nranks, step, SMALL) + (float)(nranks * (int)(k % 7));
    CHECK(b->big[k] == want, "step %d: pr/big[%zu] is %g, expected %g", step, k, b->big[k], want);
  }
  int root = step % nranks;
  for (int k = 0; k < BCAST_LEN; k++)
    CHECK(b->bcast[k] == root * 100000 + step * 100 + k % 100, "step %d: pr/bcast[%d] is %d "
          "(root %d)", step, k, (int)b->bcast[k], root);
  plait_tensor_t out;
  OK(plait_handle_output(b->h[SMALL + 2], &out));
  CHECK(out.shape[0] == (int64_t)nranks * GATHER_LEN, "step %d: allgather gave %lld rows", step,
        (long long)out.shape[0]);
  const float *g = out.data;
  for (int r = 0; r < nranks; r++)
    for (int k = 0; k < GATHER_LEN; k++)
      CHECK(g[r * GATHER_LEN + k] == value(r, step, k), "step %d: allgather row %d from rank %d "
            "is %g", step, k, r, g[r * GATHER_LEN + k]);
  for (int i = 0; i < SMALL + 3; i++) plait_release(b->h[i]);
  return 0;
}

static int body(int rank, int nranks, void *arg) {
  pause_t *p = arg;
  step_bufs_t *b = calloc(1, sizeof *b);
  CHECK(b && (b->big = malloc(BIG_LEN * sizeof *b->big)), "out of memory");
  const char *tr = NULL, *want = getenv("PLAIT_TRANSPORT");
  OK(plait_transport_name(&tr));
  CHECK(!want || !strcmp(tr, want), "the job runs on %s, not on %s", tr, want);
  if (rank == 0) plait_test_say(rank, "on %s (FI_PROVIDER=%s)", tr, getenv("FI_PROVIDER") ?
                                getenv("FI_PROVIDER") : "-");
  int fails = 0;
  for (int step = 0; step < STEPS && !fails; step++) {
    fails = submit_step(rank, step, b);
    if (!fails && step == PAUSE_AT && rank == p->victim)
      atomic_store(&p->victim_pid, (int)getpid()); /* stopped from now on, in flight */
    if (!fails) fails = check_step(rank, nranks, step, b);
    if (rank == 0) p->step_at[step] = ops_now();
  }
  free(b->big);
  free(b);
  if (!fails && rank == p->victim)
    CHECK(atomic_load(&p->paused) == 2, "the victim was never paused and resumed");
  return fails;
}

/* The pauser: waits for the victim's pid, stops it, continues it PAUSE_S later. */
static void pauser(pause_t *p) {
  double end = ops_now() + 200;
  int pid = 0;
  while (!(pid = atomic_load(&p->victim_pid)) && ops_now() < end) ops_sleep(0.002);
  if (!pid) _exit(1);
  p->stopped_at = ops_now();
  kill(pid, SIGSTOP);
  atomic_store(&p->paused, 1);
  ops_sleep(PAUSE_S);
  p->resumed_at = ops_now();
  kill(pid, SIGCONT);
  atomic_store(&p->paused, 2);
  _exit(0);
}

/* A zeroed page the ranks and the helper process share, the environment
 * cleared for a job. */
static void *shared_zeroed(size_t size) {
  OPS_REQUIRE_GLOO();
  plait_test_clear_env();
  plait_test_set_plugin_path();
  void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(m != MAP_FAILED, "mmap");
  memset(m, 0, size);
  return m;
}

/* The helper process, ended if the job ended without it finishing. */
static void end_helper(pid_t pz) {
  int st = 0;
  if (waitpid(pz, &st, WNOHANG) == 0) {
    kill(pz, SIGKILL);
    waitpid(pz, &st, 0);
  }
}

static void run(int victim) {
  pause_t *p = shared_zeroed(sizeof *p);
  p->victim = victim;
  pid_t pz = fork();
  cr_assert(pz >= 0, "fork");
  if (pz == 0) pauser(p);
  /* PLAIT_TIMEOUT_S 15: the pause is 2 s, the margin generous on a loaded machine */
  int rc = ops_run(3, NULL, 300, body, p);
  end_helper(pz); /* the job may end without asking for the pause */
  double stopped = p->resumed_at - p->stopped_at;
  double during = p->step_at[PAUSE_AT + 1] - p->step_at[PAUSE_AT > 0 ? PAUSE_AT - 1 : 0];
  int paused = atomic_load(&p->paused);
  munmap(p, sizeof *p);
  cr_assert_eq(rc, 0, "a rank failed after rank %d was paused (see above)", victim);
  cr_assert_eq(paused, 2, "rank %d was not paused and resumed", victim);
  cr_assert_geq(stopped, PAUSE_S, "rank %d was stopped %.2f s, not %.1f", victim, stopped, PAUSE_S);
  cr_log_info("rank %d stopped %.2f s; steps %d..%d took %.2f s on rank 0", victim, stopped,
              PAUSE_AT, PAUSE_AT + 1, during);
}

Test(pause_resume, rank1_stopped_2s_then_continued_3ranks, .timeout = 320) { run(1); }
Test(pause_resume, rank0_stopped_2s_then_continued_3ranks, .timeout = 320) { run(0); }

/* ---- every rank stopped together ---- */

#define FREEZE_S 8.0
#define FREEZE_TIMEOUT "PLAIT_TIMEOUT_S=3" /* well under the stall, above a loaded host's lags */

typedef struct {
  atomic_int pid[3];
  atomic_int frozen; /* the freezer: 1 stopped them all, 2 continued them */
} freeze_t;

static int allreduce_ranks(int rank, int nranks, const char *name) {
  float v = (float)(rank + 1);
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  OK(plait_tensor_1d(&t, &v, 1, PLAIT_FLOAT32));
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h));
  plait_result_t rc = plait_wait(h, 60);
  plait_release(h);
  if (rc) FAILF("%s: %s: %s", name, plait_result_name(rc), plait_last_error());
  CHECK(v == (float)(nranks * (nranks + 1) / 2), "%s gave %g", name, v);
  return 0;
}

static int freeze_body(int rank, int nranks, void *arg) {
  freeze_t *f = arg;
  if (allreduce_ranks(rank, nranks, "freeze/before")) return 1;
  atomic_store(&f->pid[rank], (int)getpid()); /* idle in the loop from now on */
  for (double end = ops_now() + 120; atomic_load(&f->frozen) != 2;) {
    CHECK(ops_now() < end, "never stopped and continued");
    ops_sleep(0.01);
  }
  ops_sleep(0.5); /* everyone runs again: heartbeats flow */
  for (int i = 0; i < 3; i++)
    if (allreduce_ranks(rank, nranks, "freeze/after")) return 1;
  return 0;
}

#define MID_LEN ((size_t)8 << 20) /* floats: 32 MiB, a collective long enough to stop in */

/* The same, stopped inside collectives: 32 MiB allreduces back to back. */
static int freeze_mid_body(int rank, int nranks, void *arg) {
  freeze_t *f = arg;
  float *x = malloc(MID_LEN * sizeof *x);
  CHECK(x != NULL, "out of memory");
  int fails = 0, after = 0;
  double end = ops_now() + 120;
  for (int i = 0; !fails && after < 3; i++) {
    for (size_t k = 0; k < MID_LEN; k++) x[k] = (float)(rank + 1);
    plait_tensor_t t;
    plait_handle_t *h = NULL;
    OK(plait_tensor_1d(&t, x, (int64_t)MID_LEN, PLAIT_FLOAT32));
    OK(plait_allreduce_async("freeze/mid", &t, &t, PLAIT_OP_SUM, NULL, &h));
    if (i == 0) atomic_store(&f->pid[rank], (int)getpid());
    plait_result_t rc = plait_wait(h, 60);
    plait_release(h);
    if (rc) {
      plait_test_say(rank, "allreduce %d: %s: %s", i, plait_result_name(rc), plait_last_error());
      fails = 1;
    } else if (x[MID_LEN / 2] != (float)(nranks * (nranks + 1) / 2)) {
      plait_test_say(rank, "allreduce %d gave %g", i, x[MID_LEN / 2]);
      fails = 1;
    }
    after += atomic_load(&f->frozen) == 2;
    if (ops_now() > end) fails = 1, plait_test_say(rank, "never stopped and continued");
  }
  free(x);
  return fails;
}

/* Stops the 3 ranks once all are idle, continues them FREEZE_S later. */
static void freezer(freeze_t *f) {
  double end = ops_now() + 120;
  for (int r = 0; r < 3; r++)
    while (!atomic_load(&f->pid[r]))
      if (ops_now() > end) _exit(1);
      else ops_sleep(0.002);
  for (int r = 0; r < 3; r++) kill(atomic_load(&f->pid[r]), SIGSTOP);
  atomic_store(&f->frozen, 1);
  ops_sleep(FREEZE_S);
  for (int r = 0; r < 3; r++) kill(atomic_load(&f->pid[r]), SIGCONT);
  atomic_store(&f->frozen, 2);
  _exit(0);
}

static void run_freeze(ops_body_fn body) {
  freeze_t *f = shared_zeroed(sizeof *f);
  pid_t pz = fork();
  cr_assert(pz >= 0, "fork");
  if (pz == 0) freezer(f);
  int rc = ops_run_hooked(3, FREEZE_TIMEOUT, NULL, 150, body, f, NULL, NULL);
  end_helper(pz);
  int frozen = atomic_load(&f->frozen);
  munmap(f, sizeof *f);
  cr_assert_eq(frozen, 2, "the ranks were not stopped and continued");
  cr_assert_eq(rc, 0, "a rank failed after all were stopped %.0f s and continued (see above)",
               FREEZE_S);
}

Test(pause_resume, every_rank_stopped_together_past_the_timeout_loses_nobody, .timeout = 200) {
  run_freeze(freeze_body);
}

/* Over ofi only: gloo's own waits inside a collective (unbound_buffer.cc,
 * "Timed out waiting 1000ms for recv operation") count the stall, a limit of
 * the gloo library that plait's plugin cannot reach (design.md). */
Test(pause_resume, every_rank_stopped_together_inside_collectives_loses_nobody, .timeout = 200) {
  const char *tr = getenv("PLAIT_TEST_TRANSPORT");
  if (!tr || strcmp(tr, "ofi"))
    cr_skip_test("over ofi only (its re-runs): gloo's own waits inside a collective count a "
                 "stall the ranks shared as the peers' silence");
  run_freeze(freeze_mid_body);
}
