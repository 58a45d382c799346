/*
 * plait-bench latency: how long one lone allreduce takes through the whole
 * stack (submission, negotiation, transport, completion) when nothing else
 * is in flight: one float32 sum allreduce, in place, under the same name
 * every iteration (as a training loop issues it, so the response cache
 * works), waited for before the next one is submitted. Sizes from --min to
 * --max (default 4 KiB only), --iters iterations each (default 1000) after
 * --warmup untimed ones.
 *
 * Every rank times every iteration; an iteration's time is the slowest
 * rank's (elementwise MAX over ranks after the run); median, p10 and p90
 * over the iterations. The first result is checked on every rank. Rank 0's
 * plait_stats over the timed iterations say what the coordinator spent per
 * operation (cycles, negotiation time, transport time, control messages).
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static plait_result_t lone_op(float *buf, size_t count, const char *name) {
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_tensor_1d(&t, buf, count, PLAIT_FLOAT32);
  if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h);
  if (rc != PLAIT_SUCCESS) return rc;
  rc = plait_wait(h, -1);
  plait_release(h);
  return rc;
}

/* Fills buf with rank + 1, reduces it once and checks the sum; then zeroes
 * it (0 + 0 stays 0: the timed sums cannot overflow). 0 or 1 (wrong). */
static int checked_first(const bench_opts_t *o, float *buf, size_t count, const char *name) {
  for (size_t i = 0; i < count; i++) buf[i] = (float)(o->rank + 1);
  BENCH_CHECK(lone_op(buf, count, name));
  float want = (float)o->size * (o->size + 1) / 2;
  int bad = 0;
  for (size_t i = 0; i < count && !bad; i++) {
    if (buf[i] != want) {
      fprintf(stderr, "plait-bench: rank %d: latency of %zu floats: element %zu is %g, "
              "expected %g\n", o->rank, count, i, buf[i], want);
      bad = 1;
    }
  }
  memset(buf, 0, count * sizeof *buf);
  return bad;
}

static void report(const bench_opts_t *o, uint64_t bytes, int iters, double *t,
                   const plait_stats_t *b, const plait_stats_t *a, int bad) {
  double med = bench_median(t, iters);
  double p10 = bench_percentile(t, iters, 0.1), p90 = bench_percentile(t, iters, 0.9);
  double n = iters;
  double cycles = (a->cycles - b->cycles) / n, neg = (a->negotiate_s - b->negotiate_s) / n;
  double tr = (a->transport_s - b->transport_s) / n;
  double msgs = (a->control_messages - b->control_messages) / n;
  const char *check = bad ? "FAILED" : "ok";
  if (o->quiet && !o->json) return;
  if (!o->quiet) {
    char sz[32];
    printf("%12s %7d %10.1f %10.1f %10.1f %9.2f %9.1f %9.1f %9.2f %8s\n",
           bench_format_size(bytes, sz, sizeof sz), iters, med * 1e6, p10 * 1e6, p90 * 1e6,
           cycles, neg * 1e6, tr * 1e6, msgs, check);
    fflush(stdout);
  }
  if (o->json)
    fprintf(o->json,
            "{\"kind\":\"latency\",\"collective\":\"allreduce\",\"transport\":\"%s\","
            "\"ranks\":%d,\"bytes\":%llu,\"dtype\":\"float32\",\"iters\":%d,"
            "\"time_s_median\":%.9g,\"time_s_p10\":%.9g,\"time_s_p90\":%.9g,"
            "\"cycles_per_op\":%.6g,\"negotiate_s_per_op\":%.9g,\"transport_s_per_op\":%.9g,"
            "\"control_messages_per_op\":%.6g,\"check\":\"%s\"}\n",
            o->transport, o->size, (unsigned long long)bytes, iters, med, p10, p90, cycles, neg,
            tr, msgs, check);
}

int bench_latency(bench_opts_t *o) {
  int iters = o->iters ? o->iters : 1000;
  float *buf = malloc(o->max_bytes + sizeof(float));
  double *t = malloc((size_t)iters * sizeof *t);
  if (!buf || !t) {
    fprintf(stderr, "plait-bench: cannot allocate %llu bytes and %d times\n",
            (unsigned long long)o->max_bytes, iters);
    free(buf);
    free(t);
    return 1;
  }
  if (o->rank == 0 && !o->quiet) {
    printf("# plait-bench latency: %d ranks, transport %s; one float32 sum allreduce at a "
           "time, in place, the same name each time; time = slowest rank, per operation; "
           "coordinator figures: rank 0's plait_stats per operation\n", o->size, o->transport);
    printf("%12s %7s %10s %10s %10s %9s %9s %9s %9s %8s\n", "size", "iters", "median(us)",
           "p10(us)", "p90(us)", "cycles", "negot(us)", "transp(us)", "ctl msgs", "check");
    fflush(stdout);
  }
  int failures = 0, seq = 0;
  for (uint64_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= o->factor) {
    size_t count = (size_t)(bytes / sizeof(float));
    if (count == 0) continue;
    char name[64], what[64];
    snprintf(name, sizeof name, "latency.%d", seq);
    double verdict = checked_first(o, buf, count, name);
    for (int w = 0; w < o->warmup; w++) BENCH_CHECK(lone_op(buf, count, name));
    BENCH_CHECK(bench_barrier());
    plait_stats_t before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
    BENCH_CHECK(plait_stats(&before));
    for (int i = 0; i < iters; i++) {
      double t0 = bench_now();
      BENCH_CHECK(lone_op(buf, count, name));
      t[i] = bench_now() - t0;
    }
    BENCH_CHECK(plait_stats(&after));
    snprintf(what, sizeof what, "latency.%d.times", seq);
    BENCH_CHECK(bench_max_over_ranks(t, iters, what));
    snprintf(what, sizeof what, "latency.%d.check", seq);
    BENCH_CHECK(bench_max_over_ranks(&verdict, 1, what));
    failures += verdict != 0;
    if (o->rank == 0) report(o, (uint64_t)count * sizeof(float), iters, t, &before, &after,
                             verdict != 0);
    seq++;
    if (bytes > UINT64_MAX / o->factor) break;
  }
  free(buf);
  free(t);
  if (failures && o->rank == 0)
    fprintf(stderr, "plait-bench: %d size(s) gave wrong results\n", failures);
  return failures ? 1 : 0;
}
