/* Rank 0's response list, built from the released records (in release order)
 * and their fusion plan: each response's entries (cache ids used or given,
 * metadata for ranks that joined), what its kind needs (allgather first
 * dimensions, the alltoall split matrix), cached responses in id order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "engine/negotiate/negotiate.h"

/* Fills x's entries from its count records. */
static plait_result_t fill_entries(plait_negotiator_t *n, plait_response_t *x,
                                   plait_record_t **recs, int count) {
  x->e = calloc((size_t)count, sizeof *x->e);
  if (!x->e) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory planning responses");
  x->n = (uint32_t)count;
  for (int i = 0; i < count; i++) {
    plait_record_t *rec = recs[i];
    plait_resp_entry_t *e = &x->e[i];
    const plait_meta_t *meta = &rec->metas[plait_record_ref(rec, n->size)];
    e->assign_id = -1;
    e->cache_id = -1;
    e->name = rec->name; /* taken: the record is freed after the list is built */
    if (rec->key == rec->name) rec->key = NULL; /* the same string (global set) */
    rec->name = NULL;
    if (x->status == 0 && rec->cache_id >= 0) {
      e->cache_id = rec->cache_id;
    } else if (x->status == 0 && plait_cache_eligible(meta) &&
               plait_cache_lookup(n->cache, e->name, meta) < 0 &&
               (e->assign_id = plait_cache_next_id(n->cache)) >= 0) {
      PLAIT_CHECK(plait_cache_put(n->cache, e->assign_id, e->name, meta));
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

/* allgather: every member's first dimension; alltoall: the split matrix,
 * both by the members of the record's process set in rank order. */
static plait_result_t extras(plait_negotiator_t *n, plait_response_t *x,
                             const plait_record_t *rec) {
  int size = rec->nmembers;
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
      x->dims[k] = plait_record_meta(rec, r)->shape[0];
    else if (plait_record_meta(rec, r)->nsplits == (uint32_t)size)
      memcpy(x->dims + (size_t)k * size, plait_record_meta(rec, r)->splits,
             sizeof(int64_t) * size);
  }
  return PLAIT_SUCCESS;
}

/* One response from the records of one bin (members[0] its first). */
static plait_result_t respond_one(plait_negotiator_t *n, plait_record_t **members, int count,
                                  int join_rank, plait_response_t *x) {
  const plait_record_t *first = members[0];
  x->coll = first->metas[plait_record_ref(first, n->size)].coll;
  x->pset = first->pset;
  x->status = first->status;
  x->join_rank = x->coll == PLAIT_COLL_JOIN && !first->status ? join_rank : -1;
  if (first->status && first->message && !(x->message = strdup(first->message)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  PLAIT_CHECK(fill_entries(n, x, members, count));
  PLAIT_CHECK(extras(n, x, first));
  order_cached(x);
  return PLAIT_SUCCESS;
}

plait_result_t plait_neg_respond(plait_negotiator_t *n, plait_record_t **recs, int count,
                                 const plait_fusion_bin_t *bins, int nb, const int *bin_of,
                                 int join_rank, plait_response_list_t *out) {
  /* the records grouped by bin, each bin's in release order */
  plait_record_t **grouped = malloc(sizeof *grouped * (size_t)(count ? count : 1));
  int *at = calloc((size_t)(nb ? nb : 1), sizeof *at);
  out->r = calloc((size_t)(nb ? nb : 1), sizeof *out->r);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!grouped || !at || !out->r) {
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory planning responses");
    goto out;
  }
  for (int b = 1; b < nb; b++) at[b] = at[b - 1] + bins[b - 1].count;
  for (int i = 0; i < count; i++) grouped[at[bin_of[i]]++] = recs[i];
  for (int b = 0, from = 0; b < nb && rc == PLAIT_SUCCESS; from += bins[b++].count) {
    rc = respond_one(n, grouped + from, bins[b].count, join_rank, &out->r[b]);
    out->n++; /* counted even when half built, so that it is freed */
  }
out:
  free(grouped);
  free(at);
  return rc;
}
