/*
 * fusion: what the fusion buffer does for a batch of small tensors.
 *
 *   plaitrun -np 2 build/bin/fusion [-k 200] [-s 65536] [-n 30] [-w 5]
 *   PLAIT_FUSION_THRESHOLD=0 plaitrun -np 2 build/bin/fusion      # unfused
 *
 * Each batch submits K float32 allreduces of S bytes at once (like the
 * gradients of one backward pass), then waits for all of them. Rank 0 prints
 * the time per batch (median and spread over N batches after W warm-up
 * batches) and, per batch, what the coordinator did: collectives run, tensors
 * per fused collective, fusion-buffer fill, and where the time went.
 */
#define _POSIX_C_SOURCE 200809L
#include <plait/plait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS) {                                                \
      fprintf(stderr, "fusion: %s failed: %s: %s\n", #call,                    \
              plait_result_name(rc_), plait_last_error());                     \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static long arg(int argc, char **argv, const char *flag, long def) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], flag)) return strtol(argv[i + 1], NULL, 0);
  return def;
}

/* The effective value of one variable, from plait_config_dump. */
static void config_value(const char *name, char *out, size_t cap) {
  size_t need = 0;
  plait_config_dump(NULL, 0, &need);
  char *all = malloc(need);
  snprintf(out, cap, "?");
  if (all && plait_config_dump(all, need, NULL) == PLAIT_SUCCESS) {
    char *p = strstr(all, name);
    if (p && (p = strchr(p, '='))) {
      size_t n = strcspn(p + 1, "\n");
      snprintf(out, cap, "%.*s", (int)n, p + 1);
    }
  }
  free(all);
}

static void run_batch(int k, size_t elems, float **bufs, plait_handle_t **hs, char (*names)[32]) {
  plait_tensor_t t;
  for (int i = 0; i < k; i++) {
    CHECK(plait_tensor_1d(&t, bufs[i], elems, PLAIT_FLOAT32));
    CHECK(plait_allreduce_async(names[i], &t, &t, PLAIT_OP_SUM, NULL, &hs[i]));
  }
  for (int i = 0; i < k; i++) {
    CHECK(plait_wait(hs[i], -1));
    plait_release(hs[i]);
  }
}

int main(int argc, char **argv) {
  int k = (int)arg(argc, argv, "-k", 200), n = (int)arg(argc, argv, "-n", 30);
  int warm = (int)arg(argc, argv, "-w", 5);
  size_t bytes = (size_t)arg(argc, argv, "-s", 65536), elems = bytes / sizeof(float);
  if (k < 1 || n < 1 || elems < 1) {
    fprintf(stderr, "usage: fusion [-k tensors] [-s bytes] [-n batches] [-w warmup]\n");
    return 2;
  }
  CHECK(plait_init());
  int rank, size;
  CHECK(plait_rank(&rank));
  CHECK(plait_size(&size));
  float **bufs = malloc(sizeof *bufs * (size_t)k);
  plait_handle_t **hs = malloc(sizeof *hs * (size_t)k);
  char (*names)[32] = malloc(sizeof *names * (size_t)k);
  for (int i = 0; i < k; i++) {
    bufs[i] = malloc(elems * sizeof(float));
    for (size_t j = 0; j < elems; j++) bufs[i][j] = 1.0f;
    snprintf(names[i], sizeof names[i], "grad.%d", i);
  }
  for (int b = 0; b < warm; b++) run_batch(k, elems, bufs, hs, names);
  plait_handle_t *bar;
  CHECK(plait_barrier_async(NULL, &bar));
  CHECK(plait_wait(bar, -1));
  plait_release(bar);
  CHECK(plait_stats_reset());
  double *times = malloc(sizeof *times * (size_t)n);
  for (int b = 0; b < n; b++) {
    double t0 = now();
    run_batch(k, elems, bufs, hs, names);
    times[b] = now() - t0;
  }
  plait_stats_t st = {.struct_size = sizeof st};
  CHECK(plait_stats(&st));
  qsort(times, (size_t)n, sizeof *times, cmp);
  char threshold[64], cycle[64], cache[64];
  const char *transport;
  config_value("PLAIT_FUSION_THRESHOLD", threshold, sizeof threshold);
  config_value("PLAIT_CYCLE_TIME_MS", cycle, sizeof cycle);
  config_value("PLAIT_CACHE_CAPACITY", cache, sizeof cache);
  CHECK(plait_transport_name(&transport));
  if (rank == 0) {
    double per = (double)n;
    double fill = st.fusion_capacity ? (double)st.fusion_bytes / (double)st.fusion_capacity : 0;
    printf("fusion: %d ranks, transport %s, %d x %zu-byte float32 allreduces per batch, "
           "threshold %s, cycle %s ms, cache %s\n", size, transport, k, bytes, threshold, cycle,
           cache);
    printf("  time per batch   median %.2f ms   p10 %.2f   p90 %.2f   (%d batches)\n",
           times[n / 2] * 1e3, times[n / 10] * 1e3, times[(n * 9) / 10] * 1e3, n);
    printf("  data             %.1f MiB per batch, %.2f GB/s algorithm bandwidth (median)\n",
           (double)k * (double)bytes / (1 << 20), (double)k * (double)bytes / times[n / 2] / 1e9);
    printf("  per batch        %.1f collectives, %.1f fused (%.1f tensors each), fill %.0f%%\n",
           (double)st.responses / per, (double)st.fused_responses / per,
           st.fused_responses ? (double)st.fused_tensors / (double)st.fused_responses : 0,
           fill * 100);
    printf("  per batch        cycles %.1f (busy %.1f), cache hits %.1f misses %.1f\n",
           (double)st.cycles / per, (double)st.busy_cycles / per, (double)st.cache_hits / per,
           (double)st.cache_misses / per);
    printf("  time per batch   negotiate %.2f ms, copy in %.2f, transport %.2f, copy out %.2f\n",
           st.negotiate_s / per * 1e3, st.copy_in_s / per * 1e3, st.transport_s / per * 1e3,
           st.copy_out_s / per * 1e3);
  }
  /* every rank's control-plane cost: rank 0 answers, the others announce */
  fflush(stdout);
  for (int r = 0; r < size; r++) {
    plait_handle_t *b;
    CHECK(plait_barrier_async(NULL, &b));
    CHECK(plait_wait(b, -1));
    plait_release(b);
    if (r == rank)
      printf("  control, rank %d  %.1f messages, %.0f bytes sent per batch; %.0f bytes per busy "
             "cycle\n", rank, (double)st.control_messages / n, (double)st.control_bytes / n,
             st.busy_cycles ? (double)st.control_bytes / (double)st.busy_cycles : 0);
    fflush(stdout);
  }
  for (int i = 0; i < k; i++) free(bufs[i]);
  free(bufs);
  free(hs);
  free(names);
  free(times);
  CHECK(plait_shutdown());
  return 0;
}
