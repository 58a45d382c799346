/* The cached epoch's pieces: when one opens, a rank's vote, the AND over the
 * transport, and the burst run again (epoch.h). */
#include "engine/negotiate/epoch.h"

#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"

void plait_epoch_init(plait_epoch_t *ep) { memset(ep, 0, sizeof *ep); }

void plait_epoch_free(plait_epoch_t *ep) {
  free(ep->ids);
  free(ep->per_resp);
  free(ep->held.r);
  free(ep->scratch);
  memset(ep, 0, sizeof *ep);
}

void plait_epoch_close(plait_epoch_t *ep) {
  ep->open = 0;
  ep->carrying = 0;
  ep->n = 0;
  ep->nresp = 0;
  ep->rounds = 0;
}

static int32_t entry_id(const plait_resp_entry_t *e) {
  return e->cache_id >= 0 ? e->cache_id : e->assign_id;
}

/* The burst's ids in l's order into ids (room for PLAIT_EPOCH_MAX_IDS, or
 * NULL to count only): their count, or -1 when l cannot open an epoch. */
static int burst_ids(const plait_response_list_t *l, int32_t *ids) {
  if (!l->n || (l->flags & (PLAIT_RESP_SHUTDOWN | PLAIT_RESP_TUNING))) return -1;
  int n = 0;
  for (uint32_t i = 0; i < l->n; i++) {
    const plait_response_t *r = &l->r[i];
    if (r->coll != PLAIT_COLL_ALLREDUCE || r->status != 0 || r->pset != 0 || !r->n) return -1;
    for (uint32_t j = 0; j < r->n; j++) {
      int32_t id = entry_id(&r->e[j]);
      if (id < 0 || n >= PLAIT_EPOCH_MAX_IDS) return -1;
      if (ids) ids[n] = id;
      n++;
    }
  }
  return n;
}

/* 1 when ids[0..n) are distinct. */
static int distinct(const int32_t *ids, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (ids[i] == ids[j]) return 0;
  return 1;
}

int plait_epoch_may_open(const plait_response_list_t *l, int quiet) {
  if (!quiet) return 0;
  int32_t ids[PLAIT_EPOCH_MAX_IDS];
  int n = burst_ids(l, ids);
  return n > 0 && distinct(ids, n);
}

plait_result_t plait_epoch_open(plait_epoch_t *ep, const plait_response_list_t *l,
                                uint64_t number) {
  plait_epoch_close(ep);
  int n = burst_ids(l, NULL);
  if (n <= 0)
    return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 opened a cached epoch at list %llu with a "
                       "list that is not a burst of cached allreduces",
                       (unsigned long long)number);
  int32_t *ids = realloc(ep->ids, sizeof *ids * (size_t)n);
  if (ids) ep->ids = ids;
  uint32_t *per = realloc(ep->per_resp, sizeof *per * l->n);
  if (per) ep->per_resp = per;
  if (!ids || !per) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory opening an epoch");
  burst_ids(l, ep->ids);
  if (!distinct(ep->ids, n))
    return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 opened a cached epoch at list %llu with a "
                       "cache id twice", (unsigned long long)number);
  for (uint32_t i = 0; i < l->n; i++) ep->per_resp[i] = l->r[i].n;
  ep->n = n;
  ep->nresp = l->n;
  ep->opened_at = number;
  ep->since = plait_now();
  ep->open = 1;
  return PLAIT_SUCCESS;
}

static int in_burst(const plait_epoch_t *ep, int32_t id) {
  for (int i = 0; i < ep->n; i++)
    if (ep->ids[i] == id) return 1;
  return 0;
}

int plait_epoch_vote(const plait_epoch_t *ep, const int32_t *held, int n, int other,
                     uint8_t *stay) {
  *stay = 0;
  if (!ep->open || other) return 1;
  for (int i = 0; i < n; i++)
    if (held[i] < 0 || !in_burst(ep, held[i])) return 1; /* a miss or another operation */
  if (!distinct(held, n)) return 1; /* cannot be: a name is in flight once */
  if (n < ep->n) return 0;          /* the rest of the burst is still to come */
  *stay = 1;
  return 1;
}

plait_result_t plait_epoch_and(const plait_transport_t *t, void *ts, uint8_t *vote,
                               double wait_s) {
  if (PLAIT_TRANSPORT_HAS(t, vote)) {
    uint8_t mine = *vote ? 1 : 0, got = 0;
    plait_result_t rc = t->vote(ts, mine, &got, wait_s);
    if (rc == PLAIT_ERR_TIMEOUT && wait_s >= 0) return rc; /* still pending */
    if (rc) {
      const char *msg = t->last_error ? t->last_error(ts) : NULL;
      return plait_error(rc, "the cached epoch's agreement (the transport's vote) failed in "
                         "transport '%s': %s", t->name, msg && *msg ? msg : plait_strerror(rc));
    }
    *vote = got != 0;
    return PLAIT_SUCCESS;
  }
  int narrow = (t->dtypes & PLAIT_DTYPE_BIT(PLAIT_UINT8)) && (t->ops & PLAIT_OP_BIT(PLAIT_OP_MIN));
  uint8_t b = *vote ? 1 : 0;
  int32_t w = b;
  plait_span_t s = {narrow ? (void *)&b : (void *)&w, NULL, 1};
  s.src = s.dst;
  plait_result_t rc = t->allreduce(ts, &s, 1, narrow ? PLAIT_UINT8 : PLAIT_INT32, PLAIT_OP_MIN,
                                   1.0, 1.0);
  if (rc) {
    const char *msg = t->last_error ? t->last_error(ts) : NULL;
    return plait_error(rc, "the cached epoch's agreement (a 1-byte allreduce) failed in transport "
                       "'%s': %s", t->name, msg && *msg ? msg : plait_strerror(rc));
  }
  *vote = (uint8_t)(narrow ? b != 0 : w != 0);
  return PLAIT_SUCCESS;
}

/* One response of an agreed round: the next k ids from *at. */
static plait_result_t round_response(const plait_epoch_t *ep, const plait_cache_t *cache,
                                     uint32_t k, int *at, plait_response_t *r) {
  r->coll = PLAIT_COLL_ALLREDUCE;
  r->join_rank = -1;
  if (!(r->e = calloc(k, sizeof *r->e)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory running a cached round");
  for (uint32_t j = 0; j < k; j++, r->n++) {
    int32_t id = ep->ids[(*at)++];
    const plait_cache_slot_t *slot = plait_cache_get(cache, id);
    if (!slot)
      return plait_error(PLAIT_ERR_PROTOCOL, "cached epoch: id %d is not in the cache", (int)id);
    plait_resp_entry_t *e = &r->e[j];
    e->name = slot->name;
    e->name_borrowed = 1;
    e->cache_id = id;
    e->assign_id = -1;
    e->has_meta = 1;
    PLAIT_CHECK(plait_meta_copy(&e->meta, &slot->meta));
  }
  return PLAIT_SUCCESS;
}

plait_result_t plait_epoch_round_list(const plait_epoch_t *ep, const plait_cache_t *cache,
                                      plait_response_list_t *out) {
  memset(out, 0, sizeof *out);
  if (!ep->open) return plait_error(PLAIT_ERR_PROTOCOL, "no cached epoch is open");
  if (!(out->r = calloc(ep->nresp, sizeof *out->r)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory running a cached round");
  int at = 0;
  plait_result_t rc = PLAIT_SUCCESS;
  for (uint32_t i = 0; i < ep->nresp && rc == PLAIT_SUCCESS; i++, out->n++)
    rc = round_response(ep, cache, ep->per_resp[i], &at, &out->r[i]);
  if (rc) plait_responses_free(out);
  return rc;
}

void plait_epoch_ran(plait_epoch_t *ep) {
  ep->rounds++;
  ep->held.n = 0; /* exactly the burst: these requests are the round's */
}

plait_result_t plait_epoch_round(plait_epoch_t *ep, const plait_cache_t *cache,
                                 plait_response_list_t *out) {
  plait_result_t rc = plait_epoch_round_list(ep, cache, out);
  if (rc == PLAIT_SUCCESS) plait_epoch_ran(ep);
  return rc;
}

plait_result_t plait_epoch_hold(plait_epoch_t *ep, plait_request_list_t *req) {
  if (!req->n) return PLAIT_SUCCESS;
  uint32_t need = ep->held.n + req->n;
  if (need > ep->cap) {
    uint32_t cap = ep->cap ? ep->cap : 16;
    while (cap < need) cap *= 2;
    plait_request_t *r = realloc(ep->held.r, sizeof *r * cap);
    if (r) ep->held.r = r;
    int32_t *ids = realloc(ep->scratch, sizeof *ids * cap);
    if (ids) ep->scratch = ids;
    if (!r || !ids) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory in a cached epoch");
    ep->cap = cap;
  }
  memcpy(ep->held.r + ep->held.n, req->r, sizeof *req->r * req->n);
  ep->held.n = need;
  req->n = 0;
  return PLAIT_SUCCESS;
}

int plait_epoch_due(plait_epoch_t *ep, double now, int other, uint8_t *stay) {
  for (uint32_t i = 0; i < ep->held.n; i++) ep->scratch[i] = ep->held.r[i].cache_id;
  if (plait_epoch_vote(ep, ep->scratch, (int)ep->held.n, other, stay)) return 1;
  return now >= plait_epoch_until(ep);
}

double plait_epoch_until(const plait_epoch_t *ep) {
  return ep->open ? ep->since + PLAIT_EPOCH_WAIT_S : 0;
}

void plait_epoch_take_held(plait_epoch_t *ep, plait_request_list_t *out) {
  memset(out, 0, sizeof *out);
  if (!ep->held.n) return;
  *out = ep->held; /* the array goes with it */
  ep->held = (plait_request_list_t){0};
  ep->cap = 0;
}
