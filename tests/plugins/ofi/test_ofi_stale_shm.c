/*
 * A rank whose pid once belonged to a process killed with kill -9 over
 * libfabric shm finds that process's shared-memory regions still in
 * /dev/shm/<pid>:*. Before plugins/ofi/robustness/shm_stale.c the rank died of SIGBUS
 * inside libfabric (it mapped the stale file); now the plugin removes them
 * before its first shm endpoint. Each rank plays the dead predecessor by
 * leaving such files under its own pid before it starts.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ranks.h"
#include "plait/plait.h"

static int stale_then_allreduce(int rank, int nranks, void *arg) {
  (void)arg;
  for (int ep = 0; ep < 2; ep++) { /* as a killed process leaves them: empty or not */
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/%d:%d:0", (int)getpid(), ep);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0) {
      plait_test_say(rank, "cannot create %s", path);
      return 1;
    }
    if (ep == 1 && ftruncate(fd, 1 << 20) != 0) return 1;
    close(fd);
  }
  if (plait_init() != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s", plait_last_error());
    return 1;
  }
  float x = (float)(rank + 1);
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_tensor_1d(&t, &x, 1, PLAIT_FLOAT32);
  if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async("stale.shm", &t, &t, PLAIT_OP_SUM, NULL, &h);
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

Test(ofi_stale_shm, regions_left_under_this_pid_do_not_stop_a_rank, .timeout = 120) {
  FILE *f = fopen(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", "rb");
  if (!f) cr_skip_test("the ofi transport plugin was not built: no " PLAIT_TEST_LIB_DIR
                       "/libplait-transport-ofi.so");
  fclose(f);
  plait_test_clear_env();
  plait_test_set_plugin_path();
  const char *env[] = {"PLAIT_TRANSPORT=ofi", "FI_PROVIDER=shm", "PLAIT_TIMEOUT_S=20", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 90, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, stale_then_allreduce, NULL), 0,
               "a rank failed with stale /dev/shm regions under its pid (messages above)");
}
