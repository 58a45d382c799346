/* Rank 0's records (negotiate.h): the rank whose metadata stands for a
 * record, who still must announce it, how one joins the ready list, and how
 * one fails before every rank announced it (the tombstone that failure
 * leaves, and the late announcements it drops). Its own file so that
 * negotiate.c, deadlock.c and responses.c call it downward. */
#include "engine/negotiate/negotiate.h"
#include "engine/negotiate/negotiate_internal.h"

#include <stdint.h>
#include <stdlib.h>

#include "util/error.h"

void plait_record_free(plait_record_t *rec, int size) {
  if (!rec) return;
  for (int r = 0, left = rec->nown; r < size && left; r++) /* 2: the subtree root's (cover.c) */
    if (rec->have[r] == 1) plait_meta_free(&rec->metas[r]), left--;
  /* metas, have and member live in the record's own block (negotiate.c) */
  if (rec->key != rec->name) free(rec->key);
  free(rec->name);
  free(rec->message);
  free(rec);
}

const plait_meta_t *plait_record_meta(const plait_record_t *rec, int r) {
  while (r > 0 && rec->have[r] == 2 && rec->fanout > 0) r = (r - 1) / rec->fanout; /* parent */
  return &rec->metas[r];
}

int plait_record_ref(const plait_record_t *rec, int size) {
  int r = 0;
  while (r < size - 1 && !rec->have[r]) r++;
  return r;
}

typedef struct tombstone {
  uint64_t list_no; /* the response list that carried the failure */
  uint8_t *missing; /* ranks that had not announced the name then */
} tombstone_t;

void plait_neg_free_tomb_cb(const char *key, void *value, void *arg) {
  (void)key, (void)arg;
  tombstone_t *t = value;
  free(t->missing);
  free(t);
}

int plait_neg_missing(const plait_negotiator_t *n, const plait_record_t *rec, int r) {
  return rec->member && rec->member[r] && !rec->have[r] && !(rec->pset == 0 && n->joined[r]);
}

/* rec is failing before every rank announced it: remember who had not. */
void plait_neg_bury(plait_negotiator_t *n, const plait_record_t *rec) {
  tombstone_t *t = malloc(sizeof *t);
  if (!t || !(t->missing = calloc((size_t)n->size, 1))) {
    free(t);
    return; /* without it, a late announcement only lingers as a stall */
  }
  t->list_no = n->lists_sent + 1;
  int any = 0;
  for (int r = 0; r < n->size; r++) any |= t->missing[r] = (uint8_t)plait_neg_missing(n, rec, r);
  tombstone_t *old = plait_namemap_get(&n->tombstones, rec->key);
  if (!any || plait_namemap_put(&n->tombstones, rec->key, t)) {
    free(t->missing);
    free(t);
    return;
  }
  if (old) plait_neg_free_tomb_cb(NULL, old, NULL);
}

/* 1 when rank's announcement of name was sent before it ran the list that
 * failed name (so that list already failed it there): drop it. */
int plait_neg_stale(plait_negotiator_t *n, int rank, const char *name, uint64_t acked) {
  tombstone_t *t = plait_namemap_get(&n->tombstones, name);
  if (!t || !t->missing[rank]) return 0;
  t->missing[rank] = 0;
  int left = 0;
  for (int r = 0; r < n->size; r++) left |= t->missing[r];
  int drop = acked < t->list_no;
  if (!left) {
    plait_namemap_remove(&n->tombstones, name);
    plait_neg_free_tomb_cb(NULL, t, NULL);
  }
  return drop;
}

plait_result_t plait_neg_push_ready(plait_negotiator_t *n, plait_record_t *rec) {
  if (n->nready == n->cap) {
    int cap = n->cap ? 2 * n->cap : 64;
    plait_record_t **p = realloc(n->ready, sizeof *p * (size_t)cap);
    if (!p) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory in negotiation");
    n->ready = p;
    n->cap = cap;
  }
  n->ready[n->nready++] = rec;
  plait_deadlock_moved_set(&n->deadlock, rec->member); /* ready, or failed */
  return PLAIT_SUCCESS;
}

plait_result_t plait_neg_fail_record(plait_negotiator_t *n, plait_record_t *rec,
                                     uint32_t status, char *message) {
  rec->status = status;
  free(rec->message);
  rec->message = message;
  plait_neg_bury(n, rec);
  plait_namemap_remove(&n->records, rec->key);
  return plait_neg_push_ready(n, rec);
}
