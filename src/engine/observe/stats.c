/* One engine's counters of plait_stats(), under one mutex. */
#include "engine/observe/stats.h"

#include <string.h>

void plait_counters_init(plait_counters_t *c) {
  memset(&c->v, 0, sizeof c->v);
  pthread_mutex_init(&c->mu, NULL);
}

void plait_counters_destroy(plait_counters_t *c) { pthread_mutex_destroy(&c->mu); }

plait_stats_t *plait_stats_lock(plait_counters_t *c) {
  pthread_mutex_lock(&c->mu);
  return &c->v;
}

void plait_stats_unlock(plait_counters_t *c) { pthread_mutex_unlock(&c->mu); }

void plait_stats_clear(plait_counters_t *c) {
  pthread_mutex_lock(&c->mu);
  memset(&c->v, 0, sizeof c->v);
  pthread_mutex_unlock(&c->mu);
}

plait_stats_t plait_stats_snapshot(plait_counters_t *c) {
  pthread_mutex_lock(&c->mu);
  plait_stats_t copy = c->v;
  pthread_mutex_unlock(&c->mu);
  return copy;
}
