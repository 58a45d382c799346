/*
 * A collective that fails in the transport of one live rank (issue 32, item
 * 4): no rank was lost, so every rank fails with PLAIT_ERR_TRANSPORT (never
 * PLAIT_ERR_PEER_LOST), and the message names the rank it failed on and its
 * reason. The failure comes from the "flaky" test transport
 * (tests/plugins/fixtures/flaky.c): the real transport, whose allreduce on rank
 * FLAKY_RANK fails at its FLAKY_AT-th call after the collective completed
 * everywhere. Before, a failure reported by rank > 0 became "rank 1 reported
 * that a collective failed in its transport" as PLAIT_ERR_PEER_LOST on every
 * rank, without its reason.
 *
 * The real transport is gloo, or the ofi plugin when PLAIT_TEST_TRANSPORT is
 * ofi (tests/CMakeLists.txt re-runs this on shm and tcp). Lost ranks keep
 * their PLAIT_ERR_PEER_LOST: test_failures.c, test_blame.c, tests/faults/chaos.
 */
#include <criterion/criterion.h>

#include "ops_util.h"

#define OPS 6 /* allreduces each rank runs; the bad rank's FLAKY_AT-th fails */

typedef struct {
  int bad; /* the rank whose transport fails */
} tb_case_t;

/* The job's first failure on this rank: every rank must get the same class,
 * naming the bad rank and the reason. */
static int check_failure(int rank, int bad, plait_result_t rc, const char *msg, const char *what) {
  char want[64];
  snprintf(want, sizeof want, "on rank %d", bad);
  CHECK(rc == PLAIT_ERR_TRANSPORT, "%s: %s, expected PLAIT_ERR_TRANSPORT (no rank was lost): %s",
        what, plait_result_name(rc), msg);
  CHECK(strstr(msg, want) && strstr(msg, "failed on purpose") && strstr(msg, "no rank was lost"),
        "%s: the message does not name rank %d and its reason: %s", what, bad, msg);
  return 0;
}

static int body(int rank, int n, void *arg) {
  const tb_case_t *c = arg;
  (void)n;
  plait_result_t first = PLAIT_SUCCESS;
  char msg[2048] = "";
  for (int i = 0; i < OPS && first == PLAIT_SUCCESS; i++) {
    float x[4] = {1, 2, 3, (float)rank};
    plait_tensor_t t;
    plait_handle_t *h = NULL;
    char name[32];
    snprintf(name, sizeof name, "tb/%d", i);
    OK(plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32));
    plait_result_t rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h);
    if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 60);
    if (rc != PLAIT_SUCCESS) first = rc, snprintf(msg, sizeof msg, "%s", plait_last_error());
    plait_release(h);
  }
  if (first != PLAIT_SUCCESS && check_failure(rank, c->bad, first, msg, "allreduce")) return 1;
  /* whoever finished its allreduces learns of the failure now */
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_barrier_async(NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 60);
  snprintf(msg, sizeof msg, "%s", plait_last_error());
  plait_release(h);
  if (check_failure(rank, c->bad, rc, msg, "the barrier after it")) return 1;
  return 0;
}

/* Each rank: init, body, shutdown (which reports the job's failure too). */
static int rank_main(int rank, int n, void *arg) {
  plait_result_t rc = plait_init();
  if (rc != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
    return 1;
  }
  int fails = body(rank, n, arg);
  rc = plait_shutdown();
  if (!fails && rc != PLAIT_ERR_TRANSPORT) {
    plait_test_say(rank, "plait_shutdown: %s, expected PLAIT_ERR_TRANSPORT: %s",
                   plait_result_name(rc), plait_last_error());
    fails = 1;
  }
  return fails;
}

static void run(int nranks, int bad) {
  OPS_REQUIRE_GLOO();
  const char *tr = getenv("PLAIT_TEST_TRANSPORT");
  int ofi = tr && !strcmp(tr, "ofi");
  char rank_var[32];
  snprintf(rank_var, sizeof rank_var, "FLAKY_RANK=%d", bad);
  const char *env[] = {"PLAIT_TRANSPORT=flaky",
                       ofi ? "FLAKY_INNER=" PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so"
                           : "FLAKY_INNER=" PLAIT_TEST_LIB_DIR "/libplait-transport-gloo.so",
                       rank_var, "FLAKY_AT=3", "PLAIT_TIMEOUT_S=15", NULL};
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = nranks;
  job.timeout_s = 120;
  job.env = env;
  tb_case_t c = {bad};
  cr_assert_eq(plait_test_run_ranks(&job, rank_main, &c), 0, "a rank failed (see above)");
}

Test(transport_blame, rank0_fails_2ranks, .timeout = 150) { run(2, 0); }
Test(transport_blame, rank1_fails_2ranks, .timeout = 150) { run(2, 1); }
Test(transport_blame, rank0_fails_3ranks, .timeout = 150) { run(3, 0); }
Test(transport_blame, rank2_fails_3ranks, .timeout = 150) { run(3, 2); }
