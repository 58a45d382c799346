/*
 * plait-bench: measures plait's collectives and what the fusion buffer does
 * for a workload (docs/plait-bench.md).
 *
 *   plaitrun -np 2 plait-bench allreduce --min 4 --max 256M --json out.jsonl
 *   plaitrun -np 2 plait-bench fusion --mix bench/mixes/resnet50.txt \
 *       --thresholds 0,4M,64M --cycle-times 1,5
 *   plaitrun -np 2 plait-bench latency --iters 1000
 *   plait-bench memcpy --max 256M
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The ceiling: single-thread memcpy, no job needed. */
int bench_memcpy(bench_opts_t *o) {
  char *a = malloc(o->max_bytes), *b = malloc(o->max_bytes);
  if (!a || !b) {
    fprintf(stderr, "plait-bench: cannot allocate 2 x %llu bytes\n", (unsigned long long)o->max_bytes);
    return 1;
  }
  memset(a, 1, o->max_bytes);
  memset(b, 2, o->max_bytes);
  printf("# plait-bench memcpy: one thread, median of the iterations\n");
  printf("%12s %6s %12s %10s\n", "size", "iters", "median(us)", "GB/s");
  for (uint64_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= o->factor) {
    uint64_t it64 = bytes ? (256ull << 20) / bytes : 1000;
    int iters = o->iters ? o->iters : (int)(it64 < 5 ? 5 : it64 > 1000 ? 1000 : it64);
    double *t = malloc((size_t)iters * sizeof *t);
    if (!t) return 1;
    for (int w = 0; w < o->warmup; w++) memcpy(b, a, bytes);
    for (int i = 0; i < iters; i++) {
      double t0 = bench_now();
      memcpy(b, a, bytes);
      t[i] = bench_now() - t0;
      a[i % (bytes ? bytes : 1)] ^= b[0]; /* keep the copies from being optimised away */
    }
    double med = bench_median(t, iters);
    char sz[32];
    double gbps = med > 0 ? bytes / med / 1e9 : 0;
    printf("%12s %6d %12.2f %10.3f\n", bench_format_size(bytes, sz, sizeof sz), iters, med * 1e6,
           gbps);
    if (o->json)
      fprintf(o->json, "{\"kind\":\"memcpy\",\"bytes\":%llu,\"iters\":%d,\"time_s_median\":%.9g,"
              "\"GBps\":%.6g}\n", (unsigned long long)bytes, iters, med, gbps);
    free(t);
    if (bytes > UINT64_MAX / o->factor) break;
  }
  free(a);
  free(b);
  return 0;
}

int main(int argc, char **argv) {
  static const char *commands[] = {"allreduce", "allgather", "broadcast", "alltoall",
                                   "reducescatter", "fusion", "latency", "memcpy"};
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    bench_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  bench_opts_t o = {0};
  for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
    if (!strcmp(argv[1], commands[c])) o.command = commands[c];
  if (!o.command) {
    fprintf(stderr, "plait-bench: unknown command '%s'\nTry 'plait-bench --help'.\n", argv[1]);
    return 2;
  }
  if (bench_parse_args(argc - 2, argv + 2, &o)) return 2;
  if (!strcmp(o.command, "memcpy")) {
    if (o.json_path && !(o.json = fopen(o.json_path, "a"))) {
      fprintf(stderr, "plait-bench: --json %s: %s\n", o.json_path, strerror(errno));
      return 2;
    }
    int rc = bench_memcpy(&o);
    if (o.json) fclose(o.json);
    return rc;
  }
  BENCH_CHECK(plait_init());
  BENCH_CHECK(plait_rank(&o.rank));
  BENCH_CHECK(plait_size(&o.size));
  BENCH_CHECK(plait_transport_name(&o.transport));
  if (o.label) o.transport = o.label;
  /* Rank 0 writes the JSON; every rank stops if it cannot. */
  double cannot = 0;
  if (o.rank == 0 && o.json_path && !(o.json = fopen(o.json_path, "a"))) {
    fprintf(stderr, "plait-bench: --json %s: %s\n", o.json_path, strerror(errno));
    cannot = 1;
  }
  BENCH_CHECK(bench_max_over_ranks(&cannot, 1, "bench.json"));
  if (cannot) {
    plait_shutdown();
    return 2;
  }
  int rc = !strcmp(o.command, "fusion")    ? bench_fusion(&o)
           : !strcmp(o.command, "latency") ? bench_latency(&o)
                                           : bench_collective(&o);
  if (o.json) fclose(o.json);
  for (int m = 0; m < o.n_mixes; m++) bench_free_mix(&o.mixes[m]);
  plait_result_t down = plait_shutdown();
  if (down != PLAIT_SUCCESS) bench_die("plait_shutdown()", down);
  return rc;
}
