/* Rank 0's negotiation per process set: who must announce a record, and
 * whether a set may be removed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "engine/transport/process_set.h"
#include "util/strdupf.h"

static int first(const plait_negotiator_t *n, const plait_record_t *rec) {
  int r = 0;
  while (r < n->size - 1 && !rec->have[r]) r++;
  return r;
}

/* Who must announce rec: every rank for the global set; the members of
 * another set (none known when the set does not exist here, or when the
 * negotiator has no process sets, as in unit tests: the record then fails at
 * once). */
int plait_neg_set_members(plait_negotiator_t *n, plait_record_t *rec) {
  const plait_pset_t *s = rec->pset && n->psets ? plait_psets_get(n->psets, rec->pset) : NULL;
  if (rec->pset && !s) {
    rec->member = NULL;
    return 0;
  }
  for (int i = 0; s && i < s->n; i++)
    if (s->ranks[i] >= 0 && s->ranks[i] < n->size) rec->member[s->ranks[i]] = 1;
  if (!s) memset(rec->member, 1, (size_t)n->size);
  rec->nmembers = s ? s->n : n->size;
  return 0;
}

typedef struct {
  int32_t id;
  char *list;
  size_t used, cap;
  int count;
} pending_scan_t;

static void pending_on_set_cb(const char *key, void *value, void *arg) {
  (void)key;
  pending_scan_t *s = arg;
  const plait_record_t *rec = value;
  if (rec->pset != s->id) return;
  if (s->count++ < 5 && s->used < s->cap)
    s->used += (size_t)snprintf(s->list + s->used, s->cap - s->used, "%s'%s'",
                                s->count > 1 ? ", " : "", rec->name);
}

/* A set is removed only when no operation on it is pending (submitted by
 * some of its members): otherwise the removal fails on every rank, naming
 * them, and the set stays. */
void plait_neg_check_removal(plait_negotiator_t *n, plait_record_t *rec) {
  int32_t id = rec->metas[first(n, rec)].root;
  char list[600] = "";
  pending_scan_t s = {id, list, 0, sizeof list, 0};
  plait_namemap_each(&n->records, pending_on_set_cb, &s);
  if (!n->psets || !plait_psets_get(n->psets, id)) {
    rec->status = PLAIT_ERR_INVALID_ARGUMENT;
    rec->message = plait_strdupf("process set %d does not exist", (int)id);
  } else if (s.count) {
    rec->status = PLAIT_ERR_INVALID_ARGUMENT;
    rec->message = plait_strdupf("process set %d cannot be removed: %d operation%s on it %s "
                                 "pending (submitted by some of its ranks, not all): %s%s",
                                 (int)id, s.count, s.count == 1 ? "" : "s",
                                 s.count == 1 ? "is" : "are", list, s.count > 5 ? ", ..." : "");
  }
}

