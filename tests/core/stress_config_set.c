/*
 * plait_config_set while operations run, without Criterion (which cannot
 * start under ThreadSanitizer): ci/test runs it in the TSan build
 * (PLAIT_SANITIZE=thread), where a setting written by one thread while the
 * coordinator reads the configuration is reported as a data race.
 *
 * Each of 2 ranks runs 3 threads submitting allreduces (results checked) and
 * one thread that keeps changing every setting plait_config_set accepts
 * (fusion threshold, largest fused tensor, cycle time, log level, cycle
 * markers), reading the effective configuration and the statistics between
 * changes. Prints "N passed, M failed" last.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait/plait.h"
#include "ranks.h"

enum { RANKS = 2, THREADS = 3, ITERS = 150, N = 129 };

typedef struct {
  int rank, size, thread, errors;
} worker_t;

static atomic_int workers_left;

static void *work(void *arg) {
  worker_t *w = arg;
  float buf[N];
  for (int it = 0; it < ITERS && !w->errors; it++) {
    char name[64];
    snprintf(name, sizeof name, "t%d.i%d", w->thread, it);
    for (int i = 0; i < N; i++) buf[i] = (float)(w->rank + i % 5);
    plait_tensor_t t;
    plait_tensor_1d(&t, buf, N, PLAIT_FLOAT32);
    plait_handle_t *h;
    plait_result_t rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h);
    if (rc == PLAIT_SUCCESS) {
      rc = plait_wait(h, 120);
      plait_release(h);
    }
    if (rc) {
      fprintf(stderr, "rank %d thread %d: %s: %s\n", w->rank, w->thread, plait_result_name(rc),
              plait_last_error());
      w->errors++;
      break;
    }
    for (int i = 0; i < N; i++) {
      float want = (float)(w->size * (w->size - 1) / 2 + w->size * (i % 5));
      if (buf[i] != want) {
        fprintf(stderr, "rank %d thread %d %s[%d] = %g, expected %g\n", w->rank, w->thread, name,
                i, buf[i], want);
        w->errors++;
        break;
      }
    }
  }
  atomic_fetch_sub(&workers_left, 1);
  return NULL;
}

/* Every variable plait_config_set accepts while running, with values that
 * keep the job working. */
static const struct {
  const char *name;
  const char *values[3];
} settings[] = {
    {"PLAIT_FUSION_THRESHOLD", {"0", "4K", "64M"}},
    {"PLAIT_FUSION_MAX_TENSOR", {"0", "1K", "1M"}},
    {"PLAIT_CYCLE_TIME_MS", {"0.5", "2", "1"}},
    {"PLAIT_LOG_LEVEL", {"error", "warn", "error"}},
    {"PLAIT_TIMELINE_MARK_CYCLES", {"1", "0", "1"}},
};

static void *tune(void *arg) {
  int *errors = arg;
  char dump[16384];
  for (unsigned k = 0; atomic_load(&workers_left) > 0; k++) {
    size_t i = k % (sizeof settings / sizeof settings[0]);
    const char *v = settings[i].values[(k / 5) % 3];
    if (plait_config_set(settings[i].name, v) != PLAIT_SUCCESS) {
      fprintf(stderr, "config_set %s=%s: %s\n", settings[i].name, v, plait_last_error());
      (*errors)++;
      return NULL;
    }
    plait_stats_t st = {.struct_size = sizeof st};
    size_t needed = 0;
    if (plait_config_dump(dump, sizeof dump, &needed) || plait_stats(&st)) {
      fprintf(stderr, "config_dump or stats: %s\n", plait_last_error());
      (*errors)++;
      return NULL;
    }
  }
  return NULL;
}

static int rank_main(int rank, int size, void *arg) {
  (void)arg;
  if (plait_init() != PLAIT_SUCCESS) {
    fprintf(stderr, "rank %d: init: %s\n", rank, plait_last_error());
    return 1;
  }
  atomic_store(&workers_left, THREADS);
  pthread_t th[THREADS], tuner;
  worker_t w[THREADS];
  int errors = 0, tune_errors = 0;
  pthread_create(&tuner, NULL, tune, &tune_errors);
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker_t){rank, size, i, 0};
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    errors += w[i].errors;
  }
  pthread_join(tuner, NULL);
  errors += tune_errors;
  if (plait_shutdown() != PLAIT_SUCCESS) errors++;
  return errors ? 1 : 0;
}

int main(void) {
  plait_test_job_t job = {.nranks = RANKS, .timeout_s = 300};
  int failed = plait_test_run_ranks(&job, rank_main, NULL);
  int passed = 0;
  for (int r = 0; r < RANKS; r++) passed += job.exit_code[r] == 0;
  printf("stress_config_set: %d ranks x %d threads x %d operations, settings changed meanwhile\n",
         RANKS, THREADS, ITERS);
  printf("%d passed, %d failed\n", passed, RANKS - passed);
  return failed;
}
