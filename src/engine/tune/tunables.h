/*
 * Internal: the settings an engine may change while it runs
 * (plait_config_set), under one lock. Everything else in the engine's
 * configuration is an immutable snapshot taken at start.
 *
 * Any thread may set and read. The coordinator takes a snapshot at the start
 * of each cycle, so a cycle sees one consistent set of values.
 */
#ifndef PLAIT_TUNABLES_H
#define PLAIT_TUNABLES_H

#include <pthread.h>
#include <stdint.h>

#include "util/config.h"

/* The values (the fields of plait_config_t they override). */
typedef struct plait_tuning {
  uint64_t fusion_threshold;  /* PLAIT_FUSION_THRESHOLD */
  uint64_t fusion_max_tensor; /* PLAIT_FUSION_MAX_TENSOR */
  double cycle_time_ms;       /* PLAIT_CYCLE_TIME_MS */
  int log_level;              /* PLAIT_LOG_LEVEL */
  int timeline_mark_cycles;   /* PLAIT_TIMELINE_MARK_CYCLES */
  int autotune;               /* PLAIT_AUTOTUNE (heeded on rank 0) */
  unsigned pinned;            /* PLAIT_AT_PIN bits (engine/tune/autotune.h): the threshold,
                                 largest fused tensor, cycle time set explicitly (in
                                 the environment or by plait_config_set): never tuned */
} plait_tuning_t;

typedef struct plait_tunables {
  pthread_mutex_t mu;
  plait_tuning_t v; /* under mu */
} plait_tunables_t;

/* Starts from cfg's values. */
void plait_tunables_init(plait_tunables_t *t, const plait_config_t *cfg);
void plait_tunables_destroy(plait_tunables_t *t);

/* 1 when var (a PLAIT_* name) may change while running. */
int plait_tunables_settable(const char *var);
/* "PLAIT_FUSION_THRESHOLD, ... and PLAIT_TIMELINE_MARK_CYCLES": for messages. */
const char *plait_tunables_list(void);

/* Parses value strictly (as the environment would be) and stores it.
 * PLAIT_ERR_CONFIG naming var, the value and what it accepts;
 * PLAIT_ERR_UNSUPPORTED when var cannot change while running. */
plait_result_t plait_tunables_set(plait_tunables_t *t, const char *var, const char *value);

/* A consistent copy of every value. */
plait_tuning_t plait_tunables_get(plait_tunables_t *t);

/* Takes cfg's values again (after the transport's defaults were applied). */
void plait_tunables_reload(plait_tunables_t *t, const plait_config_t *cfg);

/* Writes the current values over cfg's fields (cfg is the caller's copy). */
void plait_tunables_overlay(plait_tunables_t *t, plait_config_t *cfg);

#endif
