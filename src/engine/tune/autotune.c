/* The autotuner: samples, medians, coordinate descent over log grids, the
 * settled state and the CSV log (autotune.h). */
#include "engine/tune/autotune.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"

#define MAX_REPEATS 9
#define MAX_STEP_TIMES 64 /* step durations kept per sample for its median */
#define EARLY_REJECT 0.15 /* a first sample this far below the best: worse (no noise known) */
#define NOISE_K 2.0       /* a move needs a gain of NOISE_K standard errors, at least */
#define REJECT_K 3.0      /* a first sample REJECT_K x the noise below the best: worse */
#define REJECT_MIN 0.08   /* ...and at least this far below */
#define RETUNE_FACTOR 1.5 /* the bytes per tensor moved by more than this... */
#define RETUNE_WINDOWS 2  /* ...in this many windows in a row: tune again */
#define WINDOW_LISTS 30   /* a window: whole samples, at least this many lists */

/* The values tried, ascending. For the largest fused tensor, 0 (no limit)
 * counts as larger than any size and is the grid's last value. */
static const double GRID_THRESHOLD[] = {0, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20,
                                        256 << 20};
static const double GRID_MAX_TENSOR[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20,
                                         64 << 20, INFINITY};
static const double GRID_CYCLE[] = {0.1, 0.25, 0.5, 1, 2, 5};

static const struct {
  const char *var;
  const double *grid;
  int n;
} PARAMS[PLAIT_AT_NPARAMS] = {
    {"PLAIT_FUSION_THRESHOLD", GRID_THRESHOLD, 7},
    {"PLAIT_FUSION_MAX_TENSOR", GRID_MAX_TENSOR, 7},
    {"PLAIT_CYCLE_TIME_MS", GRID_CYCLE, 6},
};

typedef double point_t[PLAIT_AT_NPARAMS]; /* max tensor: INFINITY for 0 (no limit) */

struct plait_autotune {
  plait_autotune_opts_t o;
  FILE *log;
  plait_autotune_phase_t phase;
  point_t start, best, cand; /* cand: the setting being measured now */
  double start_score, best_score;
  int have_best;
  int param, dir, moved; /* the parameter walked, -1 down / +1 up, moved this pass */
  int stepped;           /* param already moved in dir: a worse neighbour ends it */
  int probing;           /* the last candidate tied: look past it, once (a plateau) */
  double probe;          /* that candidate's value of param */
  /* Where each parameter's walk last ended: a pass walks it again only when
   * the best setting moved since (another parameter moved). */
  point_t done_at[PLAIT_AT_NPARAMS];
  int have_done[PLAIT_AT_NPARAMS];
  double scores[MAX_REPEATS]; /* the candidate's samples so far */
  int nscores;
  /* The incumbent (best) is measured again after each candidate, whose
   * samples are then bracketed in time by two of the incumbent's: its score
   * is their mean, so a load that drifts steadily cancels out. */
  double inc[2]; /* the incumbent's last two samples, [1] the newer */
  int ninc;
  int checking;     /* the sample running is the incumbent's */
  double pending;   /* the candidate's median, judged after that sample */
  /* the sample in progress: whole training steps */
  int open;         /* a sample is being measured (0: waiting for a step's start) */
  double t0;        /* the boundary it started at */
  double step_t0;   /* the boundary its current step started at */
  double last_end;  /* the end of the last list fed; < 0: none yet */
  uint64_t lists, bytes, tensors, sample_steps;
  double step_s[MAX_STEP_TIMES]; /* the sample's step durations (the first ones) */
  uint64_t samples, steps, train_steps, search_samples;
  /* The noise: the spread of log(score) among a setting's consecutive
   * samples, pooled over every setting measured more than once. */
  double spread_ss;
  int spread_df;
  int capped; /* the last search stopped at max_samples (did not converge) */
  double step_bytes; /* allreduce bytes of a training step, in the last sample */
  /* the traffic profile (bytes per tensor): over the whole search, and over
   * windows of samples once settled */
  uint64_t ref_bytes, ref_tensors, win_bytes, win_tensors, win_lists;
  int drifted; /* windows in a row away from the search's profile */
};

static double to_point(int p, const plait_autotune_setting_t *s) {
  if (p == PLAIT_AT_THRESHOLD) return (double)s->threshold;
  if (p == PLAIT_AT_MAX_TENSOR) return s->max_tensor ? (double)s->max_tensor : INFINITY;
  return s->cycle_ms;
}

static plait_autotune_setting_t to_setting(const point_t x) {
  plait_autotune_setting_t s = {(uint64_t)x[PLAIT_AT_THRESHOLD],
                                isinf(x[PLAIT_AT_MAX_TENSOR]) ? 0 : (uint64_t)x[PLAIT_AT_MAX_TENSOR],
                                x[PLAIT_AT_CYCLE]};
  return s;
}

/* The grid value next to v in direction dir; 0 when there is none. */
static int neighbour(int p, double v, int dir, double *out) {
  const double *g = PARAMS[p].grid;
  int n = PARAMS[p].n;
  if (dir < 0) {
    for (int i = n - 1; i >= 0; i--)
      if (g[i] < v * (1 - 1e-9)) return *out = g[i], 1;
  } else {
    for (int i = 0; i < n; i++)
      if (g[i] > v * (1 + 1e-9) + 1e-12) return *out = g[i], 1;
  }
  return 0;
}

static const char *phase_name(plait_autotune_phase_t p) {
  return p == PLAIT_AT_WARMUP ? "warmup" : p == PLAIT_AT_EXPLORING ? "explore" : "settled";
}

/* "64M", "256K", "1000": a size as a user would write it. */
static const char *size_text(uint64_t v, char *buf, size_t cap) {
  if (v && !(v & ((1u << 20) - 1)))
    snprintf(buf, cap, "%lluM", (unsigned long long)(v >> 20));
  else if (v && !(v & 1023))
    snprintf(buf, cap, "%lluK", (unsigned long long)(v >> 10));
  else
    snprintf(buf, cap, "%llu", (unsigned long long)v);
  return buf;
}

static const char *setting_text(const point_t x, char *buf, size_t cap) {
  plait_autotune_setting_t s = to_setting(x);
  char a[32], b[32];
  snprintf(buf, cap, "PLAIT_FUSION_THRESHOLD=%s PLAIT_FUSION_MAX_TENSOR=%s PLAIT_CYCLE_TIME_MS=%g",
           size_text(s.threshold, a, sizeof a), size_text(s.max_tensor, b, sizeof b), s.cycle_ms);
  return buf;
}

plait_result_t plait_autotune_create(const plait_autotune_opts_t *opts,
                                     const plait_autotune_setting_t *start,
                                     plait_autotune_t **out) {
  plait_autotune_t *at = calloc(1, sizeof *at);
  if (!at) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting autotune");
  at->o = *opts;
  if (at->o.steps_per_sample < 1) at->o.steps_per_sample = 1;
  if (at->o.repeats < 1) at->o.repeats = 1;
  if (at->o.repeats > MAX_REPEATS) at->o.repeats = MAX_REPEATS;
  if (at->o.max_samples < 1) at->o.max_samples = 1;
  if (!(at->o.min_sample_s >= 0)) at->o.min_sample_s = 0;
  at->o.log_path = NULL; /* the caller's string is not kept */
  if (opts->log_path && *opts->log_path) {
    if (!(at->log = fopen(opts->log_path, "w"))) {
      int err = errno;
      free(at);
      return plait_error(PLAIT_ERR_CONFIG, "PLAIT_AUTOTUNE_LOG='%s' cannot be written: %s",
                         opts->log_path, strerror(err));
    }
    fprintf(at->log, "sample,phase,fusion_threshold,fusion_max_tensor,cycle_time_ms,steps,lists,"
                     "tensors,bytes,seconds,bytes_per_s\n");
    fflush(at->log);
  }
  for (int p = 0; p < PLAIT_AT_NPARAMS; p++) at->start[p] = to_point(p, start);
  memcpy(at->best, at->start, sizeof at->best);
  memcpy(at->cand, at->start, sizeof at->cand);
  at->phase = at->o.warmup_samples > 0 ? PLAIT_AT_WARMUP : PLAIT_AT_EXPLORING;
  at->last_end = -1;
  *out = at;
  return PLAIT_SUCCESS;
}

void plait_autotune_free(plait_autotune_t *at) {
  if (!at) return;
  if (at->log) fclose(at->log);
  free(at);
}

/* The setting the lists run with now. */
static const double *running(const plait_autotune_t *at) {
  return at->phase == PLAIT_AT_EXPLORING && !at->checking ? at->cand : at->best;
}

plait_autotune_setting_t plait_autotune_current(const plait_autotune_t *at) {
  return to_setting(running(at));
}

plait_autotune_phase_t plait_autotune_phase(const plait_autotune_t *at) { return at->phase; }
uint64_t plait_autotune_samples(const plait_autotune_t *at) { return at->samples; }
uint64_t plait_autotune_steps(const plait_autotune_t *at) { return at->steps; }
uint64_t plait_autotune_train_steps(const plait_autotune_t *at) { return at->train_steps; }
int plait_autotune_capped(const plait_autotune_t *at) {
  return at->phase == PLAIT_AT_SETTLED && at->capped;
}

/* The spread of log(score) among one setting's consecutive samples: the sum
 * of squares about their mean (n - 1 degrees of freedom). */
static double sum_sq_log(const double *scores, int n) {
  double mean = 0, ss = 0;
  for (int i = 0; i < n; i++) mean += log(scores[i] > 0 ? scores[i] : 1e-300) / n;
  for (int i = 0; i < n; i++) {
    double d = log(scores[i] > 0 ? scores[i] : 1e-300) - mean;
    ss += d * d;
  }
  return ss;
}

/* The relative noise of one sample (0 until a setting was measured twice),
 * with the n samples in scores pooled in too (NULL: none). */
static double noise_with(const plait_autotune_t *at, const double *scores, int n) {
  double ss = at->spread_ss;
  int df = at->spread_df;
  if (scores && n >= 2) {
    ss += sum_sq_log(scores, n);
    df += n - 1;
  }
  return df ? sqrt(ss / df) : 0;
}

static double noise(const plait_autotune_t *at) { return noise_with(at, NULL, 0); }

/* A candidate measured n times is better or worse than the incumbent (its
 * two samples around the candidate's) only beyond this fraction: the margin,
 * or NOISE_K standard errors of their difference when that is larger (a
 * margin below the noise makes the search walk on noise and never converge).
 * The noise counts the candidate's own samples (scores; NULL once they were
 * added to it), so a close call is called with the band judge() applies. */
static double band_n(const plait_autotune_t *at, const double *scores, int n) {
  double b = NOISE_K * noise_with(at, scores, n) * sqrt(1.0 / (n > 0 ? n : 1) + 0.5);
  return b > at->o.margin ? b : at->o.margin;
}

static double band(const plait_autotune_t *at) { return band_n(at, NULL, 2); }

/* One setting's consecutive samples: their spread joins the noise. */
static void add_spread(plait_autotune_t *at, const double *scores, int n) {
  if (n < 2) return;
  at->spread_ss += sum_sq_log(scores, n);
  at->spread_df += n - 1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void settle(plait_autotune_t *at, int capped) {
  at->phase = PLAIT_AT_SETTLED;
  at->capped = capped;
  at->win_bytes = at->win_tensors = at->win_lists = 0;
  at->drifted = 0;
  char best[160], start[160];
  double ratio = at->start_score > 0 ? at->best_score / at->start_score : 1;
  char why[160];
  if (capped)
    snprintf(why, sizeof why, "stopped at the sample cap (PLAIT_AUTOTUNE_MAX_SAMPLES=%d), did not "
             "converge", at->o.max_samples);
  else
    snprintf(why, sizeof why, "converged: a pass moved nothing (noise %.1f%% a sample, a move "
             "needed %.1f%%)", 100 * noise(at), 100 * band(at));
  PLAIT_INFO("autotune", "settled after %llu samples (%llu steps, %llu response lists): %s; "
             "%.1f MB/s, %.2fx the start (%s: %.1f MB/s)%s; %s", (unsigned long long)at->samples,
             (unsigned long long)at->train_steps, (unsigned long long)at->steps,
             setting_text(at->best, best, sizeof best),
             at->best_score / 1e6, ratio, setting_text(at->start, start, sizeof start),
             at->start_score / 1e6,
             at->o.pinned ? " (variables set explicitly were kept)" : "", why);
}

/* param's walk is over: remember where, and go on to the next one. */
static void param_done(plait_autotune_t *at) {
  if (at->param < PLAIT_AT_NPARAMS) {
    memcpy(at->done_at[at->param], at->best, sizeof at->best);
    at->have_done[at->param] = 1;
  }
  at->param++;
  at->dir = -1;
  at->stepped = at->probing = 0;
}

/* 1 when param's walk would start where its last one ended: nothing to learn. */
static int walked_here(const plait_autotune_t *at) {
  int p = at->param;
  return at->dir < 0 && !at->stepped && !at->probing && at->have_done[p] &&
         !memcmp(at->done_at[p], at->best, sizeof at->best);
}

/* The next setting to measure, from best: along param in dir, or the next
 * parameter, or the next pass, or settle. */
static void next_candidate(plait_autotune_t *at) {
  int capped = 0;
  for (;;) {
    if (at->search_samples >= (uint64_t)at->o.max_samples) {
      capped = 1;
      break;
    }
    if (at->param < PLAIT_AT_NPARAMS && !(at->o.pinned & PLAIT_AT_PIN(at->param)) &&
        !walked_here(at)) {
      double v;
      double from = at->probing ? at->probe : at->best[at->param];
      if (neighbour(at->param, from, at->dir, &v)) {
        memcpy(at->cand, at->best, sizeof at->cand);
        at->cand[at->param] = v;
        return;
      }
      at->probing = 0;
      if (at->dir < 0 && !at->stepped) { /* nothing below: try above */
        at->dir = 1;
        continue;
      }
    }
    if (at->param < PLAIT_AT_NPARAMS) { /* this parameter is done */
      param_done(at);
      continue;
    }
    if (!at->moved) break; /* a whole pass moved nothing: settled */
    at->param = 0;
    at->dir = -1;
    at->moved = at->stepped = at->probing = 0;
  }
  memcpy(at->cand, at->best, sizeof at->cand);
  settle(at, capped);
}

/* A new incumbent: its latest sample is the one before the next candidate. */
static void incumbent_is(plait_autotune_t *at, const double *scores, int n) {
  at->inc[1] = scores[n - 1];
  at->ninc = 1;
}

static void incumbent_sample(plait_autotune_t *at, double score) {
  at->inc[0] = at->inc[1];
  at->inc[1] = score;
  at->ninc = at->ninc ? 2 : 1;
  at->best_score = at->ninc == 2 ? (at->inc[0] + at->inc[1]) / 2 : score;
}

/* A threshold at or above a step's bytes fuses the whole step like any larger
 * one: a tie there is the plateau, and the walk down goes on past it however
 * many grid values it spans. Elsewhere a tie is looked past once. */
static int on_plateau(const plait_autotune_t *at) {
  return at->param == PLAIT_AT_THRESHOLD && at->step_bytes > 0 &&
         at->cand[PLAIT_AT_THRESHOLD] >= at->step_bytes;
}

/* The candidate has its median score m (its samples in scores[0..n)). */
static void judge(plait_autotune_t *at, double m, const double *scores, int n) {
  add_spread(at, scores, n);
  double b = band_n(at, NULL, n);
  if (!at->have_best) { /* the start */
    at->have_best = 1;
    at->start_score = at->best_score = m;
    incumbent_is(at, scores, n);
    at->param = 0;
    at->dir = -1;
    at->moved = at->stepped = at->probing = 0;
    memset(at->have_done, 0, sizeof at->have_done);
  } else if (m > at->best_score * (1 + b)) {
    memcpy(at->best, at->cand, sizeof at->best);
    at->best_score = m;
    incumbent_is(at, scores, n);
    at->moved = at->stepped = 1; /* keep walking the same way */
    at->probing = 0;
  } else if (m >= at->best_score * (1 - b) && (!at->probing || on_plateau(at))) {
    at->probing = 1; /* a tie: the next value that way may be better (a threshold above */
    at->probe = at->cand[at->param]; /* every step's bytes fuses the same) */
  } else if (at->dir < 0 && !at->stepped) { /* worse, or a second tie: the other way */
    at->dir = 1;
    at->probing = 0;
  } else {
    param_done(at);
  }
  next_candidate(at);
}

static void write_sample(plait_autotune_t *at, const point_t x, double secs, double score) {
  if (!at->log) return;
  plait_autotune_setting_t s = to_setting(x);
  fprintf(at->log, "%llu,%s,%llu,%llu,%g,%llu,%llu,%llu,%llu,%.6f,%.1f\n",
          (unsigned long long)at->samples, phase_name(at->phase),
          (unsigned long long)s.threshold, (unsigned long long)s.max_tensor, s.cycle_ms,
          (unsigned long long)at->sample_steps, (unsigned long long)at->lists,
          (unsigned long long)at->tensors, (unsigned long long)at->bytes, secs, score);
  fflush(at->log);
}

/* Settled: has the traffic changed? Then tuning starts again from best.
 * Windows of many lists, so a step whose tensors are split differently
 * between lists from one step to the next is not a change. */
static void watch_profile(plait_autotune_t *at) {
  at->win_bytes += at->bytes;
  at->win_tensors += at->tensors;
  at->win_lists += at->lists;
  if (at->win_lists < WINDOW_LISTS) return;
  double ref = at->ref_tensors ? (double)at->ref_bytes / (double)at->ref_tensors : 0;
  double now = at->win_tensors ? (double)at->win_bytes / (double)at->win_tensors : 0;
  at->win_bytes = at->win_tensors = at->win_lists = 0;
  double r = ref > 0 && now > 0 ? now / ref : 1;
  at->drifted = (r > RETUNE_FACTOR || r < 1 / RETUNE_FACTOR) ? at->drifted + 1 : 0;
  if (at->drifted < RETUNE_WINDOWS) return;
  PLAIT_INFO("autotune", "the traffic changed (%.0f bytes per tensor, %.0f while it tuned): "
             "tuning again", now, ref);
  memcpy(at->start, at->best, sizeof at->start);
  memcpy(at->cand, at->best, sizeof at->cand);
  at->have_best = 0;
  at->search_samples = 0;
  at->capped = 0;
  at->nscores = 0;
  at->checking = 0;
  at->ref_bytes = at->ref_tensors = 0;
  at->drifted = 0;
  at->phase = PLAIT_AT_EXPLORING;
}

/* A sample ended with score: what follows. Returns 1 when the settings change. */
static int sample_done(plait_autotune_t *at, double secs, double score) {
  at->samples++;
  point_t before;
  memcpy(before, running(at), sizeof before);
  write_sample(at, before, secs, score);
  if (at->phase == PLAIT_AT_WARMUP) {
    if (at->samples >= (uint64_t)at->o.warmup_samples) at->phase = PLAIT_AT_EXPLORING;
    return 0;
  }
  if (at->phase == PLAIT_AT_SETTLED) { /* a new search starts from the same settings */
    watch_profile(at);
    return 0;
  }
  at->search_samples++;
  if (at->sample_steps) at->step_bytes = (double)at->bytes / (double)at->sample_steps;
  at->ref_bytes += at->bytes;
  at->ref_tensors += at->tensors;
  int budget_left = at->search_samples < (uint64_t)at->o.max_samples;
  if (at->checking) { /* the incumbent again, under today's load: now judge */
    at->checking = 0;
    incumbent_sample(at, score);
    judge(at, at->pending, at->scores, at->nscores);
    at->nscores = 0;
  } else {
    at->scores[at->nscores++] = score;
    double reject = at->spread_df ? REJECT_K * noise(at) : EARLY_REJECT;
    if (reject < REJECT_MIN) reject = REJECT_MIN;
    if (at->have_best && at->nscores == 1 && score < at->best_score * (1 - reject)) {
      judge(at, score, at->scores, 1); /* clearly worse: no need to measure it again */
      at->nscores = 0;
      return memcmp(running(at), before, sizeof before) != 0;
    }
    if (at->nscores < at->o.repeats && budget_left) return 0;
    double copy[MAX_REPEATS];
    memcpy(copy, at->scores, sizeof copy);
    double m = median(copy, at->nscores);
    /* A close call (better, but not by the band): more samples, up to twice
     * as many, which narrow the band; a clear loss or tie is not worth them. */
    if (at->have_best && budget_left && m > at->best_score &&
        m <= at->best_score * (1 + band_n(at, at->scores, at->nscores)) &&
        at->nscores < 2 * at->o.repeats && at->nscores < MAX_REPEATS)
      return 0;
    if (at->have_best && budget_left) {
      at->checking = 1;
      at->pending = m;
    } else {
      judge(at, m, at->scores, at->nscores);
      at->nscores = 0;
    }
  }
  return memcmp(running(at), before, sizeof before) != 0;
}

/* The sample in progress ends at the boundary of a step (the end of the
 * list before new_step's): once it holds steps_per_sample steps and
 * min_sample_s seconds. Its score: the bytes of a step over its median step's
 * duration (one step slowed by something else does not move it). A change of
 * settings leaves the step that has begun out (its first list ran under the
 * old settings): the next sample starts at the boundary after it. */
int plait_autotune_step(plait_autotune_t *at, uint64_t bytes, uint64_t tensors, int new_step,
                        double now) {
  at->steps++;
  double boundary = at->last_end;
  at->last_end = now;
  int changed = 0;
  if (new_step && boundary >= 0) {
    at->train_steps++;
    if (at->open && at->sample_steps <= MAX_STEP_TIMES)
      at->step_s[at->sample_steps - 1] = boundary - at->step_t0;
    if (at->open && at->sample_steps >= (uint64_t)at->o.steps_per_sample &&
        boundary - at->t0 >= at->o.min_sample_s) {
      int n = at->sample_steps < MAX_STEP_TIMES ? (int)at->sample_steps : MAX_STEP_TIMES;
      double step = median(at->step_s, n);
      double score = (double)at->bytes / (double)at->sample_steps / (step > 1e-9 ? step : 1e-9);
      changed = sample_done(at, boundary - at->t0, score);
      at->open = 0;
    }
    if (!changed && !at->open) {
      at->open = 1;
      at->t0 = boundary;
      at->lists = at->bytes = at->tensors = at->sample_steps = 0;
    }
    if (at->open) {
      at->sample_steps++;
      at->step_t0 = boundary;
    }
  }
  if (!at->open) return changed;
  at->lists++;
  at->bytes += bytes;
  at->tensors += tensors;
  return changed;
}
