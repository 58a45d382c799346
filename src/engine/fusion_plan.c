/* Rank 0 turns agreed operations into the ordered response list: groups are
 * released whole, allreduces are fused by (dtype, op, scale factors, device)
 * up to the threshold, looking past other operations in between. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"
#include "engine/negotiate.h"
#include "control/net.h"

typedef struct {
  plait_response_t resp;
  int position; /* index of its first record in release order */
  uint64_t bytes;
  int open;     /* an allreduce bin still taking members */
  plait_record_t **recs;
  int nrecs, cap;
} building_t;

static int ref_rank(const plait_negotiator_t *n, const plait_record_t *rec) {
  int r = 0;
  while (r < n->size - 1 && !rec->have[r]) r++;
  return r;
}

static uint64_t aligned(uint64_t b) {
  return (b + PLAIT_FUSION_ALIGN - 1) / PLAIT_FUSION_ALIGN * PLAIT_FUSION_ALIGN;
}

static int same_bin(const plait_meta_t *a, const plait_meta_t *b) {
  return a->pset == b->pset && a->dtype == b->dtype && a->op == b->op && a->prescale == b->prescale &&
         a->postscale == b->postscale && a->device == b->device;
}

static plait_result_t add_rec(building_t *b, plait_record_t *rec) {
  if (b->nrecs == b->cap) {
    int cap = b->cap ? 2 * b->cap : 8;
    plait_record_t **p = realloc(b->recs, sizeof *p * (size_t)cap);
    if (!p) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory planning responses");
    b->recs = p;
    b->cap = cap;
  }
  b->recs[b->nrecs++] = rec;
  return PLAIT_SUCCESS;
}

/* Fills the response's entries (and kind extras) from its records. */
static plait_result_t finish(plait_negotiator_t *n, building_t *b) {
  plait_response_t *x = &b->resp;
  x->pset = b->recs[0]->pset;
  x->e = calloc((size_t)b->nrecs, sizeof *x->e);
  if (!x->e) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory planning responses");
  x->n = (uint32_t)b->nrecs;
  for (int i = 0; i < b->nrecs; i++) {
    plait_record_t *rec = b->recs[i];
    plait_resp_entry_t *e = &x->e[i];
    const plait_meta_t *meta = &rec->metas[ref_rank(n, rec)];
    e->assign_id = -1;
    e->cache_id = -1;
    if (!(e->name = strdup(rec->name))) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
    if (x->status == 0 && rec->cache_id >= 0) {
      e->cache_id = rec->cache_id;
    } else if (x->status == 0 && plait_cache_eligible(meta) &&
               plait_cache_lookup(n->cache, rec->name, meta) < 0 &&
               (e->assign_id = plait_cache_next_id(n->cache)) >= 0) {
      PLAIT_CHECK(plait_cache_put(n->cache, e->assign_id, rec->name, meta));
    }
    /* ranks outside a set record its cache ids too: with the metadata */
    if (n->njoined > 0 || meta->coll == PLAIT_COLL_JOIN || (meta->pset && e->assign_id >= 0)) {
      e->has_meta = 1;
      PLAIT_CHECK(plait_meta_copy(&e->meta, meta));
    }
  }
  return PLAIT_SUCCESS;
}

static int by_cache_id(const void *a, const void *b) {
  const plait_resp_entry_t *x = a, *y = b;
  return (x->cache_id > y->cache_id) - (x->cache_id < y->cache_id);
}

/* A response whose tensors all go by cache id travels as a set of ids (a
 * bit-vector when smaller), which every rank reads in ascending order: rank 0
 * runs it in that order too. */
static void order_cached(plait_response_t *x) {
  for (uint32_t i = 0; i < x->n; i++)
    if (x->e[i].cache_id < 0 || x->e[i].assign_id >= 0 || x->e[i].has_meta) return;
  qsort(x->e, x->n, sizeof *x->e, by_cache_id);
}

/* allgather: every rank's first dimension; alltoall: the split matrix. */
static plait_result_t extras(plait_negotiator_t *n, building_t *b) {
  plait_response_t *x = &b->resp;
  plait_record_t *rec = b->recs[0];
  int size = rec->nmembers; /* dims go by the set's members, in rank order */
  if (x->status || (x->coll != PLAIT_COLL_ALLGATHER && x->coll != PLAIT_COLL_ALLTOALL))
    return PLAIT_SUCCESS;
  x->ndims = (uint32_t)(x->coll == PLAIT_COLL_ALLGATHER ? size : size * size);
  x->dims = calloc(x->ndims, sizeof *x->dims);
  if (!x->dims) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory planning responses");
  for (int r = 0, i = 0; r < n->size; r++) {
    if (!rec->member[r]) continue;
    int k = i++;
    if (!rec->have[r]) continue; /* a joined rank contributes nothing */
    if (x->coll == PLAIT_COLL_ALLGATHER)
      x->dims[k] = rec->metas[r].shape[0];
    else if (rec->metas[r].nsplits == (uint32_t)size)
      memcpy(x->dims + (size_t)k * size, rec->metas[r].splits, sizeof(int64_t) * size);
  }
  return PLAIT_SUCCESS;
}

/* Gives every member of a released group that has a failed member that
 * failure, so a group succeeds or fails as a whole. */
static void fail_group(plait_negotiator_t *n, plait_record_t **out, int k, int32_t pset,
                       const char *group) {
  const plait_record_t *bad = NULL;
  for (int i = 0; i < k && !bad; i++) {
    const plait_meta_t *m = &out[i]->metas[ref_rank(n, out[i])];
    if (m->group && !strcmp(m->group, group) && out[i]->pset == pset && out[i]->status)
      bad = out[i];
  }
  if (!bad) return;
  for (int i = 0; i < k; i++) {
    plait_record_t *rec = out[i];
    const plait_meta_t *m = &rec->metas[ref_rank(n, rec)];
    if (!m->group || strcmp(m->group, group) || rec->pset != pset || rec->status) continue;
    rec->status = bad->status;
    rec->message = malloc(1600);
    if (rec->message)
      snprintf(rec->message, 1600, "allreduce '%s' failed with its group '%s': its member '%s' "
               "failed: %s", rec->name, group, bad->name,
               bad->message ? bad->message : plait_strerror(bad->status));
  }
}

/* Groups with a failed member: they leave at once (their pending members
 * failed too), instead of waiting for members that cannot all come. */
static void fail_broken_groups(plait_negotiator_t *n, plait_namemap_t *broken) {
  for (int i = 0; i < n->nready; i++) {
    plait_record_t *rec = n->ready[i];
    const plait_meta_t *m = &rec->metas[ref_rank(n, rec)];
    if (!m->group || !rec->status) continue;
    char gk[PLAIT_OP_KEY_MAX];
    const char *gkey = plait_op_key(gk, rec->pset, m->group);
    if (plait_namemap_get(broken, gkey)) continue;
    plait_namemap_put(broken, gkey, rec);
    char why[1200];
    snprintf(why, sizeof why, "its member '%s' failed: %s", rec->name,
             rec->message ? rec->message : plait_strerror(rec->status));
    plait_neg_fail_group(n, rec->pset, m->group, rec->status, why); /* appends to n->ready */
  }
}

/* Releases the ready records, a group only once all its members are ready
 * (or one has failed), in order. */
static plait_record_t **release(plait_negotiator_t *n, int *count) {
  plait_namemap_t broken;
  *count = 0;
  if (plait_namemap_init(&broken)) return NULL;
  fail_broken_groups(n, &broken);
  plait_record_t **out = malloc(sizeof *out * (size_t)(n->nready ? n->nready : 1));
  if (!out) {
    plait_namemap_free(&broken);
    return NULL;
  }
  for (int i = 0; i < n->nready; i++) {
    plait_record_t *rec = n->ready[i];
    const plait_meta_t *m = &rec->metas[ref_rank(n, rec)];
    if (!m->group || rec->counted) continue;
    rec->counted = 1;
    char gk[PLAIT_OP_KEY_MAX];
    const char *gkey = plait_op_key(gk, rec->pset, m->group);
    intptr_t have = (intptr_t)plait_namemap_get(&n->groups, gkey);
    plait_namemap_put(&n->groups, gkey, (void *)(have + 1));
  }
  int k = 0, kept = 0;
  for (int i = 0; i < n->nready; i++) {
    plait_record_t *rec = n->ready[i];
    const plait_meta_t *m = &rec->metas[ref_rank(n, rec)];
    char gk[PLAIT_OP_KEY_MAX];
    const char *gkey = m->group ? plait_op_key(gk, rec->pset, m->group) : NULL;
    if (!m->group || plait_namemap_get(&broken, gkey) ||
        (intptr_t)plait_namemap_get(&n->groups, gkey) >= (intptr_t)m->group_size)
      out[k++] = rec;
    else
      n->ready[kept++] = rec;
  }
  n->nready = kept;
  for (int i = 0; i < k; i++) {
    const plait_meta_t *m = &out[i]->metas[ref_rank(n, out[i])];
    char gk[PLAIT_OP_KEY_MAX];
    const char *gkey = m->group ? plait_op_key(gk, out[i]->pset, m->group) : NULL;
    if (m->group && plait_namemap_get(&n->groups, gkey)) {
      fail_group(n, out, k, out[i]->pset, m->group);
      plait_namemap_remove(&n->groups, gkey);
    }
  }
  plait_namemap_free(&broken);
  *count = k;
  return out;
}

static plait_result_t plan_records(plait_negotiator_t *n, plait_record_t **recs, int count,
                                   building_t *bs, int *nb) {
  for (int i = 0; i < count; i++) {
    plait_record_t *rec = recs[i];
    const plait_meta_t *m = &rec->metas[ref_rank(n, rec)];
    uint64_t bytes = aligned(plait_meta_bytes(m));
    building_t *bin = NULL;
    /* A tensor over PLAIT_FUSION_MAX_TENSOR runs alone, in place: copying it
     * through the buffer costs more than the collective it would save. */
    int fusible = !rec->status && m->coll == PLAIT_COLL_ALLREDUCE && n->threshold > 0 &&
                  (n->max_tensor == 0 || plait_meta_bytes(m) <= n->max_tensor);
    if (fusible)
      for (int j = 0; j < *nb && !bin; j++)
        if (bs[j].open && same_bin(&bs[j].recs[0]->metas[ref_rank(n, bs[j].recs[0])], m)) {
          if (bs[j].bytes + bytes <= n->threshold) bin = &bs[j];
          else bs[j].open = 0; /* full: later ones start a new bin */
        }
    if (!bin) {
      bin = &bs[(*nb)++];
      memset(bin, 0, sizeof *bin);
      bin->position = i;
      bin->resp.coll = m->coll;
      bin->resp.status = rec->status;
      bin->resp.join_rank = -1;
      if (rec->status && rec->message && !(bin->resp.message = strdup(rec->message)))
        return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
      bin->open = fusible;
      if (m->coll == PLAIT_COLL_JOIN && !rec->status) {
        bin->resp.join_rank = n->last_joined;
        n->njoined = 0;
        memset(n->joined, 0, (size_t)n->size);
      }
    }
    bin->bytes += bytes;
    PLAIT_CHECK(add_rec(bin, rec));
  }
  return PLAIT_SUCCESS;
}

plait_result_t plait_neg_plan(plait_negotiator_t *n, double now, plait_response_list_t *out,
                              int *any) {
  memset(out, 0, sizeof *out);
  out->shutdown_rank = -1;
  *any = 0;
  PLAIT_CHECK(inspect_stalls_for_plan(n, now));
  if (n->nready == 0) return PLAIT_SUCCESS;
  int count = 0, nb = 0;
  plait_record_t **recs = release(n, &count);
  building_t *bs = calloc((size_t)(count ? count : 1), sizeof *bs);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!recs || !bs) {
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory planning responses");
    goto out;
  }
  PLAIT_CHECK_GOTO(rc, plan_records(n, recs, count, bs, &nb), out);
  out->r = calloc((size_t)(nb ? nb : 1), sizeof *out->r);
  if (!out->r) {
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory planning responses");
    goto out;
  }
  for (int j = 0; j < nb && rc == PLAIT_SUCCESS; j++) { /* bins are in position order */
    rc = finish(n, &bs[j]);
    if (rc == PLAIT_SUCCESS) rc = extras(n, &bs[j]);
    if (rc == PLAIT_SUCCESS) order_cached(&bs[j].resp);
    out->r[out->n++] = bs[j].resp;
    memset(&bs[j].resp, 0, sizeof bs[j].resp);
  }
  *any = out->n > 0;
out:
  for (int j = 0; bs && j < nb; j++) {
    plait_response_free(&bs[j].resp);
    free(bs[j].recs);
  }
  for (int i = 0; i < count; i++) plait_record_free(recs[i], n->size);
  free(recs);
  free(bs);
  if (rc) plait_responses_free(out);
  return rc;
}
