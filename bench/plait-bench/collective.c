/*
 * plait-bench allreduce | allgather | broadcast | alltoall | reducescatter:
 * one collective over message sizes, timed per iteration on every rank and
 * reported as the slowest rank's time per iteration (median and spread).
 *
 * "size" is the collective's whole buffer, as nccl-tests count it: the
 * allreduce/broadcast tensor, the allgather output, the alltoall input, the
 * reducescatter input. Bandwidths: algbw = size / time; busbw = algbw x the
 * fraction of the data each rank's links must carry in an optimal algorithm
 * (allreduce 2(n-1)/n; allgather, alltoall, reducescatter (n-1)/n;
 * broadcast 1), so that busbw compares with the hardware's bandwidth.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/half.h"
#include "bench.h"

typedef enum { C_ALLREDUCE, C_ALLGATHER, C_BROADCAST, C_ALLTOALL, C_REDUCESCATTER } coll_t;

static const char *coll_names[] = {"allreduce", "allgather", "broadcast", "alltoall",
                                   "reducescatter"};

/* --- element access through double --------------------------------------- */

static void put(plait_dtype_t d, void *buf, size_t i, double v) {
  switch (d) {
  case PLAIT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  case PLAIT_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
  case PLAIT_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
  case PLAIT_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
  case PLAIT_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case PLAIT_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
  case PLAIT_FLOAT16: ((uint16_t *)buf)[i] = plait_float_to_half((float)v); break;
  case PLAIT_BFLOAT16: ((uint16_t *)buf)[i] = plait_float_to_bf16((float)v); break;
  case PLAIT_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case PLAIT_FLOAT64: ((double *)buf)[i] = v; break;
  case PLAIT_BOOL: ((uint8_t *)buf)[i] = v != 0; break;
  default: break;
  }
}

static double get(plait_dtype_t d, const void *buf, size_t i) {
  switch (d) {
  case PLAIT_UINT8: return ((const uint8_t *)buf)[i];
  case PLAIT_INT8: return ((const int8_t *)buf)[i];
  case PLAIT_UINT16: return ((const uint16_t *)buf)[i];
  case PLAIT_INT16: return ((const int16_t *)buf)[i];
  case PLAIT_INT32: return ((const int32_t *)buf)[i];
  case PLAIT_INT64: return (double)((const int64_t *)buf)[i];
  case PLAIT_FLOAT16: return plait_half_to_float(((const uint16_t *)buf)[i]);
  case PLAIT_BFLOAT16: return plait_bf16_to_float(((const uint16_t *)buf)[i]);
  case PLAIT_FLOAT32: return ((const float *)buf)[i];
  case PLAIT_FLOAT64: return ((const double *)buf)[i];
  case PLAIT_BOOL: return ((const uint8_t *)buf)[i] != 0;
  default: return 0;
  }
}

/* Rank r's element i: small values, so sums and products stay exact. */
static double value(plait_dtype_t d, int r, size_t i) {
  if (d == PLAIT_BOOL) return (double)((r + i) % 2);
  return (double)(r + 1 + (int)(i % 3));
}

static double expected_reduction(plait_dtype_t d, plait_op_t op, int n, size_t i) {
  double acc = value(d, 0, i);
  for (int r = 1; r < n; r++) {
    double v = value(d, r, i);
    switch (op) {
    case PLAIT_OP_SUM:
    case PLAIT_OP_AVERAGE: acc = d == PLAIT_BOOL ? (acc || v) : acc + v; break;
    case PLAIT_OP_MIN: acc = v < acc ? v : acc; break;
    case PLAIT_OP_MAX: acc = v > acc ? v : acc; break;
    case PLAIT_OP_PRODUCT: acc = d == PLAIT_BOOL ? (acc && v) : acc * v; break;
    default: break;
    }
  }
  if (op == PLAIT_OP_AVERAGE) {
    int floating = d == PLAIT_FLOAT16 || d == PLAIT_BFLOAT16 || d == PLAIT_FLOAT32 ||
                   d == PLAIT_FLOAT64;
    acc = floating ? acc / n : trunc(acc / n);
  }
  if (d == PLAIT_UINT8 || d == PLAIT_INT8) acc = (double)(d == PLAIT_UINT8 ? (uint8_t)(int64_t)acc
                                                                          : (int8_t)(int64_t)acc);
  return acc;
}

static int close_enough(plait_dtype_t d, double got, double want) {
  if (d == PLAIT_FLOAT16 || d == PLAIT_BFLOAT16)
    return fabs(got - want) <= 1e-2 * fabs(want) + 1e-2;
  return got == want;
}

/* --- one size ------------------------------------------------------------ */

typedef struct {
  coll_t coll;
  size_t esize;
  size_t count;    /* elements of the whole buffer (see above) */
  void *in, *out;  /* max-size buffers */
} job_t;

/* Submits one iteration and waits; *result points at the result memory. */
static plait_result_t run_once(const bench_opts_t *o, job_t *j, const char *name,
                               const void **result, size_t *result_count) {
  plait_tensor_t tin, tout;
  plait_handle_t *h = NULL;
  plait_result_t rc = PLAIT_SUCCESS;
  size_t n = (size_t)o->size;
  switch (j->coll) {
  case C_ALLREDUCE:
    plait_tensor_1d(&tin, o->in_place ? j->out : j->in, j->count, o->dtype);
    plait_tensor_1d(&tout, j->out, j->count, o->dtype);
    rc = plait_allreduce_async(name, &tin, &tout, o->op, NULL, &h);
    break;
  case C_BROADCAST:
    plait_tensor_1d(&tin, j->out, j->count, o->dtype);
    rc = plait_broadcast_async(name, &tin, 0, NULL, &h);
    break;
  case C_ALLGATHER:
    plait_tensor_1d(&tin, j->in, j->count / n, o->dtype);
    rc = plait_allgather_async(name, &tin, NULL, &h);
    break;
  case C_ALLTOALL:
    plait_tensor_1d(&tin, j->in, j->count, o->dtype);
    rc = plait_alltoall_async(name, &tin, NULL, NULL, &h);
    break;
  case C_REDUCESCATTER:
    plait_tensor_1d(&tin, j->in, j->count, o->dtype);
    rc = plait_reducescatter_async(name, &tin, o->op, NULL, &h);
    break;
  }
  if (rc != PLAIT_SUCCESS) return rc;
  rc = plait_wait(h, -1);
  if (rc == PLAIT_SUCCESS) {
    if (j->coll == C_ALLREDUCE || j->coll == C_BROADCAST) {
      *result = j->out;
      *result_count = j->count;
    } else {
      /* Outputs plait allocated: copied out so the handle can go. */
      plait_tensor_t t;
      rc = plait_handle_output(h, &t);
      if (rc == PLAIT_SUCCESS) {
        size_t c = 1;
        for (int d = 0; d < t.ndim; d++) c *= (size_t)t.shape[d];
        memcpy(j->out, t.data, c * j->esize);
        *result = j->out;
        *result_count = c;
      }
    }
  }
  plait_release(h);
  return rc;
}

/* Fills this rank's input for the collective and checks a result. */
static void fill(const bench_opts_t *o, job_t *j) {
  size_t n = (size_t)o->size;
  if (j->coll == C_BROADCAST) {
    for (size_t i = 0; i < j->count; i++) put(o->dtype, j->out, i, value(o->dtype, o->rank, i));
    return;
  }
  size_t count = j->coll == C_ALLGATHER ? j->count / n : j->count;
  void *dst = j->coll == C_ALLREDUCE && o->in_place ? j->out : j->in;
  for (size_t i = 0; i < count; i++) put(o->dtype, dst, i, value(o->dtype, o->rank, i));
}

static int check(const bench_opts_t *o, const job_t *j, const void *res, size_t count) {
  size_t n = (size_t)o->size, part = j->count / n;
  size_t want_count = j->coll == C_REDUCESCATTER ? part : j->count;
  if (count != want_count) {
    fprintf(stderr, "plait-bench: rank %d: %s of %zu elements returned %zu, expected %zu\n",
            o->rank, coll_names[j->coll], j->count, count, want_count);
    return -1;
  }
  for (size_t i = 0; i < count; i++) {
    double want;
    switch (j->coll) {
    case C_ALLREDUCE: want = expected_reduction(o->dtype, o->op, o->size, i); break;
    case C_BROADCAST: want = value(o->dtype, 0, i); break;
    case C_ALLGATHER: want = value(o->dtype, (int)(i / part), i % part); break;
    /* rank r's block k (rows k*part..) comes to rank k, in rank order. */
    case C_ALLTOALL: want = value(o->dtype, (int)(i / part), (size_t)o->rank * part + i % part); break;
    case C_REDUCESCATTER:
    default: want = expected_reduction(o->dtype, o->op, o->size, (size_t)o->rank * part + i); break;
    }
    double got = get(o->dtype, res, i);
    if (!close_enough(o->dtype, got, want)) {
      fprintf(stderr, "plait-bench: rank %d: %s of %zu elements: element %zu is %g, expected %g\n",
              o->rank, coll_names[j->coll], j->count, i, got, want);
      return -1;
    }
  }
  return 0;
}

static double bus_factor(coll_t c, int n) {
  if (n <= 1) return 1;
  switch (c) {
  case C_ALLREDUCE: return 2.0 * (n - 1) / n;
  case C_BROADCAST: return 1;
  default: return (double)(n - 1) / n;
  }
}

static int default_iters(uint64_t bytes) {
  uint64_t it = bytes ? (64ull << 20) / bytes : 100;
  return it < 5 ? 5 : it > 100 ? 100 : (int)it;
}

int bench_collective(bench_opts_t *o) {
  coll_t coll = C_ALLREDUCE;
  for (int c = 0; c < 5; c++)
    if (!strcmp(o->command, coll_names[c])) coll = (coll_t)c;
  job_t j = {.coll = coll, .esize = plait_dtype_size(o->dtype)};
  size_t n = (size_t)o->size, unit = j.esize;
  if (coll == C_ALLGATHER || coll == C_ALLTOALL || coll == C_REDUCESCATTER) unit *= n;
  j.in = malloc(o->max_bytes + unit);
  j.out = malloc(o->max_bytes + unit);
  if (!j.in || !j.out) {
    fprintf(stderr, "plait-bench: cannot allocate 2 x %llu bytes of buffers\n",
            (unsigned long long)o->max_bytes);
    return 1;
  }
  if (o->rank == 0 && !o->quiet) {
    printf("# plait-bench %s: %d ranks, transport %s, dtype %s, op %s; time = slowest rank, "
           "per iteration\n", o->command, o->size, o->transport, plait_dtype_name(o->dtype),
           plait_op_name(o->op));
    printf("%12s %10s %6s %12s %12s %12s %10s %10s %8s  %s\n", "size", "elements", "iters",
           "median(us)", "p10(us)", "p90(us)", "algbw", "busbw", "check", "algorithm");
    printf("%12s %10s %6s %12s %12s %12s %10s %10s %8s\n", "", "", "", "", "", "", "(GB/s)",
           "(GB/s)", "");
    fflush(stdout);
  }
  int failures = 0, seq = 0;
  for (uint64_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= o->factor) {
    /* Whole elements, and for the split collectives a multiple of the ranks. */
    j.count = (size_t)(bytes / unit) * (unit / j.esize);
    if (j.count == 0) continue; /* smaller than one element per rank */
    uint64_t real_bytes = (uint64_t)j.count * j.esize;
    int iters = o->iters ? o->iters : default_iters(real_bytes);
    char name[64];
    const void *res = NULL;
    size_t res_count = 0;
    int ok = 1;
    fill(o, &j);
    BENCH_CHECK(bench_barrier());
    for (int w = 0; w < o->warmup || (w == 0 && o->check); w++) {
      snprintf(name, sizeof name, "bench.%d.w%d", seq, w);
      if (coll == C_BROADCAST) fill(o, &j);
      BENCH_CHECK(run_once(o, &j, name, &res, &res_count));
      if (w == 0 && o->check && check(o, &j, res, res_count)) ok = 0;
    }
    /* In place, every iteration reduces the last result: from zeros, the
     * sums stay exact (and a sum costs the same whatever the values). */
    if (o->in_place && coll == C_ALLREDUCE) memset(j.out, 0, real_bytes);
    double *t = malloc((size_t)iters * sizeof *t);
    if (!t) return 1;
    BENCH_CHECK(bench_barrier());
    for (int i = 0; i < iters; i++) {
      snprintf(name, sizeof name, "bench.%d.%d", seq, o->same_name ? 0 : i);
      /* From 8 MiB on, every iteration starts together (bench_transport's
       * rule, so the two compare): back to back, a rank that finished early
       * counted the others' lag in its next iteration. */
      if (real_bytes >= ((uint64_t)8 << 20)) BENCH_CHECK(bench_barrier());
      double t0 = bench_now();
      BENCH_CHECK(run_once(o, &j, name, &res, &res_count));
      t[i] = bench_now() - t0;
    }
    /* Every rank's check verdict and times: the slowest rank counts. */
    double verdict = ok ? 0 : 1;
    snprintf(name, sizeof name, "bench.%d.times", seq);
    BENCH_CHECK(bench_max_over_ranks(t, iters, name));
    snprintf(name, sizeof name, "bench.%d.check", seq);
    BENCH_CHECK(bench_max_over_ranks(&verdict, 1, name));
    double med = bench_median(t, iters);
    double p10 = bench_percentile(t, iters, 0.1), p90 = bench_percentile(t, iters, 0.9);
    double algbw = med > 0 ? real_bytes / med / 1e9 : 0;
    double busbw = algbw * bus_factor(coll, o->size);
    const char *verdict_text = !o->check ? "off" : verdict == 0 ? "ok" : "FAILED";
    const char *alg = "";
    BENCH_CHECK(plait_transport_algorithm(o->command, real_bytes, &alg));
    failures += o->check && verdict != 0;
    if (o->rank == 0) {
      char sz[32];
      if (!o->quiet)
        printf("%12s %10zu %6d %12.1f %12.1f %12.1f %10.3f %10.3f %8s  %s\n",
             bench_format_size(real_bytes, sz, sizeof sz), j.count, iters, med * 1e6, p10 * 1e6,
             p90 * 1e6, algbw, busbw, verdict_text, *alg ? alg : "-");
      fflush(stdout);
      if (o->json)
        fprintf(o->json,
                "{\"kind\":\"collective\",\"collective\":\"%s\",\"transport\":\"%s\","
                "\"ranks\":%d,\"bytes\":%llu,\"elements\":%zu,\"dtype\":\"%s\",\"op\":\"%s\","
                "\"iters\":%d,\"time_s_median\":%.9g,\"time_s_p10\":%.9g,\"time_s_p90\":%.9g,"
                "\"algbw_GBps\":%.6g,\"busbw_GBps\":%.6g,\"algorithm\":\"%s\",\"check\":\"%s\","
                "\"in_place\":%s,\"names\":\"%s\"}\n",
                o->command, o->transport, o->size, (unsigned long long)real_bytes, j.count,
                plait_dtype_name(o->dtype), plait_op_name(o->op), iters, med, p10, p90, algbw,
                busbw, alg, verdict_text, o->in_place && coll == C_ALLREDUCE ? "true" : "false",
                o->same_name ? "same" : "new");
    }
    free(t);
    seq++;
    if (bytes > UINT64_MAX / o->factor) break;
  }
  free(j.in);
  free(j.out);
  if (failures && o->rank == 0)
    fprintf(stderr, "plait-bench: %d size(s) gave wrong results\n", failures);
  return failures ? 1 : 0;
}
