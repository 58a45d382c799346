/*
 * Internal: the autotuner (PLAIT_AUTOTUNE). Rank 0's coordinator owns one and
 * feeds it, after each response list that moved allreduce bytes, the bytes,
 * the tensors and the time; the tuner answers with the settings the next
 * lists are planned and run with, which travel to every rank inside the
 * response list (negotiate/messages.h), so every rank runs every list with the
 * same settings.
 *
 * The search (docs/configuration.md, "Autotuning"):
 * - a sample is whole training steps, at least steps_per_sample of them and
 *   at least min_sample_s seconds; its score is the allreduce bytes they
 *   moved per second of wall time, from the end of the step before the sample
 *   to the end of its last step (compute time included: settings that make
 *   the step shorter score higher). The caller says which list starts a step
 *   (list_settings.c: a tensor name repeats). Whole steps, because a sample
 *   of a few lists out of a step measures the lists' own pace and leaves out
 *   the gaps between them, which the settings change too (a short cycle time
 *   makes many quick lists and a longer step);
 * - the first warmup_samples samples are discarded, and so is the step under
 *   way at every change of settings (its first list ran under the old ones);
 * - every setting tried is measured `repeats` times; its score is the median;
 *   right after a candidate, the incumbent (the best so far) is measured once
 *   more, and the candidate is compared with the mean of the incumbent's
 *   samples just before and just after it (a load that drifts while the
 *   search runs affects both alike);
 * - the noise is measured: the spread of log(score) among a setting's
 *   consecutive samples, pooled over every setting measured twice or more. A
 *   candidate is better or worse only beyond the band, 2 standard errors of
 *   the comparison (or `margin`, when larger); a first sample 3x the noise
 *   below the best (at least 8%) rejects it at once; a close call (better,
 *   but within the band, the candidate's own samples counted in the noise as
 *   the judgement counts them) gets up to `repeats` samples more;
 * - the start (the configured values) is measured first; then coordinate
 *   descent over log grids: for each free parameter in turn (threshold,
 *   largest fused tensor, cycle time) it walks to the neighbouring grid value
 *   while that scores better, down first, then up, past a value that ties
 *   once, and past every tie of a threshold at or above a step's bytes (those
 *   all fuse the whole step: the better one may lie beyond); a pass walks a
 *   parameter again only when the best setting moved since its last walk;
 *   the passes end when one moves nothing (converged) or max_samples samples
 *   were taken (capped: plait_autotune_capped). Then it settles on the best
 *   setting measured and stops exploring;
 * - settled, it keeps only the traffic profile (bytes per tensor, over
 *   windows of whole samples of at least 30 lists): when it is more than a
 *   factor of 1.5 away from the profile seen while searching for 2 windows in
 *   a row, the search starts again from the settled settings.
 * Pinned parameters (set explicitly by the user) are never changed.
 *
 * Time comes in as an argument: the tuner reads no clock, so tests drive it
 * with a synthetic clock. Not thread-safe: one thread (rank 0's coordinator).
 */
#ifndef PLAIT_AUTOTUNE_H
#define PLAIT_AUTOTUNE_H

#include <stdint.h>

#include "plait/plait.h"

enum { PLAIT_AT_THRESHOLD, PLAIT_AT_MAX_TENSOR, PLAIT_AT_CYCLE, PLAIT_AT_NPARAMS };
#define PLAIT_AT_PIN(p) (1u << (p)) /* a bit of plait_autotune_opts_t.pinned */

typedef struct plait_autotune_setting {
  uint64_t threshold;  /* PLAIT_FUSION_THRESHOLD, bytes; 0: no fusion */
  uint64_t max_tensor; /* PLAIT_FUSION_MAX_TENSOR, bytes; 0: no limit */
  double cycle_ms;     /* PLAIT_CYCLE_TIME_MS */
} plait_autotune_setting_t;

typedef struct plait_autotune_opts {
  int warmup_samples;   /* PLAIT_AUTOTUNE_WARMUP_SAMPLES */
  int steps_per_sample; /* PLAIT_AUTOTUNE_STEPS_PER_SAMPLE: training steps, >= 1 */
  double min_sample_s;  /* a sample lasts at least this long (whole steps) */
  int max_samples;      /* PLAIT_AUTOTUNE_MAX_SAMPLES: explore at most this many */
  int repeats;          /* samples per setting tried (median); >= 1 */
  double margin;        /* a move needs a median better by this fraction */
  unsigned pinned;      /* PLAIT_AT_PIN bits: parameters never changed */
  const char *log_path; /* PLAIT_AUTOTUNE_LOG; NULL or "": no CSV */
} plait_autotune_opts_t;

typedef enum {
  PLAIT_AT_WARMUP = 0,
  PLAIT_AT_EXPLORING = 1,
  PLAIT_AT_SETTLED = 2
} plait_autotune_phase_t;

typedef struct plait_autotune plait_autotune_t;

/* Starts tuning from start (the configured values; pinned ones stay). The
 * CSV log, when asked for, is created (truncated) with its header line now:
 * PLAIT_ERR_CONFIG naming the path and the system's reason when it cannot
 * be. PLAIT_ERR_NO_MEMORY. */
plait_result_t plait_autotune_create(const plait_autotune_opts_t *opts,
                                     const plait_autotune_setting_t *start,
                                     plait_autotune_t **out);
/* Closes the log. NULL does nothing. */
void plait_autotune_free(plait_autotune_t *at);

/* One response list ran (under the settings plait_autotune_current gave
 * before it was planned): it moved bytes of allreduce data in tensors
 * tensors and ended at now (seconds, any origin, never decreasing); new_step
 * is 1 when it is the first list of a training step (a step ended with the
 * list before it). Returns 1 when the settings changed (the next list is
 * planned with the new ones). */
int plait_autotune_step(plait_autotune_t *at, uint64_t bytes, uint64_t tensors, int new_step,
                        double now);

/* The settings to plan and run the next list with. */
plait_autotune_setting_t plait_autotune_current(const plait_autotune_t *at);
plait_autotune_phase_t plait_autotune_phase(const plait_autotune_t *at);
/* Samples measured so far (warmup included). */
uint64_t plait_autotune_samples(const plait_autotune_t *at);
/* Response lists fed to it so far. */
uint64_t plait_autotune_steps(const plait_autotune_t *at);
/* Training steps begun so far (lists fed with new_step, the first aside). */
uint64_t plait_autotune_train_steps(const plait_autotune_t *at);
/* 1 when the last search stopped because it took max_samples samples (it
 * did not converge: it settled on the best measured by then); 0 when a pass
 * moved nothing (converged) or while it still searches. */
int plait_autotune_capped(const plait_autotune_t *at);

#endif
