/* Internal: one engine's counters behind plait_stats(). */
#ifndef PLAIT_STATS_H
#define PLAIT_STATS_H

#include <pthread.h>

#include "plait/plait.h"

typedef struct plait_counters {
  pthread_mutex_t mu;
  plait_stats_t v;
} plait_counters_t;

void plait_counters_init(plait_counters_t *c);
void plait_counters_destroy(plait_counters_t *c);

/* Locks the counters and returns them; every update is bracketed by
 * plait_stats_lock / plait_stats_unlock. */
plait_stats_t *plait_stats_lock(plait_counters_t *c);
void plait_stats_unlock(plait_counters_t *c);
/* Zeroes them (at init and plait_stats_reset). */
void plait_stats_clear(plait_counters_t *c);
/* A consistent copy of all of them. */
plait_stats_t plait_stats_snapshot(plait_counters_t *c);

#endif
