/* The counters of plait_stats(), under one mutex. */
#include "engine/stats.h"

#include <pthread.h>
#include <string.h>

#include "api/core.h"
#include "util/error.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static plait_stats_t counters;

plait_stats_t *plait_stats_lock(void) {
  pthread_mutex_lock(&mu);
  return &counters;
}

void plait_stats_unlock(void) { pthread_mutex_unlock(&mu); }

void plait_stats_clear(void) {
  pthread_mutex_lock(&mu);
  memset(&counters, 0, sizeof counters);
  pthread_mutex_unlock(&mu);
}

PLAIT_API plait_result_t plait_stats(plait_stats_t *stats) {
  if (!stats) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_stats: stats is NULL");
  size_t size = stats->struct_size;
  if (size < sizeof(size_t) + sizeof(uint64_t))
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_stats: stats->struct_size is %zu; set "
                       "it to sizeof(plait_stats_t) = %zu", size, sizeof(plait_stats_t));
  if (plait_core_rank() < 0)
    return plait_error(PLAIT_ERR_NOT_INITIALIZED, "plait_stats: plait is not initialized");
  if (size > sizeof(plait_stats_t)) size = sizeof(plait_stats_t);
  pthread_mutex_lock(&mu);
  plait_stats_t copy = counters;
  pthread_mutex_unlock(&mu);
  copy.struct_size = stats->struct_size;
  memcpy(stats, &copy, size);
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_stats_reset(void) {
  if (plait_core_rank() < 0)
    return plait_error(PLAIT_ERR_NOT_INITIALIZED, "plait_stats_reset: plait is not initialized");
  plait_stats_clear();
  return PLAIT_SUCCESS;
}
