/*
 * Multi-rank engine tests without fork: N engines in this process, a thread
 * per rank, over real loopback sockets (tests/harness/engines.h). Each job
 * takes milliseconds; the same public C ABI as the forked tests, called on
 * each rank's thread.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
 * ranks shut down; afterwards every call says plait is not initialized. The
 * others shut down only once rank 0 has submitted: a shutdown that reached
 * rank 0 first failed the submission itself (seen under ctest -j2). */
static atomic_int g_submitted;
static int shutdown_body(int rank, int n, void *arg) {
  (void)n, (void)arg;
  float x[4] = {1, 2, 3, 4};
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  RANK_OK(plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32));
  if (rank == 0) {
    plait_result_t rc0 = plait_allreduce_async("lonely", &t, &t, PLAIT_OP_SUM, NULL, &h);
    atomic_store(&g_submitted, 1); /* failed or not: the others must not wait forever */
    RANK_CHECK(rc0 == PLAIT_SUCCESS, "plait_allreduce_async: %s: %s", plait_result_name(rc0),
               plait_last_error());
  }
  while (!atomic_load(&g_submitted)) usleep(1000);
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
  atomic_store(&g_submitted, 0);
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

/* ------------------------------------------------------------- dispatch */

/* A lone operation is not held for PLAIT_CYCLE_TIME_MS: at 10 s (the
 * largest allowed) each of these would wait about 10 s if it were, and the
 * 8 s wait would time out. Rank 1 submits later than the others each time,
 * so the operations also meet ranks that arrive at different times. */
static int lone_body(int rank, int n, void *arg) {
  (void)n, (void)arg;
  float x[1024];
  for (int step = 0; step < 3; step++) {
    for (int i = 0; i < 1024; i++) x[i] = (float)rank;
    if (rank == 1) usleep(20000);
    plait_tensor_t t;
    plait_handle_t *h;
    RANK_OK(plait_tensor_1d(&t, x, 1024, PLAIT_FLOAT32));
    RANK_OK(plait_allreduce_async("lone", &t, &t, PLAIT_OP_SUM, NULL, &h));
    plait_result_t rc = plait_wait(h, 8);
    RANK_CHECK(rc == PLAIT_SUCCESS, "step %d: a lone allreduce with PLAIT_CYCLE_TIME_MS=10000: %s: "
               "%s", step, plait_result_name(rc), plait_last_error());
    plait_release(h);
    RANK_CHECK(x[0] == (float)(n * (n - 1) / 2), "step %d: %g", step, x[0]);
  }
  return 0;
}

Test(inproc, a_lone_op_does_not_wait_out_the_cycle_time_3ranks, .timeout = 60) {
  REQUIRE_PLUGIN("gloo");
  const char *settings[] = {"PLAIT_CYCLE_TIME_MS=10000", NULL};
  plait_test_engines_t job = {.nranks = 3, .settings = settings};
  cr_assert_eq(plait_test_run_engines(&job, lone_body, NULL), 0, "a rank failed (above)");
}

/* A completion callback runs on the coordinator thread: holding it (a test's
 * liberty; callbacks must not block) until the rank's main thread has
 * submitted a whole burst makes the coordinator drain and announce that
 * burst at once, so every rank's announcement is complete in one message and
 * the burst runs as one list. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int entered, open;
} gate_t;

static void gate_cb(plait_handle_t *h, plait_result_t rc, void *user) {
  (void)h, (void)rc;
  gate_t *g = user;
  pthread_mutex_lock(&g->mu);
  g->entered = 1;
  pthread_cond_broadcast(&g->cv);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

enum { BURST = 5, BURST_COUNT = 256 };

static int submit_burst(int rank, float (*x)[BURST_COUNT], plait_handle_t **h, int spread_us) {
  for (int k = 0; k < BURST; k++) {
    char name[32];
    snprintf(name, sizeof name, "burst.%d", k);
    for (int i = 0; i < BURST_COUNT; i++) x[k][i] = (float)(rank + k);
    plait_tensor_t t;
    RANK_OK(plait_tensor_1d(&t, x[k], BURST_COUNT, PLAIT_FLOAT32));
    RANK_OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[k]));
    if (spread_us) usleep((useconds_t)spread_us);
  }
  return 0;
}

static int wait_burst(int rank, int n, float (*x)[BURST_COUNT], plait_handle_t **h) {
  for (int k = 0; k < BURST; k++) {
    RANK_OK(plait_wait(h[k], 30));
    plait_release(h[k]);
    float want = (float)(n * (n - 1) / 2 + n * k);
    RANK_CHECK(x[k][0] == want, "burst.%d = %g, expected %g", k, x[k][0], want);
  }
  return 0;
}

/* Step 1 runs a burst as one list (the gate above). Step 2 submits the same
 * names 20 ms apart: rank 0 holds the first ones until their companions are
 * ready (PLAIT_CYCLE_TIME_MS=10000 bounds the hold), so they still fuse into
 * one collective, the same on every rank, and the coordinators sleep while
 * they wait (a few cycles, not a spin). */
static int burst_body(int rank, int n, void *arg) {
  (void)arg;
  static _Thread_local float x[BURST][BURST_COUNT];
  plait_handle_t *h[BURST], *gh;
  gate_t g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.callback = gate_cb;
  o.user_data = &g;
  float one = 1;
  plait_tensor_t t;
  RANK_OK(plait_tensor_1d(&t, &one, 1, PLAIT_FLOAT32));
  RANK_OK(plait_allreduce_async("gate", &t, &t, PLAIT_OP_SUM, &o, &gh));
  pthread_mutex_lock(&g.mu);
  while (!g.entered) pthread_cond_wait(&g.cv, &g.mu); /* the coordinator is held */
  pthread_mutex_unlock(&g.mu);
  if (submit_burst(rank, x, h, 0)) return 1;
  pthread_mutex_lock(&g.mu);
  g.open = 1;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  RANK_OK(plait_wait(gh, 30));
  plait_release(gh);
  if (wait_burst(rank, n, x, h)) return 1;

  plait_stats_t a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
  RANK_OK(plait_stats(&a));
  if (submit_burst(rank, x, h, 20000) || wait_burst(rank, n, x, h)) return 1;
  RANK_OK(plait_stats(&b));
  uint64_t responses = b.responses - a.responses, fused = b.fused_tensors - a.fused_tensors;
  uint64_t cycles = b.cycles - a.cycles;
  RANK_CHECK(responses == 1 && fused == BURST, "a burst submitted 20 ms apart ran as %llu "
             "collective(s), %llu tensors fused; expected 1 and %d", (unsigned long long)responses,
             (unsigned long long)fused, BURST);
  RANK_CHECK(cycles < 200, "%llu coordinator cycles while a burst of %d was held: a spin",
             (unsigned long long)cycles, BURST);
  return 0;
}

Test(inproc, a_burst_held_for_its_companions_fuses_3ranks, .timeout = 90) {
  REQUIRE_PLUGIN("gloo");
  const char *settings[] = {"PLAIT_CYCLE_TIME_MS=10000", NULL};
  plait_test_engines_t job = {.nranks = 3, .settings = settings};
  cr_assert_eq(plait_test_run_engines(&job, burst_body, NULL), 0, "a rank failed (above)");
}

/* An idle coordinator sleeps in poll: a few cycles per second at most. */
static int idle_body(int rank, int n, void *arg) {
  (void)n, (void)arg;
  plait_handle_t *h;
  RANK_OK(plait_barrier_async(NULL, &h));
  RANK_OK(plait_wait(h, 30));
  plait_release(h);
  plait_stats_t a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
  RANK_OK(plait_stats(&a));
  usleep(300000);
  RANK_OK(plait_stats(&b));
  RANK_CHECK(b.cycles - a.cycles < 20, "%llu coordinator cycles in 0.3 s of idleness",
             (unsigned long long)(b.cycles - a.cycles));
  return 0;
}

Test(inproc, an_idle_coordinator_sleeps_2ranks, .timeout = 60) {
  REQUIRE_PLUGIN("gloo");
  plait_test_engines_t job = {.nranks = 2};
  cr_assert_eq(plait_test_run_engines(&job, idle_body, NULL), 0, "a rank failed (above)");
}
