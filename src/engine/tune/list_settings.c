/* The settings each response list runs with, chosen on rank 0 and carried
 * to every rank (list_settings.h). */
#include "engine/tune/list_settings.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"

double (*plait_ls_test_clock)(void) = NULL;

void plait_ls_init(plait_list_settings_t *ls, const plait_config_t *cfg, int rank) {
  memset(ls, 0, sizeof *ls);
  ls->cfg = cfg;
  ls->rank = rank;
}

void plait_ls_free(plait_list_settings_t *ls) {
  plait_autotune_free(ls->at);
  ls->at = NULL;
  free(ls->seen);
  ls->seen = NULL;
  ls->nseen = 0;
  ls->by_list = 0;
}

static plait_result_t start_tuner(plait_list_settings_t *ls, const plait_tuning_t *own) {
  plait_autotune_opts_t o = {
      .warmup_samples = (int)ls->cfg->autotune_warmup_samples,
      .steps_per_sample = (int)ls->cfg->autotune_steps_per_sample,
      .max_samples = (int)ls->cfg->autotune_max_samples,
      .repeats = 2,
      .margin = 0.03,
      .min_sample_s = ls->cfg->autotune_sample_min_s,
      .pinned = own->pinned,
      .log_path = ls->cfg->autotune_log};
  plait_autotune_setting_t start = {own->fusion_threshold, own->fusion_max_tensor,
                                    own->cycle_time_ms};
  ls->seen = calloc(PLAIT_LS_SEEN_CAP, sizeof *ls->seen);
  if (!ls->seen) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting autotune");
  ls->nseen = 0;
  ls->by_list = 0;
  PLAIT_CHECK(plait_autotune_create(&o, &start, &ls->at));
  PLAIT_INFO("autotune", "tuning the fusion threshold, largest fused tensor and cycle time from "
             "%llu, %llu bytes and %g ms (fixed: %s%s%s%s), samples of %d training steps "
             "and %g s at least",
             (unsigned long long)start.threshold, (unsigned long long)start.max_tensor,
             start.cycle_ms, o.pinned ? "" : "none",
             o.pinned & PLAIT_AT_PIN(PLAIT_AT_THRESHOLD) ? " PLAIT_FUSION_THRESHOLD" : "",
             o.pinned & PLAIT_AT_PIN(PLAIT_AT_MAX_TENSOR) ? " PLAIT_FUSION_MAX_TENSOR" : "",
             o.pinned & PLAIT_AT_PIN(PLAIT_AT_CYCLE) ? " PLAIT_CYCLE_TIME_MS" : "",
             o.steps_per_sample, o.min_sample_s);
  return PLAIT_SUCCESS;
}

static int same(const plait_list_tuning_t *a, const plait_list_tuning_t *b) {
  return a->active == b->active && a->threshold == b->threshold &&
         a->max_tensor == b->max_tensor && a->cycle_ms == b->cycle_ms;
}

plait_result_t plait_ls_decide(plait_list_settings_t *ls, plait_tuning_t *own) {
  if (ls->rank == 0) {
    if (own->autotune && !ls->at) {
      PLAIT_CHECK(start_tuner(ls, own));
    } else if (!own->autotune && ls->at) {
      PLAIT_INFO("autotune", "turned off: every rank runs with its own settings again");
      plait_ls_free(ls);
    }
    plait_list_tuning_t want = {0, 0, 0, 0};
    if (ls->at) {
      plait_autotune_setting_t s = plait_autotune_current(ls->at);
      unsigned pin = own->pinned;
      want.active = plait_autotune_phase(ls->at) == PLAIT_AT_SETTLED ? 2 : 1;
      want.threshold = pin & PLAIT_AT_PIN(PLAIT_AT_THRESHOLD) ? own->fusion_threshold : s.threshold;
      want.max_tensor =
          pin & PLAIT_AT_PIN(PLAIT_AT_MAX_TENSOR) ? own->fusion_max_tensor : s.max_tensor;
      want.cycle_ms = pin & PLAIT_AT_PIN(PLAIT_AT_CYCLE) ? own->cycle_time_ms : s.cycle_ms;
    }
    if (!same(&want, &ls->now)) {
      ls->now = want;
      ls->unsent = 1;
    }
  }
  if (ls->now.active) {
    own->fusion_threshold = ls->now.threshold;
    own->fusion_max_tensor = ls->now.max_tensor;
    own->cycle_time_ms = ls->now.cycle_ms;
  }
  return PLAIT_SUCCESS;
}

void plait_ls_attach(plait_list_settings_t *ls, plait_response_list_t *l) {
  if (!ls->unsent) return;
  ls->unsent = 0;
  l->flags |= PLAIT_RESP_TUNING;
  l->tuning = ls->now;
  if (ls->now.active == 0) l->tuning.cycle_ms = 1; /* unused; kept valid for the decoder */
}

void plait_ls_receive(plait_list_settings_t *ls, const plait_response_list_t *l) {
  if (l->flags & PLAIT_RESP_TUNING) ls->now = l->tuning;
}

static uint64_t mix(uint64_t h, uint64_t v) { /* FNV-1a over v's bytes */
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h;
}

/* Before the list's handles complete, so a thread that waited on one reads
 * the settings it ran with. */
void plait_ls_before_run(plait_list_settings_t *ls, const plait_tuning_t *v,
                         plait_counters_t *stats) {
  uint64_t cycle_bits;
  memcpy(&cycle_bits, &v->cycle_time_ms, sizeof cycle_bits);
  plait_stats_t *s = plait_stats_lock(stats);
  uint64_t h = s->settings_digest ? s->settings_digest : 0xcbf29ce484222325ull;
  s->settings_digest = mix(mix(mix(mix(h, v->fusion_threshold), v->fusion_max_tensor),
                               cycle_bits), ls->now.active);
  s->fusion_threshold_now = v->fusion_threshold;
  s->fusion_max_tensor_now = v->fusion_max_tensor;
  s->cycle_time_ms_now = v->cycle_time_ms;
  s->autotune_state = ls->now.active;
  s->autotune_samples = ls->at ? plait_autotune_samples(ls->at) : 0;
  ls->before_bytes = s->bytes;
  ls->before_tensors = s->tensors;
  plait_stats_unlock(stats);
}

static uint64_t name_hash(int32_t pset, const char *name) { /* FNV-1a; never 0 */
  uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)(uint32_t)pset);
  for (const unsigned char *p = (const unsigned char *)name; p && *p; p++)
    h = (h ^ *p) * 0x100000001b3ull;
  return h ? h : 1;
}

/* The slot holding h in the set of names seen since the step began, or the
 * empty slot where it goes (never full: at most half its slots are used). */
static size_t slot(const plait_list_settings_t *ls, uint64_t h) {
  size_t mask = PLAIT_LS_SEEN_CAP - 1, i = (size_t)h & mask;
  while (ls->seen[i] && ls->seen[i] != h) i = (i + 1) & mask;
  return i;
}

/* 1 when the list begins a training step: one of its tensors already ran
 * since the last step began (every step reduces each gradient once). Names
 * that never repeat (a new name for every call) give no steps: past
 * PLAIT_LS_SEEN_MAX names, every list counts as a step. */
static int begins_step(plait_list_settings_t *ls, const plait_response_list_t *l) {
  if (ls->by_list) return 1;
  int repeat = 0;
  for (uint32_t i = 0; i < l->n && !repeat; i++)
    for (uint32_t j = 0; j < l->r[i].n && !repeat; j++)
      if (l->r[i].e[j].name)
        repeat = ls->seen[slot(ls, name_hash(l->r[i].pset, l->r[i].e[j].name))] != 0;
  if (repeat) {
    memset(ls->seen, 0, PLAIT_LS_SEEN_CAP * sizeof *ls->seen);
    ls->nseen = 0;
  }
  for (uint32_t i = 0; i < l->n && ls->nseen < PLAIT_LS_SEEN_MAX; i++)
    for (uint32_t j = 0; j < l->r[i].n && ls->nseen < PLAIT_LS_SEEN_MAX; j++) {
      if (!l->r[i].e[j].name) continue;
      uint64_t h = name_hash(l->r[i].pset, l->r[i].e[j].name);
      size_t k = slot(ls, h);
      if (!ls->seen[k]) ls->seen[k] = h, ls->nseen++;
    }
  if (!repeat && ls->nseen >= PLAIT_LS_SEEN_MAX) {
    ls->by_list = 1;
    PLAIT_INFO("autotune", "%d tensor names and none ran twice: a training step cannot be told "
               "from the names, so a sample counts response lists instead of steps",
               PLAIT_LS_SEEN_MAX);
  }
  return repeat;
}

void plait_ls_after_run(plait_list_settings_t *ls, const plait_response_list_t *l,
                        plait_counters_t *stats, double now) {
  if (!ls->at) return; /* the tuner logs and writes its CSV: outside the counters' lock */
  plait_stats_t after = plait_stats_snapshot(stats);
  if (plait_ls_test_clock) now = plait_ls_test_clock();
  if (after.bytes > ls->before_bytes && after.tensors >= ls->before_tensors)
    plait_autotune_step(ls->at, after.bytes - ls->before_bytes,
                        after.tensors - ls->before_tensors, begins_step(ls, l), now);
}
