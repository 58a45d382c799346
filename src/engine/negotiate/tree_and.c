/* The AND of cached ids on the way up the control tree (tree_and.h). */
#include "engine/negotiate/tree_and.h"

#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

/* One held id: per slot (0 this rank, 1 + i child i's subtree) whether it is
 * held (announced, not yet sent) and whether it was seen (held or sent). */
struct plait_and_entry {
  int32_t id;
  uint64_t acked; /* of the held slots */
  double since;   /* the first slot held; in detail: when the detail began */
  int nheld, nseen, detail;
  uint8_t st[];   /* held[nslots], then seen[nslots] */
};

double plait_and_hold_s(double stall_warn_s, double stall_abort_s, double cycle_s) {
  double s = 1.0;
  if (stall_warn_s > 0 && stall_warn_s / 4 < s) s = stall_warn_s / 4;
  if (stall_abort_s > 0 && stall_abort_s / 4 < s) s = stall_abort_s / 4;
  return s < cycle_s ? cycle_s : s;
}

static plait_result_t on_payload(void *arg, int origin, const uint8_t *p, size_t len) {
  return plait_and_payload(arg, origin, p, len, plait_now());
}

static plait_result_t on_item(void *arg, const plait_tree_and_t *it) {
  return plait_and_item(arg, it, plait_now());
}

plait_result_t plait_and_init(plait_and_t *a, plait_control_t *ctrl, const plait_cache_t *cache,
                              double hold_s) {
  memset(a, 0, sizeof *a);
  a->ctrl = ctrl;
  a->cache = cache;
  a->hold_s = hold_s;
  if (!ctrl || !ctrl->tree.fanout || ctrl->rank == 0 || !ctrl->tree.nchildren)
    return PLAIT_SUCCESS;
  a->nslots = 1 + ctrl->tree.nchildren;
  ctrl->tree.hooks = (plait_tree_hooks_t){on_payload, on_item, a};
  return PLAIT_SUCCESS;
}

void plait_and_free(plait_and_t *a) {
  if (a->nslots) /* what the AND saved: one item per id, or the detail */
    PLAIT_DEBUG("tree", "cached-id AND: %llu items for the whole subtree, %llu for one part of it "
                "(held past %g s, another acked count, or before a payload of its part)",
                (unsigned long long)a->anded, (unsigned long long)a->detailed, a->hold_s);
  for (int i = 0; a->by_id && i < a->cap; i++) free(a->by_id[i]);
  free(a->by_id);
  if (a->ctrl && a->nslots) memset(&a->ctrl->tree.hooks, 0, sizeof a->ctrl->tree.hooks);
  memset(a, 0, sizeof *a);
}

int plait_and_on(const plait_and_t *a) { return a->nslots > 0; }

static plait_and_entry_t *get(plait_and_t *a, int32_t id, int create) {
  if (id < a->cap && a->by_id[id]) return a->by_id[id];
  if (!create) return NULL;
  if (id >= a->cap) {
    int cap = a->cap ? a->cap : 64;
    while (cap <= id) cap *= 2;
    plait_and_entry_t **p = realloc(a->by_id, sizeof *p * (size_t)cap);
    if (!p) return NULL;
    memset(p + a->cap, 0, sizeof *p * (size_t)(cap - a->cap));
    a->by_id = p;
    a->cap = cap;
  }
  plait_and_entry_t *e = calloc(1, sizeof *e + 2 * (size_t)a->nslots);
  if (!e) return NULL;
  e->id = id;
  a->by_id[id] = e;
  a->nactive++;
  return e;
}

static void drop(plait_and_t *a, plait_and_entry_t *e) {
  a->by_id[e->id] = NULL;
  a->nactive--;
  free(e);
}

/* Slot s of id goes up on its own: this rank's id, or child's AND. */
static void emit_slot(plait_and_t *a, int s, int32_t id, uint64_t acked) {
  plait_tree_and_t it = {s ? a->ctrl->tree.first_child + s - 1 : a->ctrl->rank, s == 0, id, acked};
  plait_tree_up_and(a->ctrl, &it);
  a->detailed++;
}

/* Every held slot of e goes up; the id's later slots follow as they come. */
static void to_detail(plait_and_t *a, plait_and_entry_t *e, double now) {
  for (int s = 0; s < a->nslots; s++)
    if (e->st[s]) emit_slot(a, s, e->id, e->acked), e->st[s] = 0;
  e->nheld = 0;
  e->detail = 1;
  e->since = now;
}

/* Slot s announced id (with acked). */
static plait_result_t arrive(plait_and_t *a, int s, int32_t id, uint64_t acked, double now) {
  plait_and_entry_t *e = get(a, id, 1);
  if (!e) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory holding cached id %d", id);
  uint8_t *held = e->st, *seen = e->st + a->nslots;
  if (!seen[s]) seen[s] = 1, e->nseen++;
  if (e->detail || held[s] || (e->nheld && e->acked != acked)) {
    if (!e->detail) to_detail(a, e, now);
    emit_slot(a, s, id, acked);
    if (e->nseen == a->nslots) drop(a, e);
    return PLAIT_SUCCESS;
  }
  if (!e->nheld) e->acked = acked, e->since = now;
  held[s] = 1;
  if (++e->nheld < a->nslots) return PLAIT_SUCCESS;
  plait_tree_and_t it = {a->ctrl->rank, 0, id, acked}; /* the whole subtree: one item */
  plait_tree_up_and(a->ctrl, &it);
  a->anded++;
  drop(a, e);
  return PLAIT_SUCCESS;
}

/* The slot origin (this rank or a rank below it) comes through. */
static int slot_of(const plait_and_t *a, int origin) {
  int me = a->ctrl->rank, k = a->ctrl->tree.fanout;
  if (origin == me) return 0;
  while (origin > me && plait_tree_parent(origin, k) != me) origin = plait_tree_parent(origin, k);
  int s = origin - a->ctrl->tree.first_child + 1;
  return s >= 1 && s < a->nslots ? s : -1;
}

/* What slot s holds goes up before something else of it does. */
static void flush_slot(plait_and_t *a, int s, double now) {
  for (int i = 0; s >= 0 && a->nactive && i < a->cap; i++) {
    plait_and_entry_t *e = a->by_id[i];
    if (e && e->st[s]) to_detail(a, e, now);
  }
}

static void flush_all(plait_and_t *a, double now) {
  for (int i = 0; a->nactive && i < a->cap; i++)
    if (a->by_id[i] && !a->by_id[i]->detail) to_detail(a, a->by_id[i], now);
}

/* An id of the global process set this rank knows (ids of other sets go by). */
static int global_id(const plait_and_t *a, int32_t id) {
  const plait_cache_slot_t *slot = plait_cache_get(a->cache, id);
  return slot && slot->meta.pset == 0;
}

/* Whether req, which origin sent, is held: only cached ids of the global
 * set, no flags, from this rank or a child without children of its own. */
static int holdable(const plait_and_t *a, int origin, const plait_request_list_t *req) {
  int first;
  if (a->joins || req->flags || !req->n) return 0;
  if (origin != a->ctrl->rank &&
      (plait_tree_parent(origin, a->ctrl->tree.fanout) != a->ctrl->rank ||
       plait_tree_children(origin, a->ctrl->tree.fanout, a->ctrl->size, &first)))
    return 0;
  for (uint32_t i = 0; i < req->n; i++)
    if (req->r[i].cache_id < 0 || !global_id(a, req->r[i].cache_id)) return 0;
  return 1;
}

static int has_join(const plait_request_list_t *req) {
  for (uint32_t i = 0; i < req->n; i++)
    if (req->r[i].cache_id < 0 && req->r[i].meta.coll == PLAIT_COLL_JOIN) return 1;
  return 0;
}

/* Names in req (sent by name, so with other metadata than the cache's): an
 * id held under the same name will not come from that rank (a mismatch
 * rank 0 must see now, not after the hold): what is held of it goes. */
static void release_named(plait_and_t *a, const plait_request_list_t *req, double now) {
  for (uint32_t i = 0; i < req->n; i++) {
    const plait_request_t *q = &req->r[i];
    if (q->cache_id >= 0 || !q->name) continue;
    char key[PLAIT_OP_KEY_MAX];
    intptr_t v = (intptr_t)plait_namemap_get(&a->cache->by_name,
                                             plait_op_key(key, q->meta.pset, q->name));
    plait_and_entry_t *e = v > 0 && v - 1 < a->cap ? a->by_id[v - 1] : NULL;
    if (e && !e->detail) to_detail(a, e, now);
  }
}

plait_result_t plait_and_payload(plait_and_t *a, int origin, const uint8_t *p, size_t len,
                                 double now) {
  plait_request_list_t req;
  uint32_t code;
  char *text = NULL;
  plait_result_t rc = plait_requests_decode_failure(p, len, &req, &code, &text);
  free(text);
  if (rc == PLAIT_SUCCESS && holdable(a, origin, &req)) {
    int s = slot_of(a, origin);
    for (uint32_t i = 0; i < req.n && rc == PLAIT_SUCCESS; i++)
      rc = arrive(a, s, req.r[i].cache_id, req.acked, now);
    plait_requests_free(&req);
    return rc;
  }
  if (rc == PLAIT_SUCCESS && has_join(&req)) a->joins = 1;
  if (a->joins) flush_all(a, now);
  else flush_slot(a, slot_of(a, origin), now);
  if (rc == PLAIT_SUCCESS) release_named(a, &req, now);
  if (rc == PLAIT_SUCCESS) plait_requests_free(&req);
  plait_tree_up_add(a->ctrl, origin, p, len); /* as it came; malformed: rank 0 names origin */
  return PLAIT_SUCCESS;
}

plait_result_t plait_and_item(plait_and_t *a, const plait_tree_and_t *it, double now) {
  int s = slot_of(a, it->root);
  if (!a->joins && !it->one && s >= 1 && it->root == a->ctrl->tree.first_child + s - 1 &&
      global_id(a, it->id))
    return arrive(a, s, it->id, it->acked, now);
  flush_slot(a, s, now);
  plait_tree_up_and(a->ctrl, it);
  return PLAIT_SUCCESS;
}

void plait_and_tick(plait_and_t *a, double now) {
  for (int i = 0; a->nactive && i < a->cap; i++) {
    plait_and_entry_t *e = a->by_id[i];
    if (!e || now < e->since + a->hold_s) continue;
    if (e->detail) drop(a, e); /* its late slots wait afresh */
    else to_detail(a, e, now);
  }
}

double plait_and_until(const plait_and_t *a) {
  double until = 0;
  for (int i = 0; a->nactive && i < a->cap; i++) {
    const plait_and_entry_t *e = a->by_id[i];
    if (e && (until == 0 || e->since + a->hold_s < until)) until = e->since + a->hold_s;
  }
  return until;
}

void plait_and_ran(plait_and_t *a, const plait_response_list_t *l) {
  for (uint32_t i = 0; a->joins && i < l->n; i++)
    if (l->r[i].coll == PLAIT_COLL_JOIN) a->joins = 0;
}
