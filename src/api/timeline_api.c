/* The public timeline calls: plait_timeline_start and plait_timeline_stop
 * (include/plait/plait.h) over the internal timeline (timeline.h). */

#include "api/core.h"
#include "util/error.h"
#include "util/log.h"
#include "engine/timeline.h"

/*
 * Blocks while an active timeline is flushed and closed (the one it replaces)
 * and while the new file is opened and its first line written; never waits
 * for other ranks. Errors: PLAIT_ERR_NOT_INITIALIZED, PLAIT_ERR_INVALID_ARGUMENT
 * (NULL or empty path), PLAIT_ERR_SYSTEM (names the path and the reason; an
 * active timeline then keeps running), PLAIT_ERR_NO_MEMORY.
 */
PLAIT_API plait_result_t plait_timeline_start(const char *path) {
  int rank = plait_core_rank();
  if (rank < 0)
    return plait_error(PLAIT_ERR_NOT_INITIALIZED,
                       "plait_timeline_start: plait is not initialized (call plait_init first)");
  if (!path || !*path)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_timeline_start: path is %s",
                       path ? "empty" : "NULL");
  plait_result_t rc = plait_tl_start(path, rank);
  if (rc != PLAIT_SUCCESS) return plait_error_context(rc, "plait_timeline_start");
  PLAIT_INFO("timeline", "writing the timeline to %s", path);
  return PLAIT_SUCCESS;
}

/* Flushes every queued event, closes the file (valid JSON) and returns.
 * Succeeds when no timeline runs. Errors: PLAIT_ERR_NOT_INITIALIZED. */
PLAIT_API plait_result_t plait_timeline_stop(void) {
  if (plait_core_rank() < 0)
    return plait_error(PLAIT_ERR_NOT_INITIALIZED,
                       "plait_timeline_stop: plait is not initialized (call plait_init first)");
  plait_tl_stop();
  return PLAIT_SUCCESS;
}
