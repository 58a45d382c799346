/*
 * PLAIT_CALLER_RUNS (the turn word, src/engine/submit/turn.h): in a cached
 * epoch whose burst is one allreduce, the thread that waits on it runs the
 * round itself. On forked ranks over gloo, with the epoch on:
 *  - a lone cached allreduce step after step, 2 and 3 ranks: exact results,
 *    and the coordinators run almost none of the rounds (busy cycles, a
 *    count: at least one per step with the setting off, checked too);
 *  - three threads waiting on the same handle at once, step after step;
 *  - three threads, each with its own lone name, at once;
 *  - a caller that only polls (plait_poll, plait_wait with timeout 0: the
 *    second look hands it over) and one that never touches its handle until
 *    the output shows the sum (the epoch's timer): the coordinator runs
 *    their rounds; one that looks with timeout 0 once, then waits (as
 *    plait.torch does), runs its own;
 *  - a mismatch in the epoch: the error word for word as with it off;
 *  - a rank killed in the epoch: the others fail with PEER_LOST naming it.
 * Over ofi/shm, whose vote (plait_transport_v2_t.vote) a caller may leave:
 *  - the steady lone allreduce at 2 ranks, the callers running the rounds,
 *    set to 1 and unset (auto: on over ofi; over gloo auto is off);
 *  - a value it cannot take fails plait_init naming it;
 *  - a mismatch word for word as with it off, and a rank killed, named;
 *  - a peer stopped (SIGSTOP) in the epoch: a wait of 50 ms on the step
 *    it holds up returns PLAIT_ERR_TIMEOUT in about that, three times; once
 *    the peer runs again the step and the next ones sum right.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ops_util.h"

#define STEPS 300
#define COUNT 1024

static const char *ON[] = {"PLAIT_CACHED_EPOCH=1", "PLAIT_CALLER_RUNS=1", NULL};
static const char *OFF[] = {"PLAIT_CACHED_EPOCH=1", "PLAIT_CALLER_RUNS=0", NULL};

/* x[i] = rank + step + i % 7 for every rank: the sum each rank must read. */
static void fill(float *x, size_t n, int rank, int step) {
  for (size_t i = 0; i < n; i++) x[i] = (float)(rank + step + (int)(i % 7));
}
static float want(int nranks, int step, size_t i) {
  return (float)(nranks * (nranks - 1) / 2 + nranks * (step + (int)(i % 7)));
}

/* One lone allreduce of name, waited for with plait_wait; 0 when exact. */
static int lone(int rank, int nranks, const char *name, int step) {
  static _Thread_local float x[COUNT];
  fill(x, COUNT, rank, step);
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, x, COUNT, PLAIT_FLOAT32));
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h));
  plait_result_t rc = plait_wait(h, 60);
  plait_release(h);
  CHECK(rc == PLAIT_SUCCESS, "%s step %d: %s: %s", name, step, plait_result_name(rc),
        plait_last_error());
  for (size_t i = 0; i < COUNT; i++)
    CHECK(x[i] == want(nranks, step, i), "%s step %d [%zu]: %g, want %g", name, step, i, x[i],
          want(nranks, step, i));
  return 0;
}

static int steady(int rank, int nranks, void *arg) {
  int on = *(int *)arg;
  for (int i = 0; i < 20; i++) /* the epoch opens */
    if (lone(rank, nranks, "g", i)) return 1;
  plait_stats_t s0, s1;
  OK(ops_stats(&s0));
  for (int i = 0; i < STEPS; i++)
    if (lone(rank, nranks, "g", i)) return 1;
  OK(ops_stats(&s1));
  uint64_t busy = s1.busy_cycles - s0.busy_cycles;
  plait_test_say(rank, "caller runs %d: %llu busy coordinator cycles for %d lone allreduces", on,
                 (unsigned long long)busy, STEPS);
  /* off: the coordinator runs every round (one busy cycle each at least);
   * on: only a round whose caller found the coordinator awake (its epoch
   * timer, a heartbeat) or that closed the epoch on a loaded machine */
  if (on) CHECK(busy < STEPS / 2, "caller runs on: %llu busy cycles", (unsigned long long)busy);
  else /* a cycle that ends a step may count on either side of a snapshot */
    CHECK(busy >= STEPS * 9 / 10, "caller runs off: only %llu busy cycles",
          (unsigned long long)busy);
  return 0;
}

static void run(int nranks, int on, ops_body_fn body, void *arg) {
  cr_assert_eq(ops_run(nranks, on ? ON : OFF, 240, body, arg ? arg : &on), 0,
               "%d ranks, caller runs %s: a rank failed (see above)", nranks, on ? "on" : "off");
}

Test(caller_runs, steady_2, .timeout = 600) {
  OPS_REQUIRE_GLOO();
  run(2, 1, steady, NULL);
  run(2, 0, steady, NULL);
}

Test(caller_runs, steady_3, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(3, 1, steady, NULL);
}

typedef struct {
  plait_handle_t *h;
  pthread_barrier_t *go;
  plait_result_t rc;
} waiter_t;

static void *wait_one(void *arg) {
  waiter_t *w = arg;
  pthread_barrier_wait(w->go);
  w->rc = plait_wait(w->h, 60);
  return NULL;
}

/* Every step: one submission, three threads wait on its handle at once. */
static int same_handle(int rank, int nranks, void *arg) {
  (void)arg;
  static float x[COUNT];
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 3);
  for (int step = 0; step < 200; step++) {
    fill(x, COUNT, rank, step);
    plait_tensor_t t;
    plait_handle_t *h;
    OK(plait_tensor_1d(&t, x, COUNT, PLAIT_FLOAT32));
    OK(plait_allreduce_async("w", &t, &t, PLAIT_OP_SUM, NULL, &h));
    waiter_t w[3];
    pthread_t th[3];
    for (int k = 0; k < 3; k++) {
      w[k] = (waiter_t){h, &go, PLAIT_ERR_INTERNAL};
      CHECK(pthread_create(&th[k], NULL, wait_one, &w[k]) == 0, "pthread_create");
    }
    for (int k = 0; k < 3; k++) pthread_join(th[k], NULL);
    plait_release(h);
    for (int k = 0; k < 3; k++)
      CHECK(w[k].rc == PLAIT_SUCCESS, "step %d waiter %d: %s", step, k, plait_result_name(w[k].rc));
    for (size_t i = 0; i < COUNT; i++)
      CHECK(x[i] == want(nranks, step, i), "step %d [%zu]: %g", step, i, x[i]);
  }
  pthread_barrier_destroy(&go);
  return 0;
}

Test(caller_runs, three_waiters_on_one_handle, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(2, 1, same_handle, NULL);
  run(3, 1, same_handle, NULL);
}

typedef struct {
  int rank, nranks, k, fails;
} own_t;

static void *own_name(void *arg) {
  own_t *o = arg;
  char name[16];
  snprintf(name, sizeof name, "t%d", o->k);
  for (int step = 0; step < 100 && !o->fails; step++)
    o->fails = lone(o->rank, o->nranks, name, step);
  return NULL;
}

/* Three threads, each with its own name, all at once: bursts of one, two
 * or three ids, in whatever order each rank's threads submit. */
static int threads_own(int rank, int nranks, void *arg) {
  (void)arg;
  own_t o[3];
  pthread_t th[3];
  for (int k = 0; k < 3; k++) {
    o[k] = (own_t){rank, nranks, k, 0};
    CHECK(pthread_create(&th[k], NULL, own_name, &o[k]) == 0, "pthread_create");
  }
  int fails = 0;
  for (int k = 0; k < 3; k++) {
    pthread_join(th[k], NULL);
    fails |= o[k].fails;
  }
  return fails;
}

Test(caller_runs, three_threads_own_names, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(2, 1, threads_own, NULL);
  run(3, 1, threads_own, NULL);
}

/* Steps whose caller polls, or never touches the handle until its output
 * shows the sum: the coordinator runs them. */
static int no_wait(int rank, int nranks, void *arg) {
  (void)arg;
  static float x[COUNT];
  for (int i = 0; i < 20; i++)
    if (lone(rank, nranks, "p", i)) return 1;
  for (int step = 0; step < 60; step++) {
    fill(x, COUNT, rank, step);
    plait_tensor_t t;
    plait_handle_t *h;
    OK(plait_tensor_1d(&t, x, COUNT, PLAIT_FLOAT32));
    OK(plait_allreduce_async("p", &t, &t, PLAIT_OP_SUM, NULL, &h));
    int done = 0;
    if (step % 3 == 0) {
      while (!done) OK(plait_poll(h, &done));
    } else if (step % 3 == 1) {
      while (plait_wait(h, 0) == PLAIT_ERR_TIMEOUT) sched_yield();
    } else { /* the last element changes when the round has run */
      volatile float *last = &x[COUNT - 1];
      while (*last != want(nranks, step, COUNT - 1)) sched_yield();
      OK(plait_wait(h, 60));
    }
    OK(plait_wait(h, 60));
    plait_release(h);
    for (size_t i = 0; i < COUNT; i++)
      CHECK(x[i] == want(nranks, step, i), "step %d [%zu]: %g", step, i, x[i]);
  }
  return 0;
}

/* plait.torch's synchronize: a look with timeout 0, then a wait. The look
 * must leave the round to the wait: the coordinators run almost none. */
static int look_then_wait(int rank, int nranks, void *arg) {
  (void)arg;
  static float x[COUNT];
  for (int i = 0; i < 20; i++)
    if (lone(rank, nranks, "l", i)) return 1;
  plait_stats_t s0, s1;
  OK(ops_stats(&s0));
  for (int step = 0; step < STEPS; step++) {
    fill(x, COUNT, rank, step);
    plait_tensor_t t;
    plait_handle_t *h;
    int released = 0;
    OK(plait_tensor_1d(&t, x, COUNT, PLAIT_FLOAT32));
    OK(plait_allreduce_async("l", &t, &t, PLAIT_OP_SUM, NULL, &h));
    plait_result_t rc = plait_wait_release(h, 0, &released);
    if (!released) OK(plait_wait_release(h, 60, &released));
    else CHECK(rc == PLAIT_SUCCESS, "step %d: %s", step, plait_result_name(rc));
    CHECK(released, "step %d: not released", step);
    CHECK(x[COUNT - 1] == want(nranks, step, COUNT - 1), "step %d: %g", step, x[COUNT - 1]);
  }
  OK(ops_stats(&s1));
  uint64_t busy = s1.busy_cycles - s0.busy_cycles;
  plait_test_say(rank, "look then wait: %llu busy coordinator cycles for %d steps",
                 (unsigned long long)busy, STEPS);
  CHECK(busy < STEPS / 2, "the look handed %llu rounds to the coordinator",
        (unsigned long long)busy);
  return 0;
}

Test(caller_runs, look_with_timeout_0_then_wait, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(2, 1, look_then_wait, NULL);
}

Test(caller_runs, callers_that_do_not_wait, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(2, 1, no_wait, NULL);
}

typedef struct {
  char msg[4][1024];
} shared_t;
static shared_t *SH;

/* Rank 1 submits the cached name with another count once. */
static int mismatch(int rank, int nranks, void *arg) {
  (void)arg;
  static float x[COUNT + 4];
  for (int i = 0; i < 40; i++)
    if (lone(rank, nranks, "m", i)) return 1;
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, x, rank == 1 ? COUNT + 4 : COUNT, PLAIT_FLOAT32));
  OK(plait_allreduce_async("m", &t, &t, PLAIT_OP_SUM, NULL, &h));
  plait_result_t rc = plait_wait(h, 60);
  plait_release(h);
  CHECK(rc == PLAIT_ERR_MISMATCH, "the mismatched step: %s: %s", plait_result_name(rc),
        plait_last_error());
  snprintf(SH->msg[rank], sizeof SH->msg[rank], "%s", plait_last_error());
  for (int i = 0; i < 20; i++) /* nothing lost: the job goes on */
    if (lone(rank, nranks, "m", i)) return 1;
  return 0;
}

Test(caller_runs, mismatch_word_for_word, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  SH = mmap(NULL, sizeof *SH, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(SH != MAP_FAILED);
  memset(SH, 0, sizeof *SH);
  run(2, 0, mismatch, NULL);
  char off[2][1024];
  memcpy(off, SH->msg, sizeof off);
  cr_assert(off[0][0] && off[1][0]);
  run(2, 1, mismatch, NULL);
  for (int r = 0; r < 2; r++)
    cr_assert_str_eq(SH->msg[r], off[r], "rank %d: on \"%s\", off \"%s\"", r, SH->msg[r], off[r]);
}

/* ---- over ofi/shm, whose transport vote a waiting caller may leave ------ */

static const char *ON_OFI[] = {"PLAIT_CACHED_EPOCH=1", "PLAIT_CALLER_RUNS=1",
                               "PLAIT_TRANSPORT=ofi", "FI_PROVIDER=shm", NULL};

Test(caller_runs, steady_2_ofi_shm, .timeout = 300) {
  int on = 1;
  cr_assert_eq(ops_run(2, ON_OFI, 240, steady, &on), 0, "a rank failed (see above)");
}

/* Unset, PLAIT_CALLER_RUNS is auto: on over ofi (its vote), off over gloo. */
Test(caller_runs, auto_is_on_over_ofi_and_off_over_gloo, .timeout = 600) {
  static const char *auto_ofi[] = {"PLAIT_CACHED_EPOCH=1", "PLAIT_TRANSPORT=ofi",
                                   "FI_PROVIDER=shm", NULL};
  int on = 1;
  cr_assert_eq(ops_run(2, auto_ofi, 240, steady, &on), 0, "ofi: a rank failed (see above)");
  if (!ops_gloo_built()) return;
  static const char *auto_gloo[] = {"PLAIT_CACHED_EPOCH=1", "PLAIT_TRANSPORT=gloo", NULL};
  on = 0;
  cr_assert_eq(ops_run(2, auto_gloo, 240, steady, &on), 0, "gloo: a rank failed (see above)");
}

typedef struct {
  atomic_int pid1;
} stop_t;
static stop_t *STOP;

/* The state letter of process pid (/proc/pid/stat), '?' when unreadable. */
static char proc_state(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  return p && p[1] == ' ' ? p[2] : '?';
}

/* Rank 1 stops itself (SIGSTOP) in the epoch, before its next step. Rank 0
 * submits that step and waits 50 ms at a time: its round's agreement (the
 * transport's vote) cannot finish while rank 1 is stopped, and each wait
 * must come back with PLAIT_ERR_TIMEOUT in about its 50 ms, not hold the
 * thread (a Ctrl-C) until rank 1 runs again or PLAIT_TIMEOUT_S passes. Then
 * rank 0 continues rank 1, and the step and the ones after it sum right. */
static int stopped_peer(int rank, int nranks, void *arg) {
  (void)arg;
  for (int i = 0; i < 40; i++)
    if (lone(rank, nranks, "s", i)) return 1;
  if (rank == 1) {
    atomic_store(&STOP->pid1, (int)getpid());
    raise(SIGSTOP); /* rank 0 continues it */
  } else {
    double t0 = ops_now();
    int pid = 0;
    while (ops_now() - t0 < 30 && (!(pid = atomic_load(&STOP->pid1)) || proc_state(pid) != 'T'))
      ops_sleep(0.001);
    CHECK(pid && proc_state(pid) == 'T', "rank 1 (pid %d) did not stop", pid);
    static float x[COUNT];
    fill(x, COUNT, rank, 40);
    plait_tensor_t t;
    plait_handle_t *h;
    OK(plait_tensor_1d(&t, x, COUNT, PLAIT_FLOAT32));
    OK(plait_allreduce_async("s", &t, &t, PLAIT_OP_SUM, NULL, &h));
    int bad = 0; /* rank 1 is continued whatever happens, then the verdict */
    for (int k = 0; k < 3 && !bad; k++) {
      double w0 = ops_now();
      plait_result_t rc = plait_wait(h, 0.05);
      double took = ops_now() - w0;
      plait_test_say(rank, "wait %d of 50 ms with rank 1 stopped: %s after %.3f s", k,
                     plait_result_name(rc), took);
      bad = rc != PLAIT_ERR_TIMEOUT || took >= 1.0;
    }
    CHECK(kill(pid, SIGCONT) == 0, "SIGCONT to rank 1");
    CHECK(!bad, "a wait of 50 ms with rank 1 stopped did not come back with PLAIT_ERR_TIMEOUT "
          "within 1 s (above)");
    plait_result_t rc = plait_wait(h, 60);
    plait_release(h);
    CHECK(rc == PLAIT_SUCCESS, "the step after rank 1 went on: %s: %s", plait_result_name(rc),
          plait_last_error());
    for (size_t i = 0; i < COUNT; i++)
      CHECK(x[i] == want(nranks, 40, i), "step 40 [%zu]: %g, want %g", i, x[i],
            want(nranks, 40, i));
  }
  if (rank == 1 && lone(rank, nranks, "s", 40)) return 1;
  for (int i = 41; i < 61; i++) /* nothing lost: the job goes on */
    if (lone(rank, nranks, "s", i)) return 1;
  return 0;
}

Test(caller_runs, a_stopped_peer_holds_no_wait_ofi_shm, .timeout = 300) {
  STOP = mmap(NULL, sizeof *STOP, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(STOP != MAP_FAILED);
  memset(STOP, 0, sizeof *STOP);
  int on = 1;
  cr_assert_eq(ops_run(2, ON_OFI, 240, stopped_peer, &on), 0, "a rank failed (see above)");
}

/* A value PLAIT_CALLER_RUNS cannot take fails plait_init on every rank,
 * naming it, before any transport starts; auto and the booleans start. */
static int bad_value(int rank, int nranks, void *arg) {
  (void)nranks;
  (void)arg;
  plait_result_t rc = plait_init();
  if (rc == PLAIT_SUCCESS) plait_shutdown();
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT, "plait_init: %s", plait_result_name(rc));
  const char *msg = plait_last_error();
  if (rank == 1)
    CHECK(strstr(msg, "PLAIT_CALLER_RUNS=sometimes") && strstr(msg, "expected auto, 0, 1"),
          "rank 1's error: %s", msg);
  return 0;
}

static int starts(int rank, int nranks, void *arg) {
  (void)arg;
  return lone(rank, nranks, "v", 0);
}

Test(caller_runs, a_bad_value_fails_init_naming_it, .timeout = 300) {
  const char *bad[] = {"PLAIT_CALLER_RUNS=sometimes", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 120, .env = bad};
  cr_assert_eq(plait_test_run_ranks(&job, bad_value, NULL), 0, "see above");
  static const char *vals[] = {"PLAIT_CALLER_RUNS=auto", "PLAIT_CALLER_RUNS=on",
                               "PLAIT_CALLER_RUNS=no"};
  for (int i = 0; i < 3; i++) {
    const char *env[] = {vals[i], "PLAIT_TRANSPORT=ofi", "FI_PROVIDER=shm", NULL};
    cr_assert_eq(ops_run(2, env, 120, starts, NULL), 0, "%s: a rank failed", vals[i]);
  }
}

/* Rank 2 is killed with -9 in the epoch; the others must name it. */
static int killed_main(int rank, int nranks, void *arg) {
  (void)arg;
  OK(plait_init());
  int fails = 0;
  for (int i = 0; i < 40 && !fails; i++) fails = lone(rank, nranks, "k", i);
  if (rank == 2) raise(SIGKILL);
  static float x[COUNT];
  plait_result_t rc = ops_allreduce_after_loss(rank, "k", x, COUNT);
  if (!fails) {
    CHECK(rc == PLAIT_ERR_PEER_LOST, "%s, not PEER_LOST", plait_result_name(rc));
    CHECK(strstr(plait_last_error(), "rank 2") != NULL, "the error does not name rank 2");
  }
  /* later operations fail fast, with the same error */
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  OK(plait_tensor_1d(&t, x, COUNT, PLAIT_FLOAT32));
  rc = plait_allreduce_async("k2", &t, &t, PLAIT_OP_SUM, NULL, &h);
  CHECK(rc == PLAIT_ERR_PEER_LOST, "after the failure: %s", plait_result_name(rc));
  plait_shutdown();
  return fails;
}

static void kill_rank_2(const char *const *on) {
  const char *all[8] = {"PLAIT_TIMEOUT_S=5"};
  for (int i = 0; on[i] && i < 6; i++) all[i + 1] = on[i];
  plait_test_job_t job = {.nranks = 3, .timeout_s = 120, .env = all};
  plait_test_run_ranks(&job, killed_main, NULL);
  cr_assert_eq(job.exit_code[2], -1, "rank 2 was to be killed");
  for (int r = 0; r < 2; r++)
    cr_assert_eq(job.exit_code[r], 0, "rank %d did not see rank 2 lost (see above)", r);
}

Test(caller_runs, a_rank_killed, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  kill_rank_2(ON);
}

/* the same over ofi/shm, where the agreement is the transport's vote */
Test(caller_runs, a_rank_killed_ofi_shm, .timeout = 300) { kill_rank_2(ON_OFI); }

Test(caller_runs, mismatch_word_for_word_ofi_shm, .timeout = 300) {
  SH = mmap(NULL, sizeof *SH, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(SH != MAP_FAILED);
  memset(SH, 0, sizeof *SH);
  static const char *off_ofi[] = {"PLAIT_CACHED_EPOCH=1", "PLAIT_CALLER_RUNS=0",
                                  "PLAIT_TRANSPORT=ofi", "FI_PROVIDER=shm", NULL};
  cr_assert_eq(ops_run(2, off_ofi, 240, mismatch, NULL), 0, "off: a rank failed (see above)");
  char off[2][1024];
  memcpy(off, SH->msg, sizeof off);
  cr_assert(off[0][0] && off[1][0]);
  cr_assert_eq(ops_run(2, ON_OFI, 240, mismatch, NULL), 0, "on: a rank failed (see above)");
  for (int r = 0; r < 2; r++)
    cr_assert_str_eq(SH->msg[r], off[r], "rank %d: on \"%s\", off \"%s\"", r, SH->msg[r], off[r]);
}
