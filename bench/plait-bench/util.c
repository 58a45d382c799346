/* plait-bench: sizes, statistics and small collectives. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  if (n == 0) return 0;
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_percentile(const double *sorted, int n, double p) {
  if (n == 0) return 0;
  double pos = p * (n - 1);
  int lo = (int)pos;
  if (lo >= n - 1) return sorted[n - 1];
  return sorted[lo] + (pos - lo) * (sorted[lo + 1] - sorted[lo]);
}

const char *bench_format_size(uint64_t bytes, char *buf, size_t cap) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = (double)bytes;
  while (v >= 1024 && u < 3 && bytes % 1024 == 0) {
    v /= 1024;
    bytes /= 1024;
    u++;
  }
  snprintf(buf, cap, "%g %s", v, units[u]);
  return buf;
}

void bench_die(const char *what, plait_result_t rc) {
  fprintf(stderr, "plait-bench: %s failed: %s: %s\n", what, plait_result_name(rc),
          plait_last_error());
  exit(1);
}

plait_result_t bench_max_over_ranks(double *v, int n, const char *name) {
  plait_tensor_t t;
  plait_handle_t *h;
  plait_result_t rc = plait_tensor_1d(&t, v, (size_t)n, PLAIT_FLOAT64);
  if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_MAX, NULL, &h);
  if (rc != PLAIT_SUCCESS) return rc;
  rc = plait_wait(h, -1);
  plait_release(h);
  return rc;
}

plait_result_t bench_barrier(void) {
  plait_handle_t *h;
  plait_result_t rc = plait_barrier_async(NULL, &h);
  if (rc != PLAIT_SUCCESS) return rc;
  rc = plait_wait(h, -1);
  plait_release(h);
  return rc;
}
