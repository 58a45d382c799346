/*
 * The device path under threads, without Criterion (which cannot start under
 * ThreadSanitizer): ci/test runs it in the TSan build, where the devsim
 * plugin's completion thread calling into the core (notify's done) while
 * the coordinator and API threads work, and outputs freed by plait_release
 * on API threads (mem_free from any thread), are checked for data races.
 *
 * 3 ranks on the "devsim" test transport (tests/plugins/fixtures/devsim.c: a GPU
 * transport simulated on the host). Per rank, THREADS threads each run
 * ITERS rounds of: allreduces on device tensors (SUM with a postscale,
 * AVERAGE, MAX; several at once so that some fuse), one whose input is
 * written late on the thread's own user stream, and an allgather whose
 * device output is read back and freed by plait_release. Results are
 * checked; every device allocation must be freed by plait_shutdown.
 * Prints "N passed, M failed" last.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVSIM_API_LOADER
#include "../plugins/fixtures/devsim.h"
#include "plait/plait.h"
#include "ranks.h"

enum { RANKS = 3, THREADS = 3, ITERS = 12, N = 24 };

#define SO PLAIT_TEST_PLUGIN_DIR "/libplait-transport-devsim.so"

static devsim_api_t dv;

typedef struct {
  int rank, thread, errors;
} worker_t;

static plait_tensor_t dtensor(void *d, size_t n, int rank) {
  plait_tensor_t t;
  plait_tensor_1d(&t, d, n, PLAIT_FLOAT32);
  t.device = rank; /* devsim's device: the local rank */
  return t;
}

static int fail(worker_t *w, const char *what, plait_result_t rc) {
  fprintf(stderr, "rank %d thread %d: %s: %s: %s\n", w->rank, w->thread, what,
          plait_result_name(rc), plait_last_error());
  return 1;
}

/* Three allreduces at once (SUM x0.5, AVERAGE, MAX), the first one's input
 * written late on the thread's stream; 0 when all were right. */
static int allreduces(worker_t *w, int it, void *stream) {
  static const plait_op_t ops[3] = {PLAIT_OP_SUM, PLAIT_OP_AVERAGE, PLAIT_OP_MAX};
  float x[N], old[N];
  void *d[3];
  plait_handle_t *h[3];
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < N; i++) x[i] = (float)(w->rank * 4 + i % 5 + k), old[i] = -100.0f;
    d[k] = dv.alloc(sizeof x);
    if (!d[k]) return fail(w, "alloc", PLAIT_ERR_NO_MEMORY);
    if (k == 0) {
      dv.to_device(d[k], old, sizeof old);
      dv.stream_enqueue_write(stream, d[k], x, sizeof x, 2);
    } else {
      dv.to_device(d[k], x, sizeof x);
    }
    plait_tensor_t t = dtensor(d[k], N, w->rank);
    plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
    if (k == 0) o.postscale_factor = 0.5, o.stream = stream;
    char name[64];
    snprintf(name, sizeof name, "ar.%d.%d.%d", w->thread, it, k);
    plait_result_t rc = plait_allreduce_async(name, &t, &t, ops[k], &o, &h[k]);
    if (rc) return fail(w, name, rc);
  }
  int errors = 0;
  for (int k = 0; k < 3; k++) {
    plait_result_t rc = plait_wait(h[k], 120);
    plait_release(h[k]);
    if (rc) errors += fail(w, "allreduce", rc);
    dv.to_host(x, d[k], sizeof x);
    dv.free(d[k]);
    for (int i = 0; i < N && !rc; i++) {
      float sum = 0, max = -1e9f;
      for (int r = 0; r < RANKS; r++) {
        float v = (float)(r * 4 + i % 5 + k);
        sum += v, max = v > max ? v : max;
      }
      float want = k == 0 ? sum * 0.5f : k == 1 ? sum / RANKS : max;
      if (x[i] != want) {
        fprintf(stderr, "rank %d thread %d: allreduce %d: x[%d] = %g, expected %g\n", w->rank,
                w->thread, k, i, x[i], want);
        errors++;
        break;
      }
    }
  }
  return errors;
}

/* An allgather whose output (device memory) is read and freed here. */
static int allgather(worker_t *w, int it) {
  float x[4] = {(float)w->rank, 1, 2, 3}, got[4 * RANKS];
  void *d = dv.alloc(sizeof x);
  if (!d) return fail(w, "alloc", PLAIT_ERR_NO_MEMORY);
  dv.to_device(d, x, sizeof x);
  plait_tensor_t t = dtensor(d, 4, w->rank), out;
  char name[64];
  snprintf(name, sizeof name, "ag.%d.%d", w->thread, it);
  plait_handle_t *h;
  plait_result_t rc = plait_allgather_async(name, &t, NULL, &h);
  if (rc) return fail(w, name, rc);
  rc = plait_wait(h, 120);
  int errors = rc ? fail(w, name, rc) : 0;
  if (!rc && (plait_handle_output(h, &out) || dv.to_host(got, out.data, sizeof got))) {
    fprintf(stderr, "rank %d: %s: output not readable as device memory\n", w->rank, name);
    errors++;
  }
  for (int r = 0; r < RANKS && !rc && !errors; r++)
    if (got[4 * r] != (float)r) errors++;
  plait_release(h); /* frees the device output on this thread */
  dv.free(d);
  return errors;
}

static void *work(void *arg) {
  worker_t *w = arg;
  void *stream = dv.stream_create();
  for (int it = 0; it < ITERS && !w->errors; it++) {
    w->errors += allreduces(w, it, stream);
    w->errors += allgather(w, it);
  }
  dv.stream_destroy(stream);
  return NULL;
}

static int rank_main(int rank, int size, void *arg) {
  (void)arg, (void)size;
  char err[512];
  if (devsim_api_load(SO, &dv, err, sizeof err)) {
    fprintf(stderr, "rank %d: %s\n", rank, err);
    return 1;
  }
  if (plait_init() != PLAIT_SUCCESS) {
    fprintf(stderr, "rank %d: init: %s\n", rank, plait_last_error());
    return 1;
  }
  pthread_t th[THREADS];
  worker_t w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker_t){rank, i, 0};
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  int errors = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    errors += w[i].errors;
  }
  if (plait_shutdown() != PLAIT_SUCCESS) errors++;
  long live = dv.live_allocations();
  if (live) {
    fprintf(stderr, "rank %d: %ld device allocations live after plait_shutdown\n", rank, live);
    errors++;
  }
  return errors ? 1 : 0;
}

int main(void) {
  FILE *f = fopen(SO, "rb");
  if (!f) {
    printf("stress_device: skipped: no %s\n", SO);
    return 77;
  }
  fclose(f);
  const char *env[] = {"PLAIT_TRANSPORT=devsim", "PLAIT_TIMEOUT_S=60", NULL};
  plait_test_job_t job = {.nranks = RANKS, .timeout_s = 300, .env = env};
  int failed = plait_test_run_ranks(&job, rank_main, NULL);
  int passed = 0;
  for (int r = 0; r < RANKS; r++) passed += job.exit_code[r] == 0;
  printf("stress_device: %d ranks x %d threads x %d rounds of device allreduces (one on a late "
         "user stream) and allgathers on devsim\n", RANKS, THREADS, ITERS);
  printf("%d passed, %d failed\n", passed, RANKS - passed);
  return failed;
}
