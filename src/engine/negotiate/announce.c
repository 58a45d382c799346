/* When a rank > 0 announces what was submitted to it (announce.h). */
#include "engine/negotiate/announce.h"

#include <stdlib.h>
#include <string.h>

#include "engine/submit/entry.h"
#include "util/error.h"

void plait_announce_init(plait_announce_t *a) {
  memset(a, 0, sizeof *a);
  plait_bursts_init(&a->bursts);
  a->since = -1;
}

void plait_announce_free(plait_announce_t *a) {
  plait_bursts_free(&a->bursts);
  free(a->held.r);
  free(a->ids);
  plait_announce_init(a);
}

void plait_announce_ran(plait_announce_t *a, const plait_response_list_t *l) {
  plait_bursts_record_list(&a->bursts, l); /* as rank 0 records them (negotiate.c) */
}

/* The held requests, then req's, all in req (req->r replaced); on failure
 * nothing moved. */
static plait_result_t join(plait_announce_t *a, plait_request_list_t *req) {
  if (a->held.n == 0) return PLAIT_SUCCESS;
  uint32_t n = a->held.n + req->n;
  if (n > a->cap) {
    plait_request_t *r = realloc(a->held.r, sizeof *r * n);
    if (!r) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory announcing operations");
    a->held.r = r;
    a->cap = n;
  }
  if (req->n) memcpy(a->held.r + a->held.n, req->r, sizeof *req->r * req->n);
  free(req->r);
  req->r = a->held.r; /* the caller frees it: held starts again empty */
  req->n = n;
  a->held.r = NULL;
  a->held.n = 0;
  a->cap = 0;
  return PLAIT_SUCCESS;
}

/* Whether everything in req is a cached allreduce of the global set, and
 * its cache ids (into a->ids) and bytes. */
static int holdable(plait_announce_t *a, const plait_request_list_t *req,
                    const plait_cache_t *cache, uint64_t *bytes) {
  int *ids = realloc(a->ids, sizeof *ids * (req->n ? req->n : 1));
  if (!ids) return 0;
  a->ids = ids;
  *bytes = 0;
  for (uint32_t i = 0; i < req->n; i++) {
    const plait_cache_slot_t *s =
        req->r[i].cache_id >= 0 ? plait_cache_get(cache, req->r[i].cache_id) : NULL;
    if (!s || s->meta.coll != PLAIT_COLL_ALLREDUCE || s->meta.pset != 0) return 0;
    *bytes += plait_meta_bytes(&s->meta);
    ids[i] = req->r[i].cache_id;
  }
  return 1;
}

void plait_announce_merge(plait_announce_t *a, plait_request_list_t *req, int may_hold,
                          const plait_cache_t *cache, uint64_t threshold, double hold_s,
                          double now) {
  uint32_t held_before = a->held.n;
  if (join(a, req)) return; /* out of memory: req as drained; the held go with the next */
  uint64_t bytes = 0;
  int keep = may_hold && req->n > 0 && hold_s > 0 && threshold > 0 && !req->flags &&
             (held_before == 0 || now < a->since + hold_s) &&
             holdable(a, req, cache, &bytes) && bytes < threshold &&
             (a->missing = plait_bursts_missing(&a->bursts, a->ids, (int)req->n)) > 0;
  if (!keep) {
    a->since = -1;
    a->missing = 0;
    return;
  }
  if (held_before == 0) a->since = now;
  a->held.r = req->r; /* all of it stays */
  a->held.n = a->cap = req->n;
  req->r = NULL;
  req->n = 0;
}

double plait_announce_until(const plait_announce_t *a, double hold_s) {
  return a->held.n ? a->since + hold_s : 0;
}
