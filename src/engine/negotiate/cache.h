/*
 * Internal: the response cache. Once an operation has been agreed, rank 0
 * gives it an id that every rank records in the same slot; when the same
 * name comes back with the same metadata, a rank announces the id (4 bytes)
 * instead of the name and metadata. Ids are given in order and never reused
 * (no eviction, so ranks can never disagree about an id); when the cache is
 * full, new operations simply go by name. Only operations whose metadata is
 * the same on every rank are cached (allreduce, broadcast, reducescatter).
 */
#ifndef PLAIT_CACHE_H
#define PLAIT_CACHE_H

#include "engine/submit/entry.h"
#include "engine/submit/namemap.h"
#include "engine/negotiate/messages.h"

typedef struct plait_cache_slot {
  char *name;
  plait_meta_t meta;
} plait_cache_slot_t;

typedef struct plait_cache {
  int capacity, count;
  plait_cache_slot_t *slots;
  plait_namemap_t by_name; /* name -> id + 1 */
} plait_cache_t;

plait_result_t plait_cache_init(plait_cache_t *c, int capacity);
void plait_cache_free(plait_cache_t *c);
/* 1 when operations of this kind may be cached. */
int plait_cache_eligible(const plait_meta_t *m);
/* The id of name with exactly this metadata, or -1. */
int plait_cache_lookup(const plait_cache_t *c, const char *name, const plait_meta_t *m);
/* The id rank 0 gives next, or -1 when full. */
int plait_cache_next_id(const plait_cache_t *c);
/* Records id (which must be the next one) for name and metadata. */
plait_result_t plait_cache_put(plait_cache_t *c, int id, const char *name, const plait_meta_t *m);
/* The slot of id, or NULL when id is not assigned. */
const plait_cache_slot_t *plait_cache_get(const plait_cache_t *c, int id);

/* A request rank `rank` sent: by name (its own name and metadata) or by
 * cache id (the slot's); PLAIT_ERR_PROTOCOL naming the rank for an id never
 * assigned. */
plait_result_t plait_cache_resolve(const plait_cache_t *c, int rank, const plait_request_t *q,
                                   const char **name, const plait_meta_t **meta);

/* Rank > 0, a list from rank 0: entries sent by cache id get the slot's
 * name (borrowed: the cache outlives the list), and the ids rank 0 assigned
 * are recorded with the metadata of this rank's entry of that name (local,
 * keyed by plait_op_key) or the list's. PLAIT_ERR_PROTOCOL for an id never
 * assigned or an id assigned without metadata. */
plait_result_t plait_cache_resolve_responses(plait_cache_t *c, plait_namemap_t *local,
                                             plait_response_list_t *l);

/* 1 when every field of a and b is equal. */
int plait_meta_equal(const plait_meta_t *a, const plait_meta_t *b);

#endif
