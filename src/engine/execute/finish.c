/* One entry's end (execute.h, plait_exec_finish): its name leaves the
 * tables, the timeline's open activities close, the stats count it, and its
 * handle finishes. Its own file so that pending.c and fail_all.c call it
 * downward, not back into execute.c. */
#include "engine/execute/execute.h"

#include "engine/submit/handle.h"
#include "engine/observe/stats.h"
#include "engine/observe/timeline.h"

void plait_exec_finish(plait_exec_t *x, plait_entry_t *e, plait_result_t rc, const char *msg) {
  char key[PLAIT_OP_KEY_MAX];
  const char *k = plait_op_key(key, e->meta.pset, e->name);
  plait_namemap_remove(x->local, k);
  plait_table_forget(x->table, k);
  if (rc != PLAIT_SUCCESS) { /* close whatever is open, innermost first */
    plait_tl_end(x->tl, e->name, x->activity[e->meta.coll <= PLAIT_COLL_MAX_ ? e->meta.coll : 0]);
    plait_tl_end(x->tl, e->name, plait_tl_name(PLAIT_TL_MEMCPY_IN));
    plait_tl_end(x->tl, e->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
    plait_tl_end(x->tl, e->name, plait_tl_name(PLAIT_TL_QUEUE));
  }
  /* ends that close nothing are ignored */
  plait_tl_end(x->tl, e->name, plait_tl_name(PLAIT_TL_NEGOTIATE));
  plait_stats_t *s = plait_stats_lock(x->stats);
  s->tensors++;
  plait_stats_unlock(x->stats);
  plait_handle_t *h = e->handle;
  e->handle = NULL;
  plait_entry_free(e);
  plait_handle_finish(h, rc, msg);
}
