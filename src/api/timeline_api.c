/* The public timeline calls: plait_timeline_start and plait_timeline_stop
 * (include/plait/plait.h) over the internal timeline (timeline.h). */

#include "api/current.h"
#include "util/error.h"
#include "util/log.h"

/*
 * Blocks while an active timeline is flushed and closed (the one it replaces)
 * and while the new file is opened and its first line written; never waits
 * for other ranks. Errors: PLAIT_ERR_NOT_INITIALIZED, PLAIT_ERR_INVALID_ARGUMENT
 * (NULL or empty path), PLAIT_ERR_SYSTEM (names the path and the reason; an
 * active timeline then keeps running), PLAIT_ERR_NO_MEMORY.
 */
PLAIT_API plait_result_t plait_timeline_start(const char *path) {
  PLAIT_API_ENGINE(e);
  PLAIT_CHECK(plait_api_check("plait_timeline_start", e));
  if (!path || !*path)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_timeline_start: path is %s",
                       path ? "empty" : "NULL");
  plait_result_t rc = plait_tl_start(e->timeline, path, e->topo.rank);
  if (rc != PLAIT_SUCCESS) return plait_error_context(rc, "plait_timeline_start");
  PLAIT_INFO("timeline", "writing the timeline to %s", path);
  return PLAIT_SUCCESS;
}

/* Flushes every queued event, closes the file (valid JSON) and returns.
 * Succeeds when no timeline runs. Errors: PLAIT_ERR_NOT_INITIALIZED. */
PLAIT_API plait_result_t plait_timeline_stop(void) {
  PLAIT_API_ENGINE(e);
  PLAIT_CHECK(plait_api_check("plait_timeline_stop", e));
  plait_tl_stop(e->timeline);
  return PLAIT_SUCCESS;
}
