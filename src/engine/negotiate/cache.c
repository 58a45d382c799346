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

plait_result_t plait_cache_resolve_responses(plait_cache_t *c, plait_namemap_t *local,
                                             plait_response_list_t *l) {
  for (uint32_t i = 0; i < l->n; i++)
    for (uint32_t j = 0; j < l->r[i].n; j++) {
      plait_resp_entry_t *e = &l->r[i].e[j];
      if (e->cache_id >= 0) {
        const plait_cache_slot_t *s = plait_cache_get(c, e->cache_id);
        if (!s) return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 used response cache id %d, which "
                                   "was never assigned", e->cache_id);
        e->name = s->name; /* the cache outlives the list: no copy */
        e->name_borrowed = 1;
      }
      if (e->assign_id >= 0) {
        char key[PLAIT_OP_KEY_MAX];
        plait_entry_t *mine = plait_namemap_get(local, plait_op_key(key, l->r[i].pset, e->name));
        const plait_meta_t *m = mine ? &mine->meta : e->has_meta ? &e->meta : NULL;
        if (!m)
          return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 cached '%s' without metadata", e->name);
        PLAIT_CHECK(plait_cache_put(c, e->assign_id, e->name, m));
      }
    }
  return PLAIT_SUCCESS;
}
