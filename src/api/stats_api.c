/* The public statistics calls: plait_stats and plait_stats_reset
 * (include/plait/plait.h) over the engine's counters (engine/observe/stats.h). */
#include <string.h>

#include "api/current.h"
#include "util/error.h"

PLAIT_API plait_result_t plait_stats(plait_stats_t *stats) {
  if (!stats) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_stats: stats is NULL");
  size_t size = stats->struct_size;
  if (size < sizeof(size_t) + sizeof(uint64_t))
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_stats: stats->struct_size is %zu; set "
                       "it to sizeof(plait_stats_t) = %zu", size, sizeof(plait_stats_t));
  PLAIT_API_ENGINE(e);
  PLAIT_CHECK(plait_api_check("plait_stats", e));
  if (size > sizeof(plait_stats_t)) size = sizeof(plait_stats_t);
  plait_stats_t copy = plait_stats_snapshot(&e->stats);
  copy.struct_size = stats->struct_size;
  memcpy(stats, &copy, size);
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_stats_reset(void) {
  PLAIT_API_ENGINE(e);
  PLAIT_CHECK(plait_api_check("plait_stats_reset", e));
  plait_stats_clear(&e->stats);
  return PLAIT_SUCCESS;
}
