/* Entries that will never run: every one still waiting fails (execute.h,
 * plait_exec_fail_all). */
#include <stdio.h>
#include <stdlib.h>

#include "engine/execute/execute_internal.h"

typedef struct {
  plait_entry_t **out;
  size_t *k;
} collect_t;

static void collect_entry(const char *key, void *value, void *arg) {
  (void)key;
  collect_t *c = arg;
  c->out[(*c->k)++] = value;
}

/* What an operation still pending when coordination ended says: the rank
 * whose plait_shutdown ended it, when known (ended_by >= 0), else msg. */
static void pending_message(int ended_by, char *out, size_t len, const char *name,
                            const char *msg) {
  if (ended_by >= 0)
    snprintf(out, len, "'%s' was pending: rank %d shut down (plait_shutdown) before every rank "
             "submitted it", name, ended_by);
  else
    snprintf(out, len, "%s", msg);
}

void plait_exec_fail_all(plait_exec_t *x, plait_result_t rc, const char *msg, int ended_by) {
  plait_table_close(x->table, rc, msg);
  for (plait_entry_t *e = plait_table_drain(x->table); e;) {
    plait_entry_t *next = e->next;
    char key[PLAIT_OP_KEY_MAX];
    plait_namemap_put(x->local, plait_op_key(key, e->meta.pset, e->name), e);
    e = next;
  }
  size_t n = x->local->count, k = 0;
  plait_entry_t **all = n ? malloc(sizeof *all * n) : NULL;
  if (all) plait_namemap_each(x->local, collect_entry, &(collect_t){all, &k});
  char why[PLAIT_WIRE_MAX_STRING + 256];
  for (size_t i = 0; i < k; i++) {
    pending_message(ended_by, why, sizeof why, all[i]->name, msg);
    plait_exec_finish(x, all[i], rc, why);
  }
  free(all);
  while (x->local->count) { /* only if the snapshot could not be allocated */
    plait_entry_t *first = NULL;
    for (size_t b = 0; b < x->local->nbuckets && !first; b++)
      if (x->local->buckets[b]) first = x->local->buckets[b]->value;
    pending_message(ended_by, why, sizeof why, first->name, msg);
    plait_exec_finish(x, first, rc, why);
  }
}
