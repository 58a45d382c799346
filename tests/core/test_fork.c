/*
 * A process forked after plait_init (a DataLoader worker, a subprocess
 * helper) is not part of the job: its exit must not run plait's shutdown on
 * the parent's connections, and its use of plait gets a clear error at once,
 * never a hang (issue 16, item 2). Only the process that initialised owns the
 * engine (src/engine/engine.h).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops_util.h"

static const char *const no_env[] = {NULL};

/* What Python's plait does: leave the job cleanly at exit (plait.common.basics
 * registers the same with atexit). */
static void shutdown_at_exit(void) {
  plait_result_t rc = plait_shutdown();
  fprintf(stderr, "[fork child %d] plait_shutdown at exit: %s\n", (int)getpid(),
          plait_result_name(rc));
}

/* Waits up to limit_s for pid; kills it after that. Its exit code, or -1
 * when it died of a signal or had to be killed. */
static int wait_child(pid_t pid, double limit_s, int *hung) {
  int status = 0;
  double until = ops_now() + limit_s;
  *hung = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (ops_now() > until) {
      *hung = 1;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    ops_sleep(0.01);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Every rank's allreduce of rank + i, checked. */
static int allreduce_round(int rank, int n, const char *name) {
  float x[8];
  for (int i = 0; i < 8; i++) x[i] = (float)(rank + i);
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, x, 8, PLAIT_FLOAT32));
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  for (int i = 0; i < 8; i++)
    CHECK(x[i] == (float)(n * (n - 1) / 2 + n * i), "%s[%d] = %g", name, i, x[i]);
  return 0;
}

/* Every rank forks a child that exits at once with exit(), running the
 * atexit handler; the parents then go on with collectives. */
static int child_exits(int rank, int n, void *arg) {
  (void)arg;
  atexit(shutdown_at_exit);
  if (allreduce_round(rank, n, "before")) return 1;
  pid_t pid = fork();
  if (pid == 0) exit(0); /* atexit handlers run here: plait_shutdown in the child */
  CHECK(pid > 0, "fork failed");
  int hung, code = wait_child(pid, 30, &hung);
  CHECK(!hung && code == 0, "the forked child %s (exit code %d)",
        hung ? "hung in its exit handler" : "did not exit cleanly", code);
  for (int round = 0; round < 3; round++) {
    char name[32];
    snprintf(name, sizeof name, "after.%d", round);
    if (allreduce_round(rank, n, name)) return 1;
  }
  plait_handle_t *h;
  OK(plait_barrier_async(NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  return 0;
}

/* In the child: an operation, a query and shutdown each fail at once with
 * PLAIT_ERR_NOT_INITIALIZED naming the fork; exit code 0 when they do. An
 * operation that was accepted is waited for as a user would, forever: the
 * parent then sees a hang. */
static int in_child(void) {
  float x[4] = {1, 2, 3, 4};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32);
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_allreduce_async("child", &t, &t, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) {
    rc = plait_wait(h, -1);
    fprintf(stderr, "[fork child] the allreduce was accepted and then ended with %s\n",
            plait_result_name(rc));
    return 2;
  }
  int fails = 0;
  if (rc != PLAIT_ERR_NOT_INITIALIZED || !strstr(plait_last_error(), "fork")) {
    fprintf(stderr, "[fork child] allreduce: %s: %s\n", plait_result_name(rc), plait_last_error());
    fails++;
  }
  int r = -1, init = 1;
  if (plait_rank(&r) != PLAIT_ERR_NOT_INITIALIZED || !strstr(plait_last_error(), "fork")) fails++;
  if (plait_is_initialized(&init) != PLAIT_SUCCESS || init != 0) fails++;
  if (plait_init() == PLAIT_SUCCESS) fails++; /* it cannot join the parent's job */
  if (plait_shutdown() != PLAIT_ERR_NOT_INITIALIZED) fails++;
  if (fails) fprintf(stderr, "[fork child] %d of the calls did not fail as expected\n", fails);
  return fails ? 1 : 0;
}

static int child_calls(int rank, int n, void *arg) {
  (void)arg;
  if (allreduce_round(rank, n, "before")) return 1;
  pid_t pid = fork();
  if (pid == 0) _exit(in_child());
  CHECK(pid > 0, "fork failed");
  int hung, code = wait_child(pid, 20, &hung);
  CHECK(!hung, "the forked child's operation hung (killed after 20 s)");
  CHECK(code == 0, "the forked child's calls did not fail with a clear error (exit code %d)", code);
  return allreduce_round(rank, n, "after");
}

Test(fork, child_exits_while_the_parents_go_on_3ranks, .timeout = 180) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(3, no_env, 120, child_exits, NULL), 0, "a rank failed (see above)");
}

Test(fork, child_operation_fails_at_once_2ranks, .timeout = 180) {
  OPS_REQUIRE_GLOO();
  cr_assert_eq(ops_run(2, no_env, 120, child_calls, NULL), 0, "a rank failed (see above)");
}
