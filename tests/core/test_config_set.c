/* plait_config_set: changing the fusion threshold, cycle time and log level
 * of a running job, as plait-bench does between settings, and its errors. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plait/plait.h"
#include "ranks.h"

#define TENSORS 40
#define COUNT 1024 /* 4 KiB each */

/* One batch of TENSORS allreduces in flight at once; returns the stats delta
 * (responses, fused responses) or -1. */
static int batch(int round, uint64_t *responses, uint64_t *fused) {
  static float data[TENSORS][COUNT];
  plait_handle_t *h[TENSORS];
  plait_stats_t before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
  if (plait_stats(&before)) return -1;
  for (int i = 0; i < TENSORS; i++) {
    char name[64];
    snprintf(name, sizeof name, "r%d.t%d", round, i);
    for (int j = 0; j < COUNT; j++) data[i][j] = 1.0f;
    plait_tensor_t t;
    plait_tensor_1d(&t, data[i], COUNT, PLAIT_FLOAT32);
    if (plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[i])) return -1;
  }
  for (int i = 0; i < TENSORS; i++) {
    if (plait_wait(h[i], 20)) return -1;
    plait_release(h[i]);
  }
  if (plait_stats(&after)) return -1;
  *responses = after.responses - before.responses;
  *fused = after.fused_responses - before.fused_responses;
  return 0;
}

static int all_ranks_set(const char *name, const char *value) {
  plait_handle_t *h;
  if (plait_barrier_async(NULL, &h) || plait_wait(h, 20)) return -1;
  plait_release(h);
  return plait_config_set(name, value) ? -1 : 0;
}

/* Holds the coordinator thread (a callback runs there; a test's liberty,
 * callbacks must not block) until the main thread has submitted a whole
 * batch, so that the batch is announced at once and runs as one list. */
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

#define SPREAD 5
static float spread_data[SPREAD][COUNT];

static int submit_spread(plait_handle_t **h, int gap_us) {
  for (int i = 0; i < SPREAD; i++) {
    char name[32];
    snprintf(name, sizeof name, "spread.%d", i);
    plait_tensor_t t;
    plait_tensor_1d(&t, spread_data[i], COUNT, PLAIT_FLOAT32);
    if (plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[i])) return -1;
    if (gap_us) usleep((useconds_t)gap_us);
  }
  return 0;
}

static int wait_spread(plait_handle_t **h) {
  for (int i = 0; i < SPREAD; i++) {
    if (plait_wait(h[i], 30)) return -1;
    plait_release(h[i]);
  }
  return 0;
}

/* The SPREAD tensors run once as one list (behind the gate). */
static int gated_batch(void) {
  gate_t g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.callback = gate_cb;
  o.user_data = &g;
  float one = 1;
  plait_tensor_t t;
  plait_handle_t *gh, *h[SPREAD];
  plait_tensor_1d(&t, &one, 1, PLAIT_FLOAT32);
  if (plait_allreduce_async("gate", &t, &t, PLAIT_OP_SUM, &o, &gh)) return -1;
  pthread_mutex_lock(&g.mu);
  while (!g.entered) pthread_cond_wait(&g.cv, &g.mu);
  pthread_mutex_unlock(&g.mu);
  int rc = submit_spread(h, 0);
  pthread_mutex_lock(&g.mu);
  g.open = 1;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  if (plait_wait(gh, 30)) rc = -1;
  plait_release(gh);
  return rc ? rc : wait_spread(h);
}

/* The cycle time changed while running is the one the coordinator uses. It
 * bounds how long rank 0 holds ready tensors back for the companions they
 * ran with last time. SPREAD tensors that ran together once, submitted
 * again 50 ms apart (200 ms in all), are held for each other under
 * PLAIT_CYCLE_TIME_MS=3000 and fused into one collective. At the default
 * 1 ms each would go nearly alone. */
static int spread_batch(int rank) {
  if (gated_batch() || all_ranks_set("PLAIT_CYCLE_TIME_MS", "3000")) return -1;
  plait_stats_t before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
  plait_handle_t *h[SPREAD];
  if (plait_stats(&before) || submit_spread(h, 50000) || wait_spread(h) || plait_stats(&after))
    return -1;
  uint64_t responses = after.responses - before.responses;
  plait_test_say(rank, "cycle time 3000 ms: %d tensors submitted 50 ms apart ran as %llu "
                 "collective(s)", SPREAD, (unsigned long long)responses);
  if (responses != 1) return -1;
  return all_ranks_set("PLAIT_CYCLE_TIME_MS", "50");
}

/* A runtime change of PLAIT_LOG_LEVEL takes effect: the coordinator's trace
 * line for each response ("exec" subsystem) appears at trace and not at
 * error. stderr goes to a file meanwhile. */
static int log_level_changes(int rank) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(2);
  if (!tmp || saved < 0 || dup2(fileno(tmp), 2) < 0) return -1;
  float x[4] = {0};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32);
  plait_handle_t *h;
  int bad = plait_config_set("PLAIT_LOG_LEVEL", "trace") ||
            plait_allreduce_async("loud", &t, &t, PLAIT_OP_SUM, NULL, &h) || plait_wait(h, 20);
  if (!bad) plait_release(h);
  bad = bad || plait_config_set("PLAIT_LOG_LEVEL", "error") ||
        plait_allreduce_async("quiet", &t, &t, PLAIT_OP_SUM, NULL, &h) || plait_wait(h, 20);
  if (!bad) plait_release(h);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[1 << 16];
  rewind(tmp);
  size_t n = fread(text, 1, sizeof text - 1, tmp);
  text[n] = '\0';
  fclose(tmp);
  if (bad) {
    plait_test_say(rank, "log level: %s", plait_last_error());
    return -1;
  }
  int loud = strstr(text, "TRACE exec] allreduce 'loud'") != NULL;
  int quiet = strstr(text, "'quiet'") == NULL;
  if (!loud || !quiet) {
    plait_test_say(rank, "log level: trace line for 'loud' %s, for 'quiet' %s; stderr was:\n%s",
                   loud ? "seen" : "missing", quiet ? "absent" : "present", text);
    return -1;
  }
  return 0;
}

static int body(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (plait_init()) return 1;
  uint64_t responses, fused;
  /* Fusion off: one collective per tensor. */
  if (all_ranks_set("PLAIT_FUSION_THRESHOLD", "0") || batch(0, &responses, &fused)) return 2;
  if (responses != TENSORS || fused != 0) {
    plait_test_say(rank, "threshold 0: %llu responses, %llu fused", (unsigned long long)responses,
                   (unsigned long long)fused);
    return 3;
  }
  /* 64M fuses a batch in flight at once. */
  if (all_ranks_set("PLAIT_FUSION_THRESHOLD", "64M") || batch(1, &responses, &fused))
    return 4;
  if (responses >= TENSORS / 2 || fused == 0) {
    plait_test_say(rank, "threshold 64M: %llu responses, %llu fused",
                   (unsigned long long)responses, (unsigned long long)fused);
    return 5;
  }
  /* 8 KiB fits two 4 KiB tensors per fused response at most. */
  if (all_ranks_set("PLAIT_FUSION_THRESHOLD", "8K") || batch(2, &responses, &fused)) return 6;
  if (responses < TENSORS / 2) {
    plait_test_say(rank, "threshold 8K: %llu responses", (unsigned long long)responses);
    return 7;
  }
  /* Tensors over PLAIT_FUSION_MAX_TENSOR run alone, whatever the threshold. */
  if (all_ranks_set("PLAIT_FUSION_THRESHOLD", "64M") ||
      all_ranks_set("PLAIT_FUSION_MAX_TENSOR", "2K") || batch(3, &responses, &fused))
    return 16;
  if (responses != TENSORS || fused != 0) {
    plait_test_say(rank, "max tensor 2K: %llu responses, %llu fused",
                   (unsigned long long)responses, (unsigned long long)fused);
    return 17;
  }
  if (all_ranks_set("PLAIT_FUSION_MAX_TENSOR", "4K") || batch(4, &responses, &fused)) return 18;
  if (responses >= TENSORS / 2 || fused == 0) {
    plait_test_say(rank, "max tensor 4K: %llu responses", (unsigned long long)responses);
    return 19;
  }
  if (spread_batch(rank) || all_ranks_set("PLAIT_FUSION_THRESHOLD", "8K")) return 20;
  char dump[4096];
  if (plait_config_dump(dump, sizeof dump, NULL) || !strstr(dump, "PLAIT_FUSION_THRESHOLD=8192\n") ||
      !strstr(dump, "PLAIT_CYCLE_TIME_MS=50\n"))
    return 8;
  /* Errors name what is wrong, and change nothing. */
  if (plait_config_set("PLAIT_FUSION_THRESHOLD", "64Q") != PLAIT_ERR_CONFIG ||
      !strstr(plait_last_error(), "PLAIT_FUSION_THRESHOLD='64Q'"))
    return 9;
  if (plait_config_set("PLAIT_TIMEOUT_S", "5") != PLAIT_ERR_UNSUPPORTED ||
      !strstr(plait_last_error(), "PLAIT_TIMEOUT_S cannot change"))
    return 10;
  if (plait_config_set("PLAIT_NOPE", "1") != PLAIT_ERR_CONFIG ||
      !strstr(plait_last_error(), "PLAIT_NOPE is not a plait variable"))
    return 11;
  if (plait_config_set(NULL, "1") != PLAIT_ERR_INVALID_ARGUMENT) return 12;
  if (plait_config_set("PLAIT_CYCLE_TIME_MS", "0") != PLAIT_ERR_CONFIG) return 13;
  /* A value of the right type outside the range (a hold of over a day). */
  if (plait_config_set("PLAIT_CYCLE_TIME_MS", "1e9") != PLAIT_ERR_CONFIG ||
      !strstr(plait_last_error(), "PLAIT_CYCLE_TIME_MS='1e9' is out of range") ||
      !strstr(plait_last_error(), "0.01 to 86400000"))
    return 22;
  if (log_level_changes(rank)) return 21;
  if (plait_config_dump(dump, sizeof dump, NULL) || !strstr(dump, "PLAIT_FUSION_THRESHOLD=8192\n") ||
      !strstr(dump, "PLAIT_CYCLE_TIME_MS=50\n"))
    return 14;
  return plait_shutdown() ? 15 : 0;
}

Test(config_set, retunes_fusion_of_a_running_job, .timeout = 90) {
  plait_test_job_t job = {.nranks = 2, .timeout_s = 80};
  cr_assert_eq(plait_test_run_ranks(&job, body, NULL), 0);
}

Test(config_set, refused_before_init) {
  plait_test_clear_env();
  cr_assert_eq(plait_config_set("PLAIT_FUSION_THRESHOLD", "1M"), PLAIT_ERR_NOT_INITIALIZED);
  cr_assert(strstr(plait_last_error(), "set PLAIT_FUSION_THRESHOLD in the environment"),
            "%s", plait_last_error());
}
