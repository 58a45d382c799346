/* The run-time settings of one engine, under one lock (tunables.h). */
#include "engine/tune/tunables.h"

#include <string.h>

#include "engine/tune/autotune.h"
#include "util/error.h"

static const char *const settable[] = {"PLAIT_FUSION_THRESHOLD", "PLAIT_FUSION_MAX_TENSOR",
                                       "PLAIT_CYCLE_TIME_MS", "PLAIT_LOG_LEVEL",
                                       "PLAIT_TIMELINE_MARK_CYCLES", "PLAIT_AUTOTUNE"};

/* The variables autotune tunes, in PLAIT_AT_* order. */
static const char *const tuned[PLAIT_AT_NPARAMS] = {"PLAIT_FUSION_THRESHOLD",
                                                     "PLAIT_FUSION_MAX_TENSOR",
                                                     "PLAIT_CYCLE_TIME_MS"};

static plait_tuning_t from_config(const plait_config_t *cfg) {
  plait_tuning_t v = {cfg->fusion_threshold, cfg->fusion_max_tensor, cfg->cycle_time_ms,
                      cfg->log_level, cfg->timeline_mark_cycles, cfg->autotune, 0};
  for (int p = 0; p < PLAIT_AT_NPARAMS; p++)
    if (plait_config_given(cfg, tuned[p])) v.pinned |= PLAIT_AT_PIN(p);
  return v;
}

static void to_config(const plait_tuning_t *v, plait_config_t *cfg) {
  cfg->fusion_threshold = v->fusion_threshold;
  cfg->fusion_max_tensor = v->fusion_max_tensor;
  cfg->cycle_time_ms = v->cycle_time_ms;
  cfg->log_level = v->log_level;
  cfg->timeline_mark_cycles = v->timeline_mark_cycles;
  cfg->autotune = v->autotune;
}

void plait_tunables_init(plait_tunables_t *t, const plait_config_t *cfg) {
  pthread_mutex_init(&t->mu, NULL);
  t->v = from_config(cfg);
}

void plait_tunables_destroy(plait_tunables_t *t) { pthread_mutex_destroy(&t->mu); }

int plait_tunables_settable(const char *var) {
  for (size_t i = 0; var && i < sizeof settable / sizeof settable[0]; i++)
    if (!strcmp(var, settable[i])) return 1;
  return 0;
}

const char *plait_tunables_list(void) {
  return "PLAIT_FUSION_THRESHOLD, PLAIT_FUSION_MAX_TENSOR, PLAIT_CYCLE_TIME_MS, "
         "PLAIT_LOG_LEVEL, PLAIT_TIMELINE_MARK_CYCLES and PLAIT_AUTOTUNE";
}

plait_result_t plait_tunables_set(plait_tunables_t *t, const char *var, const char *value) {
  if (!plait_tunables_settable(var))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "%s cannot change while plait runs (only %s can)",
                       var, plait_tunables_list());
  /* Parsed into a scratch configuration that holds only the tunable values:
   * the engine's own configuration is never written. */
  plait_config_t scratch;
  memset(&scratch, 0, sizeof scratch);
  pthread_mutex_lock(&t->mu);
  to_config(&t->v, &scratch);
  plait_result_t rc = plait_config_parse_var(&scratch, var, value);
  if (rc == PLAIT_SUCCESS) {
    unsigned pinned = t->v.pinned;
    for (int p = 0; p < PLAIT_AT_NPARAMS; p++)
      if (!strcmp(var, tuned[p])) pinned |= PLAIT_AT_PIN(p); /* the user's value stays */
    t->v = from_config(&scratch);
    t->v.pinned = pinned;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void plait_tunables_reload(plait_tunables_t *t, const plait_config_t *cfg) {
  pthread_mutex_lock(&t->mu);
  t->v = from_config(cfg);
  pthread_mutex_unlock(&t->mu);
}

plait_tuning_t plait_tunables_get(plait_tunables_t *t) {
  pthread_mutex_lock(&t->mu);
  plait_tuning_t v = t->v;
  pthread_mutex_unlock(&t->mu);
  return v;
}

void plait_tunables_overlay(plait_tunables_t *t, plait_config_t *cfg) {
  plait_tuning_t v = plait_tunables_get(t);
  to_config(&v, cfg);
}
