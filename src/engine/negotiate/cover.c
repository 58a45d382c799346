/* Rank 0 records a control-tree AND item once for the subtree it covers
 * (negotiate.h, plait_neg_add_cover). */
#include <stdint.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "engine/negotiate/negotiate_internal.h"

#include "util/error.h"

/* Calls fn(n, r, arg) for each rank of root's subtree (root alone for k 0),
 * level by level, in rank order within a level; stops at the first
 * nonzero. */
static int each_rank(plait_negotiator_t *n, int root, int k,
                     int (*fn)(plait_negotiator_t *, int, void *), void *arg) {
  for (long lo = root, hi = root; lo < n->size; lo = lo * k + 1, hi = hi * k + k) {
    for (long r = lo; r <= hi && r < n->size; r++) {
      int rc = fn(n, (int)r, arg);
      if (rc) return rc;
    }
    if (!k) break;
  }
  return 0;
}

typedef struct {
  const char *name;
  const plait_meta_t *meta;
  int cache_id;
  uint64_t acked;
  plait_record_t *rec;
} cover_t;

static int add_one(plait_negotiator_t *n, int r, void *arg) {
  cover_t *c = arg;
  return plait_neg_add(n, r, c->name, c->meta, c->cache_id, c->acked);
}

/* The last rank of a subtree's level [lo, hi] in a job of size ranks. */
static long top(long hi, int size) { return hi < size ? hi : size - 1; }

/* Whether a rank of root's subtree (k >= 1) has announced rec already. */
static int announced(const plait_record_t *rec, int root, int k, int size) {
  uint8_t any = 0;
  for (long lo = root, hi = root; lo < size; lo = lo * k + 1, hi = hi * k + k)
    for (long r = lo; r <= top(hi, size); r++) any |= rec->have[r];
  return any != 0;
}

/* Every rank of root's subtree (k >= 1) is present: a level at a time, the
 * slots marked covered (their metadata is the root's: plait_record_meta)
 * and moved (the deadlock check), no per-rank call. */
static void mark(plait_negotiator_t *n, plait_record_t *rec, int root, int k) {
  for (long lo = root, hi = root; lo < n->size; lo = lo * k + 1, hi = hi * k + k) {
    long t = top(hi, n->size);
    memset(rec->have + lo, 2, (size_t)(t - lo + 1));
    plait_deadlock_moved_range(&n->deadlock, (int)lo, (int)t);
    rec->count += (int)(t - lo + 1);
  }
  rec->have[root] = 1;
  rec->nown++;
  rec->fanout = k;
}

plait_result_t plait_neg_add_cover(plait_negotiator_t *n, int root, int k, const char *name,
                                   const plait_meta_t *meta, int cache_id, uint64_t acked) {
  cover_t c = {name, meta, cache_id, acked, NULL};
  if (root < 0 || root >= n->size || k < 0)
    return plait_error(PLAIT_ERR_PROTOCOL, "an AND item for rank %d's subtree (fan-out %d) in "
                       "a job of %d ranks", root, k, n->size);
  int by_rank = !k || meta->pset != 0 || meta->coll == PLAIT_COLL_JOIN || n->njoined ||
                n->tombstones.count;
  if (!by_rank) {
    char buf[PLAIT_OP_KEY_MAX];
    c.rec = plait_neg_record(n, plait_op_key(buf, meta->pset, name), name, meta->pset);
    if (!c.rec) return PLAIT_ERR_NO_MEMORY;
    by_rank = !c.rec->member || announced(c.rec, root, k, n->size);
  }
  if (by_rank) return (plait_result_t)each_rank(n, root, k, add_one, &c);
  if (plait_meta_copy(&c.rec->metas[root], meta))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory recording '%s'", name);
  mark(n, c.rec, root, k);
  if (cache_id >= 0) c.rec->cache_id = cache_id;
  return plait_neg_settle(n, c.rec);
}
