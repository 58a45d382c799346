/* A job wired the way horovodrun --gloo wires one (HOROVOD_RANK/SIZE/...,
 * HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, no PLAIT_RANK) forms, and a Horovod
 * variable really takes effect: HOROVOD_FUSION_THRESHOLD=0 leaves every tensor
 * unfused in plait_stats, where 64 MiB fuses them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait/plait.h"
#include "ranks.h"

#define TENSORS 40
#define COUNT 1024

/* Moves the harness's PLAIT_* layout to the variables horovodrun sets. The
 * harness's port P is free; horovodrun's store would hold P-1 and plait's
 * rank 0 listens on the store's port + 1. */
static int as_horovodrun(void) {
  static const char *pairs[][2] = {{"PLAIT_RANK", "HOROVOD_RANK"},
                                   {"PLAIT_SIZE", "HOROVOD_SIZE"},
                                   {"PLAIT_LOCAL_RANK", "HOROVOD_LOCAL_RANK"},
                                   {"PLAIT_LOCAL_SIZE", "HOROVOD_LOCAL_SIZE"}};
  for (int i = 0; i < 4; i++) {
    const char *v = getenv(pairs[i][0]);
    if (!v) return -1;
    setenv(pairs[i][1], v, 1);
    unsetenv(pairs[i][0]);
  }
  const char *rv = getenv("PLAIT_RENDEZVOUS");
  char host[64];
  int port;
  if (!rv || sscanf(rv, "%63[^:]:%d", host, &port) != 2) return -1;
  char p[16];
  snprintf(p, sizeof p, "%d", port - 1);
  setenv("HOROVOD_GLOO_RENDEZVOUS_ADDR", host, 1);
  setenv("HOROVOD_GLOO_RENDEZVOUS_PORT", p, 1);
  setenv("HOROVOD_CONTROLLER", "gloo", 1);
  setenv("HOROVOD_CPU_OPERATIONS", "gloo", 1);
  unsetenv("PLAIT_RENDEZVOUS");
  return 0;
}

static int batch(uint64_t *responses, uint64_t *fused) {
  static float data[TENSORS][COUNT];
  plait_handle_t *h[TENSORS];
  plait_stats_t before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
  if (plait_stats(&before)) return -1;
  for (int i = 0; i < TENSORS; i++) {
    char name[32];
    snprintf(name, sizeof name, "t%d", i);
    for (int j = 0; j < COUNT; j++) data[i][j] = 1.0f;
    plait_tensor_t t;
    plait_tensor_1d(&t, data[i], COUNT, PLAIT_FLOAT32);
    if (plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[i])) return -1;
  }
  for (int i = 0; i < TENSORS; i++) {
    if (plait_wait(h[i], 30)) return -1;
    plait_release(h[i]);
    if (data[i][0] != 2.0f) return -1;
  }
  if (plait_stats(&after)) return -1;
  *responses = after.responses - before.responses;
  *fused = after.fused_responses - before.fused_responses;
  return 0;
}

static int body(int rank, int n, void *arg) {
  (void)n;
  int expect_fused = *(int *)arg;
  if (as_horovodrun()) return 1;
  if (plait_init()) {
    plait_test_say(rank, "plait_init: %s", plait_last_error());
    return 2;
  }
  int me = -1;
  if (plait_rank(&me) || me != rank) return 3;
  char dump[8192];
  if (plait_config_dump(dump, sizeof dump, NULL) ||
      !strstr(dump, "taken as PLAIT_FUSION_THRESHOLD=") ||
      !strstr(dump, "# HOROVOD_RANK=") || !strstr(dump, "taken as PLAIT_RENDEZVOUS=")) {
    plait_test_say(rank, "dump without the Horovod notes:\n%s", dump);
    return 4;
  }
  /* everyone submits the whole batch before the long cycle ends */
  plait_handle_t *b;
  if (plait_barrier_async(NULL, &b) || plait_wait(b, 30)) return 5;
  plait_release(b);
  uint64_t responses, fused;
  if (batch(&responses, &fused)) return 6;
  int ok = expect_fused ? (fused > 0 && responses < TENSORS) : (fused == 0 && responses == TENSORS);
  if (!ok) {
    plait_test_say(rank, "expected %s: %llu responses, %llu fused",
                   expect_fused ? "fusion" : "no fusion", (unsigned long long)responses,
                   (unsigned long long)fused);
    return 7;
  }
  return plait_shutdown() ? 8 : 0;
}

Test(horovod_env, fusion_threshold_zero_disables_fusion, .timeout = 120) {
  plait_test_clear_env();
  const char *env[] = {"HOROVOD_FUSION_THRESHOLD=0", "HOROVOD_CYCLE_TIME=50", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 100, .env = env};
  int expect_fused = 0;
  cr_assert_eq(plait_test_run_ranks(&job, body, &expect_fused), 0);
}

/* The control: the same job with Horovod's 64 MiB fuses, so the check above
 * can tell the variable took effect. */
Test(horovod_env, fusion_threshold_64m_fuses, .timeout = 120) {
  plait_test_clear_env();
  const char *env[] = {"HOROVOD_FUSION_THRESHOLD=67108864", "HOROVOD_CYCLE_TIME=50", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 100, .env = env};
  int expect_fused = 1;
  cr_assert_eq(plait_test_run_ranks(&job, body, &expect_fused), 0);
}
