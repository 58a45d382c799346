/*
 * Multi-rank engine tests without fork: N engines in this process, a thread
 * per rank, over real loopback sockets (tests/common/engines.h). Each job
 * takes milliseconds; the same public C ABI as the forked tests, called on
 * each rank's thread.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "engines.h"
#include "plait/plait.h"

static int plugin_built(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/libplait-transport-%s.so", PLAIT_TEST_LIB_DIR, name);
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

#define REQUIRE_PLUGIN(name)                                                   \
  do {                                                                         \
    if (!plugin_built(name))                                                   \
      cr_skip_test("the %s transport plugin was not built here: no %s/libplait-transport-%s.so", \
                   name, PLAIT_TEST_LIB_DIR, name);                            \
  } while (0)

#define RANK_OK(call)                                                          \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS) {                                                \
      plait_test_say(rank, "%s:%d: %s -> %s: %s", __FILE__, __LINE__, #call,   \
                     plait_result_name(rc_), plait_last_error());              \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define RANK_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      plait_test_say(rank, "%s:%d: %s: ", __FILE__, __LINE__, #cond);          \
      plait_test_say(rank, __VA_ARGS__);                                       \
      return 1;                                                                \
    }                                                                          \
  } while (0)

/* Each rank sees its own engine: rank and size, then allreduces (some fused)
 * of rank + i, checked. */
static int allreduce_body(int rank, int n, void *arg) {
  (void)arg;
  int r = -1, size = -1;
  RANK_OK(plait_rank(&r));
  RANK_OK(plait_size(&size));
  RANK_CHECK(r == rank && size == n, "plait_rank %d, plait_size %d on rank %d of %d", r, size,
             rank, n);
  enum { T = 8, N = 100 };
  static _Thread_local float x[T][N];
  plait_handle_t *h[T];
  for (int k = 0; k < T; k++) {
    char name[32];
    snprintf(name, sizeof name, "grad.%d", k);
    for (int i = 0; i < N; i++) x[k][i] = (float)(rank + i + k);
    plait_tensor_t t;
    RANK_OK(plait_tensor_1d(&t, x[k], N, PLAIT_FLOAT32));
    RANK_OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[k]));
  }
  for (int k = 0; k < T; k++) {
    RANK_OK(plait_wait(h[k], 30));
    plait_release(h[k]);
    for (int i = 0; i < N; i++) {
      float want = (float)(n * (n - 1) / 2 + n * (i + k));
      RANK_CHECK(x[k][i] == want, "grad.%d[%d] = %g, expected %g", k, i, x[k][i], want);
    }
  }
  plait_stats_t st = {.struct_size = sizeof st};
  RANK_OK(plait_stats(&st));
  RANK_CHECK(st.tensors == T, "this rank's engine counted %llu tensors, %d ran",
             (unsigned long long)st.tensors, T);
  return 0;
}

static void allreduce_3ranks(const char *transport) {
  plait_test_engines_t job = {.nranks = 3, .transport = transport};
  cr_assert_eq(plait_test_run_engines(&job, allreduce_body, NULL), 0, "a rank failed (above)");
  cr_log_info("3 in-process ranks over %s: %.1f ms from start to the last engine freed",
              transport, job.elapsed_s * 1e3);
}

Test(inproc, allreduce_3ranks_gloo, .timeout = 60) {
  REQUIRE_PLUGIN("gloo");
  allreduce_3ranks("gloo");
}

Test(inproc, allreduce_3ranks_ofi, .timeout = 60) {
  REQUIRE_PLUGIN("ofi");
  allreduce_3ranks("ofi");
}

/* Same name, different shapes: every rank gets PLAIT_ERR_MISMATCH naming the
 * tensor; the job goes on. */
static int mismatch_body(int rank, int n, void *arg) {
  (void)n, (void)arg;
  float x[8] = {0};
  plait_tensor_t t;
  plait_handle_t *h;
  RANK_OK(plait_tensor_1d(&t, x, rank == 1 ? 8 : 4, PLAIT_FLOAT32));
  RANK_OK(plait_allreduce_async("odd", &t, &t, PLAIT_OP_SUM, NULL, &h));
  plait_result_t rc = plait_wait(h, 30);
  RANK_CHECK(rc == PLAIT_ERR_MISMATCH && strstr(plait_last_error(), "odd"),
             "wait: %s: %s", plait_result_name(rc), plait_last_error());
  plait_release(h);
  RANK_OK(plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32));
  RANK_OK(plait_allreduce_async("even", &t, &t, PLAIT_OP_SUM, NULL, &h));
  RANK_OK(plait_wait(h, 30));
  plait_release(h);
  return 0;
}

Test(inproc, mismatch_fails_on_every_rank_3ranks, .timeout = 60) {
  REQUIRE_PLUGIN("gloo");
  plait_test_engines_t job = {.nranks = 3};
  cr_assert_eq(plait_test_run_engines(&job, mismatch_body, NULL), 0, "a rank failed (above)");
}

/* An operation only rank 0 submitted fails with PLAIT_ERR_SHUTDOWN when the
 * ranks shut down; afterwards every call says plait is not initialized. */
static int shutdown_body(int rank, int n, void *arg) {
  (void)n, (void)arg;
  float x[4] = {1, 2, 3, 4};
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  RANK_OK(plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32));
  if (rank == 0) RANK_OK(plait_allreduce_async("lonely", &t, &t, PLAIT_OP_SUM, NULL, &h));
  RANK_OK(plait_shutdown());
  if (h) {
    plait_result_t rc = plait_wait(h, 30);
    RANK_CHECK(rc == PLAIT_ERR_SHUTDOWN, "pending at shutdown: %s: %s", plait_result_name(rc),
               plait_last_error());
    plait_release(h);
  }
  int init = 1;
  RANK_OK(plait_is_initialized(&init));
  RANK_CHECK(init == 0, "plait_is_initialized says %d after shutdown", init);
  plait_result_t rc = plait_allreduce_async("late", &t, &t, PLAIT_OP_SUM, NULL, &h);
  RANK_CHECK(rc == PLAIT_ERR_NOT_INITIALIZED, "after shutdown: %s", plait_result_name(rc));
  RANK_CHECK(plait_shutdown() == PLAIT_ERR_NOT_INITIALIZED, "a second shutdown");
  return 0;
}

Test(inproc, shutdown_fails_pending_and_later_calls_3ranks, .timeout = 60) {
  REQUIRE_PLUGIN("gloo");
  plait_test_engines_t job = {.nranks = 3};
  cr_assert_eq(plait_test_run_engines(&job, shutdown_body, NULL), 0, "a rank failed (above)");
}

/* Settings are per engine: a threshold set on one rank's engine is that
 * engine's, the others keep theirs. */
static int settings_body(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (rank == 1) RANK_OK(plait_config_set("PLAIT_FUSION_THRESHOLD", "4K"));
  plait_handle_t *h;
  RANK_OK(plait_barrier_async(NULL, &h)); /* rank 1 has set it by now */
  RANK_OK(plait_wait(h, 30));
  plait_release(h);
  char dump[16384];
  RANK_OK(plait_config_dump(dump, sizeof dump, NULL));
  const char *want = rank == 1 ? "PLAIT_FUSION_THRESHOLD=4096" : "PLAIT_FUSION_THRESHOLD=67108864";
  RANK_CHECK(strstr(dump, want), "rank %d's effective configuration lacks %s", rank, want);
  return 0;
}

Test(inproc, settings_belong_to_one_engine_3ranks, .timeout = 60) {
  REQUIRE_PLUGIN("gloo");
  plait_test_engines_t job = {.nranks = 3};
  cr_assert_eq(plait_test_run_engines(&job, settings_body, NULL), 0, "a rank failed (above)");
}
