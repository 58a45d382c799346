/*
 * The autotuner converges well before its sample cap on a noisy machine
 * (issue 37, goal 5): a move needs a gain larger than the noise measured by
 * repeating a setting, a tie is looked past once, and the search stops when a
 * pass moves nothing. Synthetic clock and cost model, as in test_autotune.c:
 * nothing here depends on the speed or load of the machine.
 *
 * The noise is that of plait-bench fusion's samples on this machine under
 * load (bench/results/autotune-*.csv: a setting's samples spread by about
 * 4%), where the tuner before this change walked back and forth on noise and
 * stopped at the cap of 100 samples on 7 of 8 rows.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tune/autotune.h"

#define MiB (1ull << 20)

typedef struct {
  double thr, mt, cyc; /* the optimum; INFINITY: no limit */
  double slope;        /* the cost per factor of 2 away from it (0: every setting alike) */
  double jitter;       /* each step's duration varies by +-jitter/2 */
  uint32_t rng;
} model_t;

static double lg(double v, double zero) { return log2(v > 0 ? (isinf(v) ? 1e12 : v) : zero); }

static double step_cost(const model_t *m, plait_autotune_setting_t s) {
  double mt = s.max_tensor ? (double)s.max_tensor : INFINITY;
  double away = fabs(lg((double)s.threshold, 64 << 10) - lg(m->thr, 64 << 10)) +
                fabs(lg(mt, 1) - lg(m->mt, 1)) + fabs(log2(s.cycle_ms) - log2(m->cyc));
  return 0.010 * (1 + m->slope * away);
}

static double step_seconds(model_t *m, plait_autotune_setting_t s) {
  m->rng = m->rng * 1664525u + 1013904223u;
  double u = (double)(m->rng >> 8) / (double)(1u << 24) - 0.5;
  return step_cost(m, s) * (1 + u * m->jitter);
}

/* The options plait runs with by default (list_settings.c, config_table.h). */
static plait_autotune_opts_t defaults_opts(void) {
  plait_autotune_opts_t o = {.warmup_samples = 3, .steps_per_sample = 3, .max_samples = 100,
                             .repeats = 2, .margin = 0.03};
  return o;
}

static const plait_autotune_setting_t DEFAULTS = {64 * MiB, 0, 1.0};

/* Steps (one list each) until it settles or limit steps. */
static void drive(plait_autotune_t *at, model_t *m, int limit) {
  double clock = 0;
  for (int k = 0; k < limit && plait_autotune_phase(at) != PLAIT_AT_SETTLED; k++) {
    clock += step_seconds(m, plait_autotune_current(at));
    plait_autotune_step(at, 100 * MiB, 50, 1, clock);
  }
}

/* Every setting costs the same and the steps spread by +-10% (about 4% a
 * sample, as measured): nothing to gain, so the search must stop soon, on
 * the noise it measured, and never reach the cap. */
Test(autotune_converge, a_flat_noisy_machine_converges_well_before_the_cap) {
  for (uint32_t seed = 1; seed <= 12; seed++) {
    model_t m = {64 * MiB, INFINITY, 1, 0, 0.2, seed};
    plait_autotune_opts_t o = defaults_opts();
    plait_autotune_t *at;
    cr_assert_eq(plait_autotune_create(&o, &DEFAULTS, &at), PLAIT_SUCCESS);
    drive(at, &m, 100000);
    cr_assert_eq(plait_autotune_phase(at), PLAIT_AT_SETTLED);
    uint64_t n = plait_autotune_samples(at);
    cr_log_info("seed %u: settled after %llu samples", seed, (unsigned long long)n);
    cr_expect_eq(plait_autotune_capped(at), 0, "seed %u: stopped at the cap", seed);
    cr_expect_leq(n, 3 + 55, "seed %u: %llu samples to settle on a flat machine", seed,
                  (unsigned long long)n);
    plait_autotune_free(at);
  }
}

/* The defaults are far from the best (8% a factor of 2, as test_autotune.c's
 * model: the defaults cost 1.3x-3.4x the best): it converges before the cap and lands within 10% of
 * the best (goal 5's rule for rows where the defaults are 1.15x off). */
Test(autotune_converge, far_from_the_best_it_converges_within_10_percent) {
  struct {
    double thr, mt, cyc;
  } optima[] = {{4 * MiB, 1 * MiB, 0.5}, {1 * MiB, 64 << 10, 1}, {256 * MiB, INFINITY, 0.25},
                {16 * MiB, 4 * MiB, 2}};
  for (size_t i = 0; i < sizeof optima / sizeof optima[0]; i++) {
    for (uint32_t seed = 1; seed <= 5; seed++) {
      model_t m = {optima[i].thr, optima[i].mt, optima[i].cyc, 0.08, 0.2, seed * 31 + (uint32_t)i};
      plait_autotune_opts_t o = defaults_opts();
      plait_autotune_t *at;
      cr_assert_eq(plait_autotune_create(&o, &DEFAULTS, &at), PLAIT_SUCCESS);
      drive(at, &m, 100000);
      cr_assert_eq(plait_autotune_phase(at), PLAIT_AT_SETTLED);
      plait_autotune_setting_t best = {(uint64_t)optima[i].thr,
                                       isinf(optima[i].mt) ? 0 : (uint64_t)optima[i].mt,
                                       optima[i].cyc};
      plait_autotune_setting_t s = plait_autotune_current(at);
      double ratio = step_cost(&m, s) / step_cost(&m, best);
      double start = step_cost(&m, DEFAULTS) / step_cost(&m, best);
      cr_log_info("optimum %zu seed %u: defaults %.2fx, settled after %llu samples on %.2fx",
                  i, seed, start, (unsigned long long)plait_autotune_samples(at), ratio);
      cr_expect_eq(plait_autotune_capped(at), 0, "optimum %zu seed %u: stopped at the cap", i,
                   seed);
      cr_expect_leq(ratio, 1.10, "optimum %zu seed %u: settled on %llu, %llu, %g ms: %.2fx "
                    "the best (the defaults: %.2fx)", i, seed, (unsigned long long)s.threshold,
                    (unsigned long long)s.max_tensor, s.cycle_ms, ratio, start);
      plait_autotune_free(at);
    }
  }
}

/* The cap still bounds a search, and then the tuner says it did not
 * converge (the log line bench/goals.py reads, and plait_autotune_capped). */
Test(autotune_converge, a_search_stopped_by_the_cap_says_so) {
  model_t m = {0, 64 << 10, 0.1, 0.08, 0.02, 3};
  plait_autotune_opts_t o = defaults_opts();
  o.max_samples = 5;
  plait_autotune_t *at;
  cr_assert_eq(plait_autotune_create(&o, &DEFAULTS, &at), PLAIT_SUCCESS);
  drive(at, &m, 100000);
  cr_assert_eq(plait_autotune_phase(at), PLAIT_AT_SETTLED);
  cr_expect_eq(plait_autotune_capped(at), 1);
  cr_expect_leq(plait_autotune_samples(at), 3 + 5);
  plait_autotune_free(at);
}

/* A normal deviate (the sum of 12 uniforms, less 6). */
static double gauss(uint32_t *r) {
  double s = 0;
  for (int i = 0; i < 12; i++) {
    *r = *r * 1664525u + 1013904223u;
    s += (double)(*r >> 8) / (double)(1u << 24);
  }
  return s - 6;
}

/* The load of a shared machine: it drifts from step to step (log of a
 * first-order autoregression, correlation 0.7 a step, standard deviation sd),
 * so the steps of one sample are slowed alike and a sample's median does not
 * average it away. */
typedef struct {
  model_t m;
  double load, sd;
  uint32_t rng;
} loaded_t;

static void drive_loaded(plait_autotune_t *at, loaded_t *l, int limit) {
  const double rho = 0.7;
  double clock = 0;
  for (int k = 0; k < limit && plait_autotune_phase(at) != PLAIT_AT_SETTLED; k++) {
    l->load = rho * l->load + l->sd * sqrt(1 - rho * rho) * gauss(&l->rng);
    clock += step_seconds(&l->m, plait_autotune_current(at)) * exp(l->load);
    plait_autotune_step(at, 100 * MiB, 50, 1, clock);
  }
}

/* The 10M-parameter MLP over Gloo at 3 ranks in ci/bench tune (2026-12-07):
 * 16 MiB is 1.15x faster than the default 64 MiB, one grid step away, and
 * the samples spread by about 6% (autotune-gloo-3r-mlp-10m.csv as stored at
 * 57e1d59). The tuner
 * there judged 16 MiB a tie. A close call gets more samples only when its
 * gain is within the band; that band must count the candidate's own samples,
 * as judge() does. Without them (before 2026-12-07) the check saw the start's
 * tighter noise, judged the gain clear, skipped the extra samples, and then
 * judge() with the wider noise called it a tie: 35 of these 40 seeds landed
 * within 10%, 38 with it. Deterministic: the same seeds every run. */
Test(autotune_converge, a_close_gain_through_drifting_load_gets_its_samples) {
  int within = 0;
  for (uint32_t seed = 1; seed <= 40; seed++) {
    loaded_t l = {{16 * MiB, INFINITY, 1, 0.075, 0.1, seed}, 0, 0.06, seed * 7919u};
    plait_autotune_opts_t o = defaults_opts();
    plait_autotune_t *at;
    cr_assert_eq(plait_autotune_create(&o, &DEFAULTS, &at), PLAIT_SUCCESS);
    drive_loaded(at, &l, 100000);
    cr_assert_eq(plait_autotune_phase(at), PLAIT_AT_SETTLED);
    cr_expect_eq(plait_autotune_capped(at), 0, "seed %u: stopped at the cap", seed);
    plait_autotune_setting_t best = {16 * MiB, 0, 1};
    double ratio = step_cost(&l.m, plait_autotune_current(at)) / step_cost(&l.m, best);
    within += ratio <= 1.10;
    plait_autotune_free(at);
  }
  cr_log_info("within 10%% of the best on %d of 40 seeds (the defaults: 1.15x)", within);
  cr_expect_geq(within, 37, "within 10%% of the best on only %d of 40 seeds", within);
}
