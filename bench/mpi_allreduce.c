/*
 * Open MPI's MPI_Allreduce on the workloads plait-bench measures, for the
 * side-by-side comparison in ci/bench (built there with mpicc; not part of
 * plait).
 *
 *   mpirun -np 2 mpi_allreduce [--min 4K] [--max 256M] [--factor 4]
 *                              [--many 200x65536] [--steps 20] [--json FILE]
 *   mpirun -np 2 mpi_allreduce --latency [--min 4K] [--max 4K] [--iters 1000] [--json FILE]
 *
 * Prints, and appends as JSON lines to FILE (rank 0):
 *  - {"kind":"collective","transport":"openmpi",...} per size: float32 sum,
 *    the slowest rank's median time per call, algorithm and bus bandwidth,
 *    the same definitions as plait-bench;
 *  - {"kind":"comparison","system":"openmpi-blocking"|"openmpi-nonblocking",
 *    "workload":"200x64K",...}: COUNT tensors of SIZE bytes per step, each
 *    MPI_Allreduce in turn, or all MPI_Iallreduce then MPI_Waitall (MPI has
 *    no fusion).
 *  - with --latency, only {"kind":"latency","transport":"openmpi",...} per
 *    size (default 4 KiB): one MPI_Allreduce at a time, --iters of them
 *    (default 1000), the slowest rank's time per call, median, p10 and p90;
 *    the same record as plait-bench latency.
 * Results are checked.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Built by ci/bench with a bare mpicc command line: the header by its path. */
#include "../include/plait/parse_size.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_of_max(double *t, int n) {
  MPI_Allreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  qsort(t, (size_t)n, sizeof *t, cmp);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double pct(const double *sorted, int n, double p) {
  double pos = p * (n - 1);
  int lo = (int)pos;
  return lo >= n - 1 ? sorted[n - 1] : sorted[lo] + (pos - lo) * (sorted[lo + 1] - sorted[lo]);
}

/* A size ("4K", "256M", "64MiB"): plait's one size parser; bad text ends the job. */
static unsigned long long size_arg(const char *flag, const char *s) {
  uint64_t v;
  if (plait_parse_size(s, &v)) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
      fprintf(stderr, "mpi_allreduce: %s '%s' is not a size (e.g. 4K, 256M)\n", flag, s);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return (unsigned long long)v;
}

static int check(const float *out, size_t n, int size, int rank);

/* --latency: lone blocking allreduces of each size; 0 or 1 (wrong result). */
static int latency(float *in, float *out, double *t, unsigned long long min,
                   unsigned long long max, unsigned long long factor, int iters, FILE *json) {
  int rank, size, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0)
    printf("# Open MPI lone MPI_Allreduce latency, %d ranks, float32 sum\n%12s %6s %12s %10s "
           "%10s\n", size, "bytes", "iters", "median(us)", "p10(us)", "p90(us)");
  for (unsigned long long bytes = min; bytes <= max; bytes *= factor) {
    int count = (int)(bytes / 4);
    MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    bad |= check(out, (size_t)count, size, rank);
    for (int w = 0; w < 10; w++) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters; i++) {
      double t0 = MPI_Wtime();
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t[i] = MPI_Wtime() - t0;
    }
    double med = median_of_max(t, iters), p10 = pct(t, iters, 0.1), p90 = pct(t, iters, 0.9);
    if (rank == 0) {
      printf("%12llu %6d %12.1f %10.1f %10.1f\n", bytes, iters, med * 1e6, p10 * 1e6, p90 * 1e6);
      if (json)
        fprintf(json, "{\"kind\":\"latency\",\"collective\":\"allreduce\",\"transport\":"
                "\"openmpi\",\"ranks\":%d,\"bytes\":%llu,\"dtype\":\"float32\",\"iters\":%d,"
                "\"time_s_median\":%.9g,\"time_s_p10\":%.9g,\"time_s_p90\":%.9g,"
                "\"check\":\"%s\"}\n", size, bytes, iters, med, p10, p90, bad ? "FAILED" : "ok");
    }
    if (bytes > max / factor) break;
  }
  return bad;
}

static int check(const float *out, size_t n, int size, int rank) {
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    for (int r = 0; r < size; r++) want += (float)(r + 1 + (int)(i % 3));
    if (out[i] != want) {
      fprintf(stderr, "mpi_allreduce: rank %d: element %zu is %g, expected %g\n", rank, i, out[i], want);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  unsigned long long min = 4096, max = 256ull << 20, factor = 4, many = 200, many_bytes = 65536;
  int steps = 20, iters_opt = 0, lat = 0, min_given = 0;
  const char *json_path = NULL;
  for (int i = 1; i < argc; i += 2) {
    if (!strcmp(argv[i], "--latency")) {
      lat = 1, i--;
      continue;
    }
    if (i + 1 >= argc) {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: %s needs a value\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (!strcmp(argv[i], "--min")) min = size_arg(argv[i], argv[i + 1]), min_given = 1;
    else if (!strcmp(argv[i], "--max")) max = size_arg(argv[i], argv[i + 1]), min_given = 1;
    else if (!strcmp(argv[i], "--factor")) factor = size_arg(argv[i], argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters_opt = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--json")) json_path = argv[i + 1];
    else if (!strcmp(argv[i], "--many")) sscanf(argv[i + 1], "%llux%llu", &many, &many_bytes);
    else {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: unknown option %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (lat && !min_given) min = max = 4096;
  if (iters_opt < 0 || iters_opt > 100000 || steps < 1 || min < 4 || min > max || factor < 2) {
    if (rank == 0) fprintf(stderr, "mpi_allreduce: bad --iters, --steps, --min/--max or --factor\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  FILE *json = rank == 0 && json_path ? fopen(json_path, "a") : NULL;
  size_t max_count = (size_t)(max / 4);
  int tn = iters_opt > 1000 ? iters_opt : 1000;
  float *in = malloc(max_count * sizeof *in), *out = malloc(max_count * sizeof *out);
  double *t = malloc((size_t)tn * sizeof *t);
  if (!in || !out || !t) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < max_count; i++) in[i] = (float)(rank + 1 + (int)(i % 3));
  int bad = 0;
  if (lat) {
    bad = latency(in, out, t, min, max, factor, iters_opt ? iters_opt : 1000, json);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (json) fclose(json);
    free(in), free(out), free(t);
    MPI_Finalize();
    return any ? 1 : 0;
  }
  if (rank == 0)
    printf("# Open MPI MPI_Allreduce, %d ranks, float32 sum\n%12s %6s %12s %10s %10s\n", size,
           "bytes", "iters", "median(us)", "algbw", "busbw");
  for (unsigned long long bytes = min; bytes <= max; bytes *= factor) {
    int count = (int)(bytes / 4);
    unsigned long long it = (64ull << 20) / bytes;
    int iters = iters_opt ? iters_opt : it < 5 ? 5 : it > 100 ? 100 : (int)it;
    MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    bad |= check(out, (size_t)count, size, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters; i++) {
      double t0 = MPI_Wtime();
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t[i] = MPI_Wtime() - t0;
    }
    double med = median_of_max(t, iters);
    double algbw = bytes / med / 1e9, busbw = algbw * 2.0 * (size - 1) / size;
    if (rank == 0) {
      printf("%12llu %6d %12.1f %10.3f %10.3f\n", bytes, iters, med * 1e6, algbw, busbw);
      if (json)
        fprintf(json, "{\"kind\":\"collective\",\"collective\":\"allreduce\",\"transport\":\"openmpi\","
                "\"ranks\":%d,\"bytes\":%llu,\"dtype\":\"float32\",\"iters\":%d,"
                "\"time_s_median\":%.9g,\"time_s_p10\":%.9g,\"time_s_p90\":%.9g,"
                "\"algbw_GBps\":%.6g,\"busbw_GBps\":%.6g,\"algorithm\":\"openmpi\"}\n",
                size, bytes, iters, med, pct(t, iters, 0.1), pct(t, iters, 0.9), algbw, busbw);
    }
  }
  /* Many small tensors per step: blocking one by one, or all nonblocking. */
  size_t per = (size_t)(many_bytes / 4);
  float *bufs = malloc(many * per * sizeof *bufs), *outs = malloc(many * per * sizeof *outs);
  MPI_Request *req = malloc(many * sizeof *req);
  if (!bufs || !outs || !req || steps > 1000) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < many * per; i++) bufs[i] = (float)(rank + 1 + (int)((i % per) % 3));
  for (int mode = 0; mode < 2; mode++) {
    for (int s = -2; s < steps; s++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (size_t k = 0; k < many; k++) {
        if (mode == 0)
          MPI_Allreduce(bufs + k * per, outs + k * per, (int)per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else
          MPI_Iallreduce(bufs + k * per, outs + k * per, (int)per, MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD, &req[k]);
      }
      if (mode == 1) MPI_Waitall((int)many, req, MPI_STATUSES_IGNORE);
      if (s >= 0) t[s] = MPI_Wtime() - t0;
    }
    bad |= check(outs + (many - 1) * per, per, size, rank);
    double med = median_of_max(t, steps);
    const char *system = mode == 0 ? "openmpi-blocking" : "openmpi-nonblocking";
    if (rank == 0) {
      printf("%s: %llu x %llu B per step: %.2f ms\n", system, many, many_bytes, med * 1e3);
      if (json)
        fprintf(json, "{\"kind\":\"comparison\",\"system\":\"%s\",\"workload\":\"%llux%lluK\","
                "\"ranks\":%d,\"median_s\":%.9g,\"steps\":%d}\n", system, many, many_bytes / 1024,
                size, med, steps);
    }
  }
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (json) fclose(json);
  free(in), free(out), free(t), free(bufs), free(outs), free(req);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
