/*
 * plait-bench: measures plait's collectives and what the fusion buffer does.
 * See docs/plait-bench.md.
 */
#ifndef PLAIT_BENCH_H
#define PLAIT_BENCH_H

#include <plait/parse_size.h>
#include <plait/plait.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_MAX_LIST 64
#define BENCH_MAX_MIXES 16

typedef struct bench_mix {
  char name[64];
  size_t count;   /* tensors per step */
  size_t *bytes;  /* each tensor's size, in submission order */
  uint64_t total; /* bytes per step */
} bench_mix_t;

typedef struct bench_opts {
  const char *command; /* allreduce, ..., fusion, latency, memcpy */
  uint64_t min_bytes, max_bytes;
  unsigned factor;
  int iters;  /* 0: chosen per size */
  int warmup;
  int steps;  /* fusion: measured steps per setting */
  int check;  /* verify results */
  int in_place; /* allreduce: --in-place, the result over the input */
  int job_settings; /* fusion: --job-settings, no sweep, "tuning" records */
  int settle_max;    /* fusion, PLAIT_AUTOTUNE=1: most steps to settle (--settle-max) */
  int settle_budget_s; /* and most seconds (--settle-budget; 0: no limit) */
  plait_dtype_t dtype;
  plait_op_t op;
  const char *json_path;
  const char *label; /* --label: replaces the transport's name in the output */
  FILE *json;
  int quiet;
  int same_name; /* --same-name: one name for every timed iteration */
  uint64_t thresholds[BENCH_MAX_LIST];
  int n_thresholds;
  double cycle_times[BENCH_MAX_LIST];
  int n_cycle_times;
  uint64_t max_tensors[BENCH_MAX_LIST]; /* PLAIT_FUSION_MAX_TENSOR values; */
  int n_max_tensors;                    /* 0: not swept, the job's own value */
  bench_mix_t mixes[BENCH_MAX_MIXES];
  int n_mixes;
  /* The job, once plait is up. */
  int rank, size;
  const char *transport;
} bench_opts_t;

/* Options: fills o from argv (after the subcommand); 0, or -1 with a message
 * on stderr. */
int bench_parse_args(int argc, char **argv, bench_opts_t *o);
void bench_usage(FILE *f);

/* Sizes ("64K" -> 65536) are read by plait_parse_size (plait/parse_size.h),
 * the configuration table's syntax. */
/* 65536 -> "64 KiB" into buf. */
const char *bench_format_size(uint64_t bytes, char *buf, size_t cap);

/* Mixes: "uniform:200x64K", "sizes:4K,1M,..." or a file of bench/mixes/
 * format. 0, or -1 with a message on stderr. */
int bench_load_mix(const char *spec, bench_mix_t *mix);
void bench_free_mix(bench_mix_t *mix);

/* Subcommands; each returns a process exit status. */
int bench_collective(bench_opts_t *o);
int bench_fusion(bench_opts_t *o);
int bench_latency(bench_opts_t *o);
int bench_memcpy(bench_opts_t *o);

/* Shared helpers. */
double bench_now(void);
double bench_median(double *v, int n); /* sorts v */
double bench_percentile(const double *sorted, int n, double p);
/* Elementwise maximum over ranks of v[0..n) (a float64 MAX allreduce). */
plait_result_t bench_max_over_ranks(double *v, int n, const char *name);
plait_result_t bench_barrier(void);
/* Prints "plait-bench: <call> failed: NAME: message" and exits 1. */
void bench_die(const char *what, plait_result_t rc);

#define BENCH_CHECK(call)                                                      \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS) bench_die(#call, rc_);                           \
  } while (0)

#endif
