/* plait-bench: command line. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

void bench_usage(FILE *f) {
  fputs(
      "usage: plait-bench COMMAND [options]      (run it under plaitrun, mpirun or srun)\n"
      "\n"
      "commands:\n"
      "  allreduce | allgather | broadcast | alltoall | reducescatter\n"
      "      time one collective over message sizes; prints time, algorithm and bus\n"
      "      bandwidth; checks every result\n"
      "  fusion\n"
      "      steps of many allreduces (a tensor-size mix) swept over fusion\n"
      "      thresholds and cycle times in one launch; prints time per step and what\n"
      "      the fusion buffer did\n"
      "  latency\n"
      "      one float32 sum allreduce at a time, in place, the same name each time,\n"
      "      waited for before the next (a lone operation); median of --iters (default\n"
      "      1000) at sizes --min..--max (default 4K only); checks the first result\n"
      "  memcpy\n"
      "      single-thread memcpy bandwidth over the same sizes (the ceiling; no job)\n"
      "\n"
      "options (a SIZE is bytes or takes K, M, G or T, K = 1024: 64K, 64KiB; lists\n"
      "are comma-separated):\n"
      "  --min SIZE            smallest message (default 4)\n"
      "  --max SIZE            largest message (default 256M)\n"
      "  --factor N            size step factor (default 2)\n"
      "  --iters N             timed iterations per size (default: 100 for small\n"
      "                        messages, fewer for large ones, at least 5; latency: 1000)\n"
      "  --warmup N            untimed iterations or steps first (default 2)\n"
      "  --dtype NAME          float32 (default), float16, int64, ...\n"
      "  --op NAME             sum (default), average, min, max, product\n"
      "  --no-check            do not verify results\n"
      "  --in-place            allreduce: reduce in place (input = output), as\n"
      "                        frameworks do; default: out of place\n"
      "  --same-name           one name for every timed iteration, as a training loop\n"
      "                        has (the response cache's path: a lone operation's\n"
      "                        steady-state latency); default: a new name each\n"
      "                        iteration\n"
      "  --mix SPEC            fusion: a tensor-size mix; repeatable. SPEC is a file\n"
      "                        (bench/mixes/*.txt), uniform:COUNTxSIZE or sizes:S1,S2,...\n"
      "                        (default uniform:200x64K)\n"
      "  --thresholds LIST     fusion: PLAIT_FUSION_THRESHOLD values (default\n"
      "                        0,1M,4M,16M,64M)\n"
      "  --cycle-times LIST    fusion: PLAIT_CYCLE_TIME_MS values (default 1)\n"
      "  --max-tensors LIST    fusion: PLAIT_FUSION_MAX_TENSOR values (default: the\n"
      "                        job's own, not swept); each result records it\n"
      "  --steps N             fusion: timed steps per setting (default 20)\n"
      "  --job-settings        fusion: no sweep; each mix with the job's own settings\n"
      "                        (defaults, PLAIT_* variables, PLAIT_AUTOTUNE=1); JSON\n"
      "                        records of kind \"tuning\" with every step's time\n"
      "  --settle-max N        fusion with PLAIT_AUTOTUNE=1: most steps autotune may take\n"
      "                        to settle (default 20000); past it the row says not settled\n"
      "  --settle-budget S     the same, in seconds of stepping (default: no limit)\n"
      "  --json FILE           also write one JSON object per result line (rank 0)\n"
      "  --label NAME          the transport's name in the output (default: the plugin's,\n"
      "                        e.g. gloo; say ofi-shm to tell providers apart)\n"
      "  --quiet               print nothing but errors (with --json: results only there)\n",
      f);
}

static int fail(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "plait-bench: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\nTry 'plait-bench --help'.\n");
  return -1;
}

static int parse_int(const char *flag, const char *text, int min, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || *end || !*text || v < min || v > 1000000)
    return fail("%s '%s' is not a valid count", flag, text);
  *out = (int)v;
  return 0;
}

static int parse_sizes(const char *flag, const char *text, uint64_t *out, int *n) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", text);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*n == BENCH_MAX_LIST) return fail("%s '%s' has too many values", flag, text);
    if (plait_parse_size(tok, &out[*n])) return fail("%s: '%s' is not a size (e.g. 0, 64K, 4M)", flag, tok);
    (*n)++;
  }
  return *n ? 0 : fail("%s '%s' is empty", flag, text);
}

static int parse_times(const char *flag, const char *text, double *out, int *n) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", text);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*n == BENCH_MAX_LIST) return fail("%s '%s' has too many values", flag, text);
    char *end;
    errno = 0;
    double v = strtod(tok, &end);
    if (errno || *end || !(v > 0) || !isfinite(v) || v > 1e6)
      return fail("%s: '%s' is not a time in milliseconds > 0", flag, tok);
    out[(*n)++] = v;
  }
  return *n ? 0 : fail("%s '%s' is empty", flag, text);
}

int bench_parse_args(int argc, char **argv, bench_opts_t *o) {
  o->min_bytes = 4;
  o->max_bytes = 256ull << 20;
  o->factor = 2;
  o->warmup = 2;
  o->steps = 20;
  o->settle_max = 20000;
  o->check = 1;
  o->dtype = PLAIT_FLOAT32;
  o->op = PLAIT_OP_SUM;
  const char *mixes[BENCH_MAX_MIXES];
  int n_mixes = 0;
  const char *thresholds = "0,1M,4M,16M,64M", *cycles = NULL, *max_tensors = NULL;
  int sizes_given = 0, thresholds_given = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--no-check")) { o->check = 0; continue; }
    if (!strcmp(a, "--quiet")) { o->quiet = 1; continue; }
    if (!strcmp(a, "--in-place")) { o->in_place = 1; continue; }
    if (!strcmp(a, "--job-settings")) { o->job_settings = 1; continue; }
    if (!strcmp(a, "--same-name")) { o->same_name = 1; continue; }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { bench_usage(stdout); exit(0); }
    if (strncmp(a, "--", 2)) return fail("unexpected argument '%s'%s", a, "");
    if (i + 1 >= argc) return fail("%s needs a value%s", a, "");
    const char *v = argv[++i];
    int factor = 0;
    if (!strcmp(a, "--min") || !strcmp(a, "--max")) sizes_given = 1;
    if (!strcmp(a, "--min")) {
      if (plait_parse_size(v, &o->min_bytes)) return fail("--min '%s' is not a size%s", v, "");
    } else if (!strcmp(a, "--max")) {
      if (plait_parse_size(v, &o->max_bytes)) return fail("--max '%s' is not a size%s", v, "");
    } else if (!strcmp(a, "--factor")) {
      if (parse_int(a, v, 2, &factor)) return -1;
      o->factor = (unsigned)factor;
    } else if (!strcmp(a, "--iters")) {
      if (parse_int(a, v, 1, &o->iters)) return -1;
    } else if (!strcmp(a, "--warmup")) {
      if (parse_int(a, v, 0, &o->warmup)) return -1;
    } else if (!strcmp(a, "--steps")) {
      if (parse_int(a, v, 1, &o->steps)) return -1;
    } else if (!strcmp(a, "--settle-max")) {
      if (parse_int(a, v, 1, &o->settle_max)) return -1;
      if (o->settle_max < 10)
        return fail("--settle-max '%s': at least 10 (settling is checked every 10 steps)%s", v, "");
    } else if (!strcmp(a, "--settle-budget")) {
      if (parse_int(a, v, 1, &o->settle_budget_s)) return -1;
    } else if (!strcmp(a, "--dtype")) {
      int found = 0;
      for (int d = 0; d < PLAIT_DTYPE_COUNT_ && !found; d++)
        if (!strcmp(plait_dtype_name((plait_dtype_t)d), v)) o->dtype = (plait_dtype_t)d, found = 1;
      if (!found) return fail("--dtype '%s' is not a plait dtype (float32, float16, int64, ...)%s", v, "");
    } else if (!strcmp(a, "--op")) {
      int found = 0;
      for (int p = 0; p < PLAIT_OP_COUNT_ && !found; p++)
        if (!strcmp(plait_op_name((plait_op_t)p), v)) o->op = (plait_op_t)p, found = 1;
      if (!found) return fail("--op '%s' is not sum, average, min, max or product%s", v, "");
    } else if (!strcmp(a, "--json")) {
      o->json_path = v;
    } else if (!strcmp(a, "--label")) {
      if (!*v || strpbrk(v, "\"\\ "))
        return fail("--label '%s' must be a word without quotes, backslashes or spaces%s", v, "");
      o->label = v;
    } else if (!strcmp(a, "--mix")) {
      if (n_mixes == BENCH_MAX_MIXES) return fail("at most 16 --mix options%s%s", "", "");
      mixes[n_mixes++] = v;
    } else if (!strcmp(a, "--thresholds")) {
      thresholds = v;
      thresholds_given = 1;
    } else if (!strcmp(a, "--cycle-times")) {
      cycles = v;
    } else if (!strcmp(a, "--max-tensors")) {
      max_tensors = v;
    } else {
      return fail("unknown option '%s'%s", a, "");
    }
  }
  if (!strcmp(o->command, "latency") && !sizes_given) o->min_bytes = o->max_bytes = 4096;
  if (o->min_bytes > o->max_bytes) return fail("--min is larger than --max%s%s", "", "");
  if (!strcmp(o->command, "fusion")) {
    if (o->job_settings && (thresholds_given || cycles || max_tensors))
      return fail("--job-settings runs the job's own settings: no --thresholds, "
                  "--cycle-times or --max-tensors%s%s", "", "");
    if (o->job_settings) thresholds = "0", cycles = "1"; /* one run per mix; not applied */
    if (parse_sizes("--thresholds", thresholds, o->thresholds, &o->n_thresholds) ||
        parse_times("--cycle-times", cycles ? cycles : "1", o->cycle_times, &o->n_cycle_times) ||
        (max_tensors &&
         parse_sizes("--max-tensors", max_tensors, o->max_tensors, &o->n_max_tensors)))
      return -1;
    if (n_mixes == 0) mixes[n_mixes++] = "uniform:200x64K";
    for (int m = 0; m < n_mixes; m++) {
      if (bench_load_mix(mixes[m], &o->mixes[m])) return -1;
      o->n_mixes = m + 1;
    }
  }
  return 0;
}
