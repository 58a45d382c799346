/*
 * The device path's refusals and a lost rank, on the "devsim" test
 * transport (see test_device_path.c):
 *  - a host tensor on a device-only transport, and a tensor on another
 *    device than the transport's, are refused with messages naming the
 *    transport / both devices; the job goes on;
 *  - without batch_copy (DEVSIM_NO_BATCH=1) the core refuses scale factors,
 *    AVERAGE and out-of-place allreduce naming the transport, never fuses,
 *    and still runs unfused in-place operations;
 *  - a rank killed while device work is pending: the survivors' handles
 *    fail with PLAIT_ERR_PEER_LOST naming it, the plugin was interrupted,
 *    nothing hangs.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devsim_util.h"

TestSuite(device_failures, .init = plait_test_clear_env);

/* An in-place float32 SUM of 8 elements on the device, checked. */
static int sum_works(int rank, int n, const char *name) {
  float x[8];
  ops_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, rank, x, 8, 5);
  void *d = dv_upload(x, sizeof x);
  CHECK(d != NULL, "device allocation failed");
  plait_tensor_t t = dv_tensor(d, 8, PLAIT_FLOAT32);
  plait_handle_t *h;
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  CHECK(dv.to_host(x, d, sizeof x) == 0, "not readable");
  dv.free(d);
  double g, w;
  long bad = ops_check(PLAIT_FLOAT32, PLAIT_OP_SUM, n, x, 8, 5, 1, 1, &g, &w);
  CHECK(bad < 0, "%s: element %ld is %g, expected %g", name, bad, g, w);
  return 0;
}

/* DEVSIM_DEVICE=5: the transport's device is 5. */
static int placement_body(int rank, int n, void *arg) {
  (void)arg;
  CHECK(dv_device == 5, "DEVSIM_DEVICE did not reach the rank");
  float host[4] = {1, 2, 3, 4};
  plait_tensor_t th;
  plait_tensor_1d(&th, host, 4, PLAIT_FLOAT32);
  EXPECT_REFUSED("a host tensor on devsim",
                 plait_allreduce_async("pl/host", &th, &th, PLAIT_OP_SUM, NULL, &hp), "devsim");
  void *d = dv_upload(host, sizeof host);
  CHECK(d != NULL, "device allocation failed");
  plait_tensor_t t7 = dv_tensor(d, 4, PLAIT_FLOAT32);
  t7.device = 7;
  EXPECT_REFUSED("a tensor on device 7, devsim on 5",
                 plait_allreduce_async("pl/dev7", &t7, &t7, PLAIT_OP_SUM, NULL, &hp), "7", "5");
  EXPECT_REFUSED("an allgather on device 7, devsim on 5",
                 plait_allgather_async("pl/dev7g", &t7, NULL, &hp), "7", "5");
  dv.free(d);
  return sum_works(rank, n, "pl/after");
}

Test(device_failures, host_tensor_and_other_device_are_refused_by_name, .timeout = 120) {
  DV_REQUIRE();
  const char *env[] = {"DEVSIM_DEVICE=5", NULL};
  cr_expect_eq(dv_run(2, env, 90, placement_body, NULL), 0, "a rank failed (above)");
}

/* DEVSIM_NO_BATCH=1. */
static int no_batch_body(int rank, int n, void *arg) {
  (void)arg;
  float x[4] = {1, 2, 3, 4};
  void *d = dv_upload(x, sizeof x), *d2 = dv_upload(x, sizeof x);
  CHECK(d && d2, "device allocation failed");
  plait_tensor_t t = dv_tensor(d, 4, PLAIT_FLOAT32), t2 = dv_tensor(d2, 4, PLAIT_FLOAT32);
  plait_op_options_t pre = PLAIT_OP_OPTIONS_INIT, post = PLAIT_OP_OPTIONS_INIT;
  pre.prescale_factor = 2.0, post.postscale_factor = 0.5;
  EXPECT_REFUSED("prescale without batch_copy",
                 plait_allreduce_async("nb/pre", &t, &t, PLAIT_OP_SUM, &pre, &hp), "devsim");
  EXPECT_REFUSED("postscale without batch_copy",
                 plait_allreduce_async("nb/post", &t, &t, PLAIT_OP_SUM, &post, &hp), "devsim");
  EXPECT_REFUSED("AVERAGE without batch_copy",
                 plait_allreduce_async("nb/avg", &t, &t, PLAIT_OP_AVERAGE, NULL, &hp), "devsim");
  EXPECT_REFUSED("out of place without batch_copy",
                 plait_allreduce_async("nb/oop", &t, &t2, PLAIT_OP_SUM, NULL, &hp), "devsim");
  dv.free(d), dv.free(d2);
  if (sum_works(rank, n, "nb/sum")) return 1;
  /* several tensors at once: never one fused response; either each runs
   * on its own or the group is refused naming the transport */
  enum { G = 3 };
  void *g[G];
  plait_tensor_t tg[G];
  const char *names[G] = {"nb/g0", "nb/g1", "nb/g2"};
  for (int i = 0; i < G; i++) {
    ops_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, rank, x, 4, 30u + (unsigned)i);
    CHECK((g[i] = dv_upload(x, sizeof x)) != NULL, "device allocation failed");
    tg[i] = dv_tensor(g[i], 4, PLAIT_FLOAT32);
  }
  plait_stats_t s0, s1;
  OK(ops_stats(&s0));
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_grouped_allreduce_async(G, names, tg, tg, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 60);
  plait_release(h);
  if (rc != PLAIT_SUCCESS)
    CHECK(strstr(plait_last_error(), "devsim") != NULL, "group refused: %s: \"%s\" does not name "
          "the transport", plait_result_name(rc), plait_last_error());
  OK(ops_stats(&s1));
  CHECK(s1.fused_responses == s0.fused_responses, "a fused response without batch_copy");
  for (int i = 0; i < G && rc == PLAIT_SUCCESS; i++) {
    CHECK(dv.to_host(x, g[i], sizeof x) == 0, "not readable");
    double gv, w;
    long bad = ops_check(PLAIT_FLOAT32, PLAIT_OP_SUM, n, x, 4, 30u + (unsigned)i, 1, 1, &gv, &w);
    CHECK(bad < 0, "%s: element %ld is %g, expected %g", names[i], bad, gv, w);
  }
  for (int i = 0; i < G; i++) dv.free(g[i]);
  return 0;
}

Test(device_failures, without_batch_copy_scaling_average_and_fusion_are_refused,
     .timeout = 120) {
  DV_REQUIRE();
  const char *env[] = {"DEVSIM_NO_BATCH=1", NULL};
  cr_expect_eq(dv_run(2, env, 90, no_batch_body, NULL), 0, "a rank failed (above)");
}
Test(device_failures, sync_without_batch_copy_scaling_average_and_fusion_are_refused,
     .timeout = 120) {
  DV_REQUIRE();
  const char *env[] = {"DEVSIM_NO_BATCH=1", "DEVSIM_SYNC=1", NULL};
  cr_expect_eq(dv_run(2, env, 90, no_batch_body, NULL), 0, "a rank failed (above)");
}

/* ------------------------------------------------------------------------ */
/* A rank lost while device work is pending                                  */
/* ------------------------------------------------------------------------ */

#define VICTIM 2

/* Every rank: a good allreduce, then, with completions held, one more that
 * reaches the transport everywhere; the victim then dies. */
static int loss_rank(int rank, int n, void *arg) {
  atomic_int *survivors_done = arg;
  char err[512];
  if (devsim_api_load(DEVSIM_SO, &dv, err, sizeof err)) {
    plait_test_say(rank, "cannot load devsim's helpers: %s", err);
    return 1;
  }
  dv_device = rank;
  OK(plait_init());
  if (sum_works(rank, n, "ls/warm")) return 1;
  float x[8] = {0};
  void *d = dv_upload(x, sizeof x);
  CHECK(d != NULL, "device allocation failed");
  plait_tensor_t t = dv_tensor(d, 8, PLAIT_FLOAT32);
  devsim_counters_t c0 = dv_counters();
  dv.gate(1);
  plait_handle_t *h;
  OK(plait_allreduce_async("ls/pending", &t, &t, PLAIT_OP_SUM, NULL, &h));
  CHECK(dv_await_collectives(c0.collectives + 1, 30), "the collective never reached the transport");
  if (rank == VICTIM) { /* once its collective ran everywhere: only the completions are held */
    double until = ops_now() + 30;
    while (dv_counters().collectives_run <= c0.collectives_run && ops_now() < until)
      ops_sleep(0.002);
    raise(SIGKILL);
  }
  plait_result_t rc = plait_wait(h, 60);
  char victim[16];
  snprintf(victim, sizeof victim, "rank %d", VICTIM);
  plait_test_say(rank, "pending device allreduce: %s: \"%s\"", plait_result_name(rc),
                 plait_last_error());
  CHECK(rc == PLAIT_ERR_PEER_LOST, "the pending operation ended with %s, not PEER_LOST",
        plait_result_name(rc));
  CHECK(strstr(plait_last_error(), victim) != NULL, "the failure does not name %s", victim);
  plait_release(h);
  double until = ops_now() + 15;
  while (dv_counters().interrupt_calls == 0 && ops_now() < until) ops_sleep(0.01);
  CHECK(dv_counters().interrupt_calls == 1, "interrupt called %llu times",
        (unsigned long long)dv_counters().interrupt_calls);
  CHECK(dv.last_interrupt(NULL, 0) == PLAIT_ERR_PEER_LOST, "interrupt with %s",
        plait_result_name(dv.last_interrupt(NULL, 0)));
  dv.gate(0);
  plait_handle_t *h2 = NULL;
  rc = plait_allreduce_async("ls/later", &t, &t, PLAIT_OP_SUM, NULL, &h2);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h2, 60), plait_release(h2);
  CHECK(rc == PLAIT_ERR_PEER_LOST, "an operation after the loss: %s", plait_result_name(rc));
  atomic_fetch_add(survivors_done, 1);
  rc = plait_shutdown();
  plait_test_say(rank, "plait_shutdown after the loss: %s", plait_result_name(rc));
  dv.free(d);
  long live = dv.live_allocations();
  CHECK(live == 0, "%ld device allocation(s) of the core live after plait_shutdown", live);
  return 0;
}

Test(device_failures, rank_killed_with_device_work_pending_fails_the_survivors,
     .timeout = 120) {
  DV_REQUIRE();
  atomic_int *done = mmap(NULL, sizeof *done, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(done != MAP_FAILED);
  atomic_store(done, 0);
  const char *env[] = {"PLAIT_TIMEOUT_S=5", "PLAIT_TRANSPORT=devsim", NULL};
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = 3, job.timeout_s = 90, job.env = env;
  plait_test_run_ranks(&job, loss_rank, done);
  for (int r = 0; r < 3; r++)
    if (r != VICTIM) cr_expect_eq(job.exit_code[r], 0, "rank %d failed (above)", r);
  cr_expect_eq(atomic_load(done), 2, "survivors that got through: %d", atomic_load(done));
  munmap(done, sizeof *done);
}
