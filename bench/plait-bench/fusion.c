/*
 * plait-bench fusion: what the fusion buffer does for a step of many
 * allreduces (a tensor-size mix, e.g. a model's gradients in backward order),
 * swept over fusion thresholds, cycle times and (optionally) the largest
 * fused tensor, PLAIT_FUSION_MAX_TENSOR, in one launch; every result records
 * the settings it ran with.
 *
 * Each step submits every tensor of the mix at once, in order, then waits for
 * all of them, as a backward pass with DistributedOptimizer does. Between
 * settings every rank changes PLAIT_FUSION_THRESHOLD, PLAIT_CYCLE_TIME_MS and
 * PLAIT_FUSION_MAX_TENSOR with plait_config_set after a barrier, so one launch measures them all
 * under the same conditions. A step's time is the slowest rank's; the
 * breakdown comes from plait_stats on rank 0 (it plans the fused responses).
 *
 * With PLAIT_AUTOTUNE=1 in the job's environment there is no sweep: for each
 * mix the tuner starts afresh, steps run until it has settled (every rank
 * sees the same state, carried with the response lists) or --settle-max
 * steps or --settle-budget seconds have run, and the timed steps then run
 * with the settings it chose (or, not settled, while it still explores); the
 * row shows them and how many steps it took to settle.
 *
 * --job-settings runs each mix once with the job's own settings instead (the
 * defaults, PLAIT_* from the environment, or what PLAIT_AUTOTUNE=1 chooses
 * while the steps run, with no settling first): nothing is set, and each
 * result is a "tuning" record with every step's time in order ("step_s"), so
 * that a reader can see when the times settled, and the settings in effect
 * after the last step.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct {
  float **buf;   /* one buffer per tensor of the largest mix */
  plait_handle_t **h;
} step_mem_t;

static plait_result_t one_step(const bench_mix_t *mix, step_mem_t *m, int seq) {
  char name[64];
  for (size_t i = 0; i < mix->count; i++) {
    plait_tensor_t t;
    snprintf(name, sizeof name, "g%zu", i); /* the same names every step: the cache works */
    plait_result_t rc = plait_tensor_1d(&t, m->buf[i], mix->bytes[i] / sizeof(float), PLAIT_FLOAT32);
    if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_AVERAGE, NULL, &m->h[i]);
    if (rc != PLAIT_SUCCESS) {
      for (size_t k = 0; k < i; k++) {
        plait_wait(m->h[k], -1);
        plait_release(m->h[k]);
      }
      return rc;
    }
  }
  (void)seq;
  plait_result_t first = PLAIT_SUCCESS;
  for (size_t i = 0; i < mix->count; i++) {
    plait_result_t rc = plait_wait(m->h[i], -1);
    if (rc != PLAIT_SUCCESS && first == PLAIT_SUCCESS) first = rc;
    plait_release(m->h[i]);
  }
  return first;
}

static void set_everywhere(const char *var, const char *value) {
  BENCH_CHECK(bench_barrier());
  BENCH_CHECK(plait_config_set(var, value));
  BENCH_CHECK(bench_barrier());
}

/* A numeric setting of the job (e.g. "PLAIT_FUSION_MAX_TENSOR"), from the
 * values in effect; 0 when it cannot be read. */
static double in_effect(const char *var) {
  char dump[8192], key[64];
  if (plait_config_dump(dump, sizeof dump, NULL) != PLAIT_SUCCESS) return 0;
  snprintf(key, sizeof key, "%s=", var);
  const char *p = strstr(dump, key);
  return p ? strtod(p + strlen(key), NULL) : 0;
}

static uint64_t max_tensor_in_effect(void) {
  return (uint64_t)in_effect("PLAIT_FUSION_MAX_TENSOR");
}

/* --job-settings: one "tuning" record (rank 0), every step's time in order. */
static void write_tuning(const bench_opts_t *o, const bench_mix_t *mix, const double *t,
                         double med, uint64_t threshold, double cycle, uint64_t max_tensor) {
  fprintf(o->json,
          "{\"kind\":\"tuning\",\"mix\":\"%s\",\"transport\":\"%s\",\"ranks\":%d,"
          "\"autotune\":%s,\"threshold_bytes\":%.0f,\"cycle_time_ms\":%g,"
          "\"fusion_max_tensor_bytes\":%.0f,\"tensors_per_step\":%zu,\"bytes_per_step\":%llu,"
          "\"steps\":%d,\"step_s_median\":%.9g,\"step_s\":[",
          mix->name, o->transport, o->size, in_effect("PLAIT_AUTOTUNE") ? "true" : "false",
          (double)threshold, cycle, (double)max_tensor, mix->count, (unsigned long long)mix->total,
          o->steps, med);
  for (int s = 0; s < o->steps; s++) fprintf(o->json, "%s%.6g", s ? "," : "", t[s]);
  fprintf(o->json, "]}\n");
}

/* 1 when the job runs with PLAIT_AUTOTUNE on. */
static int autotune_on(void) {
  char dump[8192];
  return plait_config_dump(dump, sizeof dump, NULL) == PLAIT_SUCCESS &&
         strstr(dump, "PLAIT_AUTOTUNE=1\n") != NULL;
}

/* PLAIT_AUTOTUNE: a fresh tuner for this mix; steps until every rank has
 * seen it settle (checked every 10 steps), or --settle-max steps, or
 * --settle-budget seconds of stepping (rank 0's clock decides, for all).
 * Returns the steps it took, or -1 when it did not settle; *run: the steps
 * run. */
static int settle(const bench_opts_t *o, const bench_mix_t *mix, step_mem_t *mem, int *seq,
                  int *run) {
  set_everywhere("PLAIT_AUTOTUNE", "0"); /* rank 0 decides: this drops its tuner */
  set_everywhere("PLAIT_AUTOTUNE", "1");
  double t0 = bench_now();
  for (int steps = 1; steps <= o->settle_max; steps++) {
    BENCH_CHECK(one_step(mix, mem, (*seq)++));
    *run = steps;
    if (steps % 10) continue;
    plait_stats_t st = {.struct_size = sizeof st};
    BENCH_CHECK(plait_stats(&st));
    /* [0]: settled anywhere; [1]: rank 0 is past the budget */
    double v[2] = {st.autotune_state == 2,
                   o->rank == 0 && o->settle_budget_s && bench_now() - t0 >= o->settle_budget_s};
    BENCH_CHECK(bench_max_over_ranks(v, 2, "fusion.settled"));
    if (v[0] > 0) return steps;
    if (v[1] > 0) break;
  }
  return -1;
}

int bench_fusion(bench_opts_t *o) {
  size_t most = 0;
  for (int m = 0; m < o->n_mixes; m++)
    if (o->mixes[m].count > most) most = o->mixes[m].count;
  step_mem_t mem = {calloc(most, sizeof(float *)), calloc(most, sizeof(plait_handle_t *))};
  if (!mem.buf || !mem.h) return 1;
  for (int m = 0; m < o->n_mixes; m++) {
    const bench_mix_t *mix = &o->mixes[m];
    for (size_t i = 0; i < mix->count; i++) {
      if (mix->bytes[i] % sizeof(float)) {
        fprintf(stderr, "plait-bench: mix %s: tensor %zu has %zu bytes, not whole float32s\n",
                mix->name, i, mix->bytes[i]);
        return 2;
      }
    }
  }
  /* Buffers sized for the largest tensor at each position over all mixes. */
  for (size_t i = 0; i < most; i++) {
    size_t bytes = 0;
    for (int m = 0; m < o->n_mixes; m++)
      if (i < o->mixes[m].count && o->mixes[m].bytes[i] > bytes) bytes = o->mixes[m].bytes[i];
    mem.buf[i] = malloc(bytes);
    if (!mem.buf[i]) {
      fprintf(stderr, "plait-bench: out of memory for the mixes' tensors\n");
      return 1;
    }
    for (size_t k = 0; k < bytes / sizeof(float); k++) mem.buf[i][k] = 1.0f;
  }
  int tuned = autotune_on() && !o->job_settings; /* --job-settings: no settling */
  int n_max = tuned ? 1 : o->n_max_tensors ? o->n_max_tensors : 1;
  int n_thresholds = tuned ? 1 : o->n_thresholds, n_cycles = tuned ? 1 : o->n_cycle_times;
  int settings = o->n_mixes * n_thresholds * n_cycles * n_max, done = 0;
  if (o->rank == 0 && !o->quiet) {
    printf("# plait-bench fusion: %d ranks, transport %s, %d settings, %d warm-up + %d timed "
           "steps each; float32 average allreduces; step time = slowest rank%s\n",
           o->size, o->transport, settings, o->warmup, o->steps,
           tuned ? "; PLAIT_AUTOTUNE=1: no sweep, the settings autotune settled on" : "");
    printf("%-16s %9s %7s %8s %8s %10s %9s %9s %9s %7s %7s %8s %8s %8s %8s\n", "mix", "tensors",
           "MiB", "fusion", "max", "cycle(ms)", "step(ms)", "p10", "p90", "t/resp", "fill", "negot",
           "copyin", "transp", "copyout");
    fflush(stdout);
  }
  double *t = malloc((size_t)o->steps * sizeof *t);
  double *in_order = malloc((size_t)o->steps * sizeof *t);
  if (!t || !in_order) return 1;
  int seq = 0;
  for (int m = 0; m < o->n_mixes; m++) {
    const bench_mix_t *mix = &o->mixes[m];
    for (int ci = 0; ci < n_cycles; ci++) {
      char text[64];
      snprintf(text, sizeof text, "%g", o->cycle_times[ci]);
      if (!tuned && !o->job_settings) set_everywhere("PLAIT_CYCLE_TIME_MS", text);
      for (int setting = 0; setting < n_thresholds * n_max; setting++) {
        int ti = setting / n_max, xi = setting % n_max;
        snprintf(text, sizeof text, "%llu", (unsigned long long)o->thresholds[ti]);
        if (!tuned && !o->job_settings) set_everywhere("PLAIT_FUSION_THRESHOLD", text);
        int settle_run = 0, settle_steps = tuned ? settle(o, mix, &mem, &seq, &settle_run) : 0;
        if (!tuned && !o->job_settings && o->n_max_tensors) {
          snprintf(text, sizeof text, "%llu", (unsigned long long)o->max_tensors[xi]);
          set_everywhere("PLAIT_FUSION_MAX_TENSOR", text);
        }
        uint64_t max_tensor = max_tensor_in_effect();
        for (int w = 0; w < o->warmup; w++) BENCH_CHECK(one_step(mix, &mem, seq++));
        BENCH_CHECK(bench_barrier());
        plait_stats_t before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
        BENCH_CHECK(plait_stats(&before));
        for (int s = 0; s < o->steps; s++) {
          double t0 = bench_now();
          BENCH_CHECK(one_step(mix, &mem, seq++));
          t[s] = bench_now() - t0;
        }
        BENCH_CHECK(plait_stats(&after));
        int now = tuned || o->job_settings; /* the settings the last list ran with */
        uint64_t threshold = now ? after.fusion_threshold_now : o->thresholds[ti];
        double cycle = now ? after.cycle_time_ms_now : o->cycle_times[ci];
        if (now) max_tensor = after.fusion_max_tensor_now;
        snprintf(text, sizeof text, "fusion.times.%d", seq);
        BENCH_CHECK(bench_max_over_ranks(t, o->steps, text));
        if (o->job_settings) memcpy(in_order, t, (size_t)o->steps * sizeof *t);
        double med = bench_median(t, o->steps);
        double p10 = bench_percentile(t, o->steps, 0.1), p90 = bench_percentile(t, o->steps, 0.9);
        double steps = o->steps;
        uint64_t responses = after.responses - before.responses;
        uint64_t tensors = after.tensors - before.tensors;
        uint64_t fbytes = after.fusion_bytes - before.fusion_bytes;
        uint64_t fcap = after.fusion_capacity - before.fusion_capacity;
        double per_resp = responses ? (double)tensors / responses : 0;
        double fill = fcap ? (double)fbytes / fcap : 0;
        double neg = (after.negotiate_s - before.negotiate_s) / steps;
        double cin = (after.copy_in_s - before.copy_in_s) / steps;
        double tr = (after.transport_s - before.transport_s) / steps;
        double cout = (after.copy_out_s - before.copy_out_s) / steps;
        done++;
        if (o->rank == 0) {
          char th[32], mt[32];
          if (tuned && !o->quiet)
            printf("# %s: autotune %s %d steps (%llu samples)%s\n", mix->name,
                   settle_steps < 0 ? "had NOT settled within" : "settled after",
                   settle_run, (unsigned long long)after.autotune_samples,
                   settle_steps < 0 ? "; timed while it still explores" : "");
          if (!o->quiet)
            printf("%-16.16s %9zu %7.1f %8s %8s %10g %9.2f %9.2f %9.2f %7.1f %6.1f%% %8.2f %8.2f "
                 "%8.2f %8.2f   [%d/%d]\n",
                 mix->name, mix->count, mix->total / 1048576.0,
                 threshold ? bench_format_size(threshold, th, sizeof th) : "off",
                 max_tensor ? bench_format_size(max_tensor, mt, sizeof mt) : "-",
                 cycle, med * 1e3, p10 * 1e3, p90 * 1e3, per_resp, fill * 100,
                 neg * 1e3, cin * 1e3, tr * 1e3, cout * 1e3, done, settings);
          fflush(stdout);
          if (o->json && o->job_settings)
            write_tuning(o, mix, in_order, med, threshold, cycle, max_tensor);
          else if (o->json)
            fprintf(o->json,
                    "{\"kind\":\"fusion\",\"mix\":\"%s\",\"transport\":\"%s\",\"ranks\":%d,"
                    "\"threshold_bytes\":%llu,\"fusion_max_tensor_bytes\":%llu,"
                    "\"cycle_time_ms\":%g,\"tensors_per_step\":%zu,"
                    "\"bytes_per_step\":%llu,\"steps\":%d,\"step_s_median\":%.9g,"
                    "\"step_s_p10\":%.9g,\"step_s_p90\":%.9g,\"responses_per_step\":%.6g,"
                    "\"tensors_per_response\":%.6g,\"fusion_fill\":%.6g,\"negotiate_s\":%.9g,"
                    "\"copy_in_s\":%.9g,\"transport_s\":%.9g,\"copy_out_s\":%.9g,"
                    "\"autotune\":%s,\"autotune_settle_steps\":%d,"
                    "\"autotune_steps_run\":%d,\"autotune_settle_max\":%d,"
                    "\"autotune_settle_budget_s\":%d}\n",
                    mix->name, o->transport, o->size, (unsigned long long)threshold,
                    (unsigned long long)max_tensor, cycle, mix->count, (unsigned long long)mix->total, o->steps, med,
                    p10, p90, responses / steps, per_resp, fill, neg, cin, tr, cout,
                    tuned ? "true" : "false", settle_steps, settle_run, o->settle_max,
                    o->settle_budget_s);
        }
      }
    }
  }
  free(t);
  free(in_order);
  for (size_t i = 0; i < most; i++) free(mem.buf[i]);
  free(mem.buf);
  free(mem.h);
  return 0;
}
