/* The response cache: ids in order, never reused. */
#include "engine/negotiate/cache.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

plait_result_t plait_cache_init(plait_cache_t *c, int capacity) {
  memset(c, 0, sizeof *c);
  c->capacity = capacity;
  if (capacity > 0 && !(c->slots = calloc((size_t)capacity, sizeof *c->slots)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for a response cache of %d", capacity);
  if (plait_namemap_init(&c->by_name)) {
    free(c->slots);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for the response cache");
  }
  return PLAIT_SUCCESS;
}

void plait_cache_free(plait_cache_t *c) {
  for (int i = 0; i < c->count; i++) {
    free(c->slots[i].name);
    plait_meta_free(&c->slots[i].meta);
  }
  free(c->slots);
  plait_namemap_free(&c->by_name);
  memset(c, 0, sizeof *c);
}

int plait_cache_eligible(const plait_meta_t *m) {
  return m->coll == PLAIT_COLL_ALLREDUCE || m->coll == PLAIT_COLL_BROADCAST ||
         m->coll == PLAIT_COLL_REDUCESCATTER;
}

int plait_meta_equal(const plait_meta_t *a, const plait_meta_t *b) {
  if (a->coll != b->coll || a->dtype != b->dtype || a->op != b->op || a->ndim != b->ndim ||
      a->device != b->device || a->root != b->root || a->pset != b->pset || a->prescale != b->prescale ||
      a->postscale != b->postscale || a->group_size != b->group_size || a->nsplits != b->nsplits)
    return 0;
  if (memcmp(a->shape, b->shape, sizeof a->shape[0] * a->ndim)) return 0;
  if ((a->group == NULL) != (b->group == NULL) || (a->group && strcmp(a->group, b->group))) return 0;
  return a->nsplits == 0 || !memcmp(a->splits, b->splits, sizeof a->splits[0] * a->nsplits);
}

int plait_cache_lookup(const plait_cache_t *c, const char *name, const plait_meta_t *m) {
  if (c->capacity <= 0 || !plait_cache_eligible(m)) return -1;
  char key[PLAIT_OP_KEY_MAX];
  intptr_t v = (intptr_t)plait_namemap_get(&c->by_name, plait_op_key(key, m->pset, name));
  if (!v) return -1;
  int id = (int)(v - 1);
  return plait_meta_equal(&c->slots[id].meta, m) ? id : -1;
}

int plait_cache_next_id(const plait_cache_t *c) {
  return c->count < c->capacity ? c->count : -1;
}

plait_result_t plait_cache_put(plait_cache_t *c, int id, const char *name, const plait_meta_t *m) {
  if (id != c->count || id >= c->capacity)
    return plait_error(PLAIT_ERR_PROTOCOL, "response cache id %d out of order (next is %d of %d)",
                       id, c->count, c->capacity);
  plait_cache_slot_t *s = &c->slots[id];
  char key[PLAIT_OP_KEY_MAX];
  if (!(s->name = strdup(name)) || plait_meta_copy(&s->meta, m) ||
      plait_namemap_put(&c->by_name, plait_op_key(key, m->pset, name),
                        (void *)(intptr_t)(id + 1))) {
    free(s->name);
    s->name = NULL;
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory in the response cache");
  }
  c->count++;
  return PLAIT_SUCCESS;
}

const plait_cache_slot_t *plait_cache_get(const plait_cache_t *c, int id) {
  return id >= 0 && id < c->count ? &c->slots[id] : NULL;
}

plait_result_t plait_cache_resolve(const plait_cache_t *c, int rank, const plait_request_t *q,
                                   const char **name, const plait_meta_t **meta) {
  if (q->cache_id < 0) {
    *name = q->name;
    *meta = &q->meta;
    return PLAIT_SUCCESS;
  }
  const plait_cache_slot_t *s = plait_cache_get(c, q->cache_id);
  if (!s)
    return plait_error(PLAIT_ERR_PROTOCOL, "rank %d announced response cache id %d, which was "
                       "never assigned", rank, q->cache_id);
  *name = s->name;
  *meta = &s->meta;
  return PLAIT_SUCCESS;
}
