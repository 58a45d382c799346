/*
 * The fusion copies on a GPU (prints figures; checks nothing about time):
 * the nccl plugin's batched copy kernel, reached through its real
 * batch_copy entry (the plugin dlopened and initialised at size 1 by the
 * tests/harness/nccl_ranks.c launcher; never a copy of the kernel), against one
 * cudaMemcpyAsync per tensor, for copy-in (tensors -> fusion buffer) and
 * copy-out (fusion buffer -> tensors, also scaled by 0.5 as an average
 * finishes), on two gradient mixes: 200 x 64 KiB and ResNet-50's
 * (bench/mixes/resnet50.txt). Each is a fraction of the device's copy
 * bandwidth measured in the same run (one large device-to-device
 * cudaMemcpyAsync, read plus write bytes counted).
 *
 * Timing: K passes of a whole mix enqueued back to back, then one wait
 * (the plugin's notify, or its blocking return; cudaStreamSynchronize for
 * the memcpys), host wall time / K, so the launch cost per pass counts and a
 * wait's latency does not; the median of 11 such runs.
 *
 * Prints the goal (batched copy within 2x of the bandwidth limit for 64 KiB
 * tensors) as a PASS or MISS line. Before timing, one copy-in is checked
 * byte for byte. Exit 77 without a GPU, 1 on a failure.
 *
 *   nccl_copy_bench [mix-file ...]   default: bench/mixes/resnet50.txt
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_ranks.h"

#define RUNS 11
#define ALIGN 64 /* fusion buffer slots, as the core pads them (PLAIT_FUSION_ALIGN) */
#define MAX_TENSORS 4096

typedef struct mix {
  char name[64];
  size_t n;
  size_t bytes[MAX_TENSORS];
  size_t total; /* bytes, fusion layout included */
} mix_t;

typedef struct bench {
  const plait_transport_t *t;
  void *st;
  cudaStream_t stream;
  double bw; /* bytes/s, read + write */
} bench_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

static int read_mix(const char *path, mix_t *m) {
  FILE *f = fopen(path, "r");
  if (!f) {
    printf("nccl_copy_bench: cannot open %s\n", path);
    return 1;
  }
  const char *base = strrchr(path, '/');
  snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
  m->n = m->total = 0;
  char line[512], name[256], dtype[32], shape[128];
  unsigned long long b;
  while (fgets(line, sizeof line, f) && m->n < MAX_TENSORS) {
    if (line[0] == '#' || line[0] == '\n') continue;
    if (sscanf(line, "%255s %31s %127s %llu", name, dtype, shape, &b) != 4 ||
        strcmp(dtype, "float32")) {
      printf("nccl_copy_bench: %s: a line not 'name float32 shape bytes': %s", path, line);
      fclose(f);
      return 1;
    }
    m->bytes[m->n++] = (size_t)b;
    m->total += align_up((size_t)b);
  }
  fclose(f);
  return m->n == 0;
}

static void uniform_mix(mix_t *m) {
  snprintf(m->name, sizeof m->name, "200 x 64 KiB");
  m->n = 200;
  m->total = 0;
  for (size_t i = 0; i < m->n; i++) m->total += align_up(m->bytes[i] = 64 << 10);
}

/* ---- waiting for the plugin: notify's callback, or nothing when its
 * entries block */

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  plait_result_t rc;
} waiter_t;

static void on_done(void *ctx, plait_result_t rc, const char *msg) {
  waiter_t *w = ctx;
  if (rc != PLAIT_SUCCESS) printf("nccl_copy_bench: plugin work failed: %s\n", msg ? msg : "");
  pthread_mutex_lock(&w->mu);
  w->done = 1;
  w->rc = rc;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static int plugin_wait(const bench_t *b) {
  if (!PLAIT_TRANSPORT_HAS(b->t, notify)) return 0; /* batch_copy blocked */
  waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, PLAIT_SUCCESS};
  if (b->t->notify(b->st, on_done, &w) != PLAIT_SUCCESS) {
    printf("nccl_copy_bench: notify: %s\n", b->t->last_error(b->st));
    return 1;
  }
  pthread_mutex_lock(&w.mu);
  while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  return w.rc != PLAIT_SUCCESS;
}

/* ---- the three ways to move a mix */

/* Seconds per pass: K passes of n spans through batch_copy, one wait. */
static double time_batched(const bench_t *b, const plait_span_t *spans, size_t n, double factor,
                           int k) {
  double t0 = now_s();
  for (int i = 0; i < k; i++)
    if (b->t->batch_copy(b->st, spans, n, PLAIT_FLOAT32, PLAIT_OP_SUM, factor) != PLAIT_SUCCESS) {
      printf("nccl_copy_bench: batch_copy: %s\n", b->t->last_error(b->st));
      return -1;
    }
  if (plugin_wait(b)) return -1;
  return (now_s() - t0) / k;
}

/* Seconds per pass: K passes of one cudaMemcpyAsync per span. */
static double time_memcpy(const bench_t *b, const plait_span_t *spans, size_t n, int k) {
  double t0 = now_s();
  for (int i = 0; i < k; i++)
    for (size_t j = 0; j < n; j++)
      if (cudaMemcpyAsync(spans[j].dst, spans[j].src, spans[j].count * 4,
                          cudaMemcpyDeviceToDevice, b->stream) != cudaSuccess)
        return -1;
  if (cudaStreamSynchronize(b->stream) != cudaSuccess) return -1;
  return (now_s() - t0) / k;
}

/* The device's copy bandwidth: one 1 GiB device-to-device copy, read plus
 * write bytes, median of RUNS (CUDA events). */
static double device_bandwidth(cudaStream_t s) {
  size_t bytes = 1u << 30;
  void *a = NULL, *c = NULL;
  cudaEvent_t e0, e1;
  double v[RUNS], bw = -1;
  if (cudaMalloc(&a, bytes) || cudaMalloc(&c, bytes) || cudaMemset(a, 1, bytes) ||
      cudaEventCreate(&e0) || cudaEventCreate(&e1))
    goto cleanup;
  cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, s); /* warm-up */
  for (int r = 0; r < RUNS; r++) {
    float ms = 0;
    cudaEventRecord(e0, s);
    cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, s);
    cudaEventRecord(e1, s);
    if (cudaEventSynchronize(e1) || cudaEventElapsedTime(&ms, e0, e1)) goto cleanup;
    v[r] = 2.0 * (double)bytes / (ms * 1e-3);
  }
  bw = median(v, RUNS);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
cleanup:
  cudaFree(a);
  cudaFree(c);
  return bw;
}

/* ---- one mix */

typedef struct buffers {
  void *fusion;
  void *tensors[MAX_TENSORS];
  plait_span_t in[MAX_TENSORS], out[MAX_TENSORS];
} buffers_t;

static int make_buffers(const mix_t *m, buffers_t *bu) {
  memset(bu, 0, sizeof *bu);
  if (cudaMalloc(&bu->fusion, m->total) || cudaMemset(bu->fusion, 0, m->total)) return 1;
  size_t off = 0;
  for (size_t i = 0; i < m->n; i++) {
    if (cudaMalloc(&bu->tensors[i], m->bytes[i]) ||
        cudaMemset(bu->tensors[i], (int)(i * 37 + 1) & 0xff, m->bytes[i]))
      return 1;
    char *slot = (char *)bu->fusion + off;
    bu->in[i] = (plait_span_t){slot, bu->tensors[i], m->bytes[i] / 4};
    bu->out[i] = (plait_span_t){bu->tensors[i], slot, m->bytes[i] / 4};
    off += align_up(m->bytes[i]);
  }
  return cudaDeviceSynchronize() != cudaSuccess;
}

static void free_buffers(const mix_t *m, buffers_t *bu) {
  for (size_t i = 0; i < m->n; i++) cudaFree(bu->tensors[i]);
  cudaFree(bu->fusion);
}

/* One batched copy-in, checked byte for byte against the tensors. */
static int check_copy_in(const bench_t *b, const mix_t *m, buffers_t *bu) {
  if (b->t->batch_copy(b->st, bu->in, m->n, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0) != PLAIT_SUCCESS ||
      plugin_wait(b)) {
    printf("nccl_copy_bench: batch_copy: %s\n", b->t->last_error(b->st));
    return 1;
  }
  unsigned char *host = malloc(m->total);
  int bad = !host || cudaMemcpy(host, bu->fusion, m->total, cudaMemcpyDeviceToHost);
  size_t off = 0;
  for (size_t i = 0; !bad && i < m->n; i++) {
    for (size_t j = 0; j < m->bytes[i] && !bad; j++) bad = host[off + j] != ((i * 37 + 1) & 0xff);
    if (bad) printf("nccl_copy_bench: %s: tensor %zu not copied by batch_copy\n", m->name, i);
    off += align_up(m->bytes[i]);
  }
  free(host);
  return bad;
}

/* Prints one row: median seconds per pass and fraction of bandwidth. */
static double row(const bench_t *b, const mix_t *m, const char *what, double *v) {
  double s = median(v, RUNS), bytes = 0;
  for (size_t i = 0; i < m->n; i++) bytes += (double)m->bytes[i];
  double frac = 2.0 * bytes / s / b->bw;
  printf("  %-14s %-34s %10.1f us %9.1f GB/s %6.1f%% of the copy bandwidth\n", m->name, what,
         s * 1e6, 2.0 * bytes / s / 1e9, 100 * frac);
  return frac;
}

static int run_mix(const bench_t *b, const mix_t *m, int goal) {
  buffers_t *bu = malloc(sizeof *bu);
  int failed = !bu || make_buffers(m, bu) || check_copy_in(b, m, bu);
  double v[4][RUNS], frac[4] = {0};
  /* K: about 20 ms of copies per run at the device bandwidth. */
  int k = (int)(0.02 * b->bw / (2.0 * (double)m->total)) + 1;
  k = k > 1000 ? 1000 : k;
  for (int r = 0; r < RUNS && !failed; r++) {
    v[0][r] = time_batched(b, bu->in, m->n, 1.0, k);
    v[1][r] = time_memcpy(b, bu->in, m->n, k);
    v[2][r] = time_batched(b, bu->out, m->n, 1.0, k);
    v[3][r] = time_batched(b, bu->out, m->n, 0.5, k);
    for (int i = 0; i < 4; i++) failed |= v[i][r] < 0;
  }
  if (!failed) {
    printf("%s: %zu tensors, %zu bytes, %d passes per run\n", m->name, m->n, m->total, k);
    frac[0] = row(b, m, "copy-in, plugin batch_copy", v[0]);
    frac[1] = row(b, m, "copy-in, cudaMemcpyAsync per tensor", v[1]);
    frac[2] = row(b, m, "copy-out, plugin batch_copy", v[2]);
    frac[3] = row(b, m, "copy-out x 0.5, plugin batch_copy", v[3]);
    if (goal)
      for (int i = 0; i < 4; i += 2)
        printf("%s: batched %s of 64 KiB tensors at %.1f%% of the copy bandwidth "
               "(goal: within 2x, 50%% or more)\n", frac[i] >= 0.5 ? "PASS" : "MISS",
               i ? "copy-out" : "copy-in", 100 * frac[i]);
  }
  if (bu) free_buffers(m, bu);
  free(bu);
  return failed;
}

typedef struct args {
  int argc;
  char **argv;
} args_t;

static int body(int rank, int nranks, const plait_transport_t *t, void *st, void *arg) {
  (void)rank, (void)nranks;
  args_t *a = arg;
  if (!PLAIT_TRANSPORT_HAS(t, batch_copy)) {
    printf("nccl_copy_bench: the plugin has no batch_copy entry yet: nothing to measure\n");
    return 1;
  }
  bench_t b = {t, st, NULL, 0};
  if (cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking) ||
      (b.bw = device_bandwidth(b.stream)) <= 0) {
    printf("nccl_copy_bench: cannot measure the copy bandwidth\n");
    return 1;
  }
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("nccl_copy_bench: %s; copy bandwidth %.0f GB/s (1 GiB device-to-device "
         "cudaMemcpyAsync, read + write); medians of %d runs\n", prop.name, b.bw / 1e9, RUNS);
  static mix_t m;
  uniform_mix(&m);
  int failed = run_mix(&b, &m, 1);
  for (int i = 1; i < a->argc && !failed; i++)
    failed = read_mix(a->argv[i], &m) || run_mix(&b, &m, 0);
  cudaStreamDestroy(b.stream);
  return failed;
}

int main(int argc, char **argv) {
  char why[256];
  if (nt_device_count(why, sizeof why) < 1) {
    printf("SKIP: no GPU here: %s\n", why);
    return NT_SKIP;
  }
  static char *defaults[] = {NULL, PLAIT_BENCH_MIX_DEFAULT};
  args_t a = {argc, argv};
  if (argc < 2) a = (args_t){2, defaults};
  return nt_run(1, 600, body, &a) ? 1 : 0;
}
