/*
 * Shared-memory regions that processes killed over libfabric shm left in
 * /dev/shm/<pid>:* (plugins/ofi/robustness/shm_stale.c):
 *  - a rank whose pid once belonged to such a process: before shm_stale.c
 *    the rank died of SIGBUS inside libfabric (it mapped the stale file);
 *    now the plugin removes them before its first shm endpoint. Each rank
 *    plays the dead predecessor by leaving such files under its own pid;
 *  - regions of a dead process whose pid nobody took again: they stayed
 *    until reboot (16 MiB each); now a job's ranks remove them, and leave
 *    alone the regions of a live process.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ranks.h"
#include "plait/plait.h"

/* A region file /dev/shm/<pid>:<ep>:0 of size bytes; 0 when made. */
static int make_region(pid_t pid, int ep, off_t size, char *path, size_t cap) {
  snprintf(path, cap, "/dev/shm/%d:%d:0", (int)pid, ep);
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (fd < 0) return -1;
  int rc = size ? ftruncate(fd, size) : 0;
  close(fd);
  return rc;
}

/* plait_init, one allreduce of (rank + 1) checked, plait_shutdown; 0 when right. */
static int allreduce_once(int rank, int nranks, void *arg) {
  (void)arg;
  if (plait_init() != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s", plait_last_error());
    return 1;
  }
  float x = (float)(rank + 1);
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_tensor_1d(&t, &x, 1, PLAIT_FLOAT32);
  if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async("dead.shm", &t, &t, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 60);
  plait_release(h);
  if (rc != PLAIT_SUCCESS) plait_test_say(rank, "allreduce: %s", plait_last_error());
  float want = (float)(nranks * (nranks + 1) / 2);
  if (rc == PLAIT_SUCCESS && x != want) {
    plait_test_say(rank, "allreduce gave %g, not %g", x, want);
    rc = PLAIT_ERR_INTERNAL;
  }
  plait_shutdown();
  return rc != PLAIT_SUCCESS;
}

static int stale_then_allreduce(int rank, int nranks, void *arg) {
  for (int ep = 0; ep < 2; ep++) { /* as a killed process leaves them: empty or not */
    char path[64];
    if (make_region(getpid(), ep, ep == 1 ? 1 << 20 : 0, path, sizeof path) != 0) {
      plait_test_say(rank, "cannot create %s", path);
      return 1;
    }
  }
  return allreduce_once(rank, nranks, arg);
}

/* Skips the test when the ofi plugin was not built; a clean environment. */
static void require_ofi(void) {
  FILE *f = fopen(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", "rb");
  if (!f) cr_skip_test("the ofi transport plugin was not built: no " PLAIT_TEST_LIB_DIR
                       "/libplait-transport-ofi.so");
  fclose(f);
  plait_test_clear_env();
  plait_test_set_plugin_path();
}

Test(ofi_stale_shm, regions_left_under_this_pid_do_not_stop_a_rank, .timeout = 120) {
  require_ofi();
  const char *env[] = {"PLAIT_TRANSPORT=ofi", "FI_PROVIDER=shm", "PLAIT_TIMEOUT_S=20", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 90, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, stale_then_allreduce, NULL), 0,
               "a rank failed with stale /dev/shm regions under its pid (messages above)");
}

Test(ofi_stale_shm, regions_of_dead_pids_go_and_a_live_process_s_stay, .timeout = 120) {
  require_ofi();
  /* a dead process: a child that exited and was reaped; its pid is free */
  pid_t dead = fork();
  cr_assert(dead >= 0, "fork");
  if (dead == 0) _exit(0);
  waitpid(dead, NULL, 0);
  /* a live process that is no rank, started before its region was made */
  pid_t live = fork();
  cr_assert(live >= 0, "fork");
  if (live == 0) {
    pause();
    _exit(0);
  }
  char gone0[64], gone1[64], kept[64];
  int made = make_region(dead, 0, 1 << 20, gone0, sizeof gone0) == 0 &&
             make_region(dead, 1, 0, gone1, sizeof gone1) == 0 &&
             make_region(live, 0, 1 << 20, kept, sizeof kept) == 0;
  const char *env[] = {"PLAIT_TRANSPORT=ofi", "FI_PROVIDER=shm", "PLAIT_TIMEOUT_S=20", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 90, .env = env};
  int failed = !made || plait_test_run_ranks(&job, allreduce_once, NULL);
  struct stat sb;
  int gone_left = (stat(gone0, &sb) == 0) + (stat(gone1, &sb) == 0);
  int kept_there = stat(kept, &sb) == 0;
  int reused = kill(dead, 0) == 0; /* some process took the dead pid meanwhile */
  unlink(gone0), unlink(gone1), unlink(kept);
  kill(live, SIGKILL);
  waitpid(live, NULL, 0);
  cr_assert(made, "cannot make the region files in /dev/shm");
  cr_assert_eq(failed, 0, "the job failed (messages above)");
  cr_assert(kept_there, "%s, the region of a live process (pid %d), was removed", kept, (int)live);
  cr_assert(gone_left == 0, "%d region(s) of the dead pid %d are still in /dev/shm: "
            "%s, %s%s", gone_left, (int)dead, gone0, gone1, reused ? " (a process has it now)" : "");
}
