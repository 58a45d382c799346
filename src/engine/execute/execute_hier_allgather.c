/* The hierarchical allgather (hier_plan.h's layout, hierarchy.h's sub-states):
 * 1. across hosts, in parallel: every rank's block to the ranks of its local
 *    index on every host (an allgather over the cross set: each host sends
 *    (H-1)/H of the output across, as the hierarchical allreduce does);
 * 2. within the host: each local rank's collection of its cross set's blocks
 *    to every rank of the host (an allgather over the local set);
 * 3. the blocks from that order (local index, then rank) into rank order.
 * Over whatever transport the job runs; blocks of any size, none included. */
#include "engine/execute/execute_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/transport/hierarchy.h"
#include "util/clock.h"
#include "util/log.h"

int plait_exec_hier_ag_wanted(const plait_exec_t *x, const plait_meta_t *m, size_t total) {
  const plait_hier_t *h = x->hier;
  if (!h || m->device >= 0) return 0;
  /* count: one element per local rank at least (an allgather has no shards) */
  return plait_hier_wanted(h->ag_mode, h->threshold, (size_t)h->per_host, total, h->per_host,
                           h->gain, PLAIT_HIER_AUTO_MIN_GAIN);
}

/* A step failed on sub-state ts: the message transport_error reports. */
static plait_result_t step_failed(plait_exec_t *x, const plait_transport_t *t, void *ts,
                                  plait_result_t rc, const char *step) {
  const char *m = t->last_error(ts);
  snprintf(x->hier_msg, sizeof x->hier_msg, "hierarchical allgather, %s: %s", step,
           m && *m ? m : plait_strerror(rc));
  return rc;
}

/* order: the ranks by local index, then rank (n entries); lbytes[j]: the
 * bytes of local index j's cross set; *start: where this rank's cross set
 * begins in order, *at: its byte offset in that order. */
static void gather_order(const plait_hier_t *h, int n, const size_t *bytes, int *order,
                         size_t *lbytes, int *start, size_t *at) {
  int k = 0;
  size_t off = 0;
  for (int j = 0; j < h->per_host; j++) {
    int m = plait_hier_members(h->index_of, n, j, order + k);
    if (j == h->index) *start = k, *at = off;
    lbytes[j] = 0;
    for (int i = k; i < k + m; i++) lbytes[j] += bytes[order[i]];
    off += lbytes[j];
    k += m;
  }
}

plait_result_t plait_exec_hier_allgather(plait_exec_t *x, void *out, const size_t *bytes) {
  plait_hier_t *h = x->hier;
  const plait_transport_t *t = x->t;
  int n = x->size, L = h->per_host, H = h->hosts, start = 0;
  x->hier_msg[0] = '\0';
  int *order = malloc(sizeof *order * (size_t)n);
  size_t *lbytes = malloc(sizeof *lbytes * (size_t)(L + H)), *off = malloc(sizeof *off * (size_t)(n + 1));
  size_t at = 0;
  off[0] = 0;
  for (int q = 0; off && q < n; q++) off[q + 1] = off[q] + bytes[q];
  /* kept between calls: a fresh buffer's first touches cost as much as
   * the copy into rank order (docs/performance.md) */
  size_t need = off && off[n] ? off[n] : 1;
  if (need > h->ag_cap) {
    free(h->ag_scratch);
    h->ag_cap = 0;
    if ((h->ag_scratch = malloc(need))) h->ag_cap = need;
  }
  char *scratch = h->ag_scratch;
  if (!order || !lbytes || !off || !scratch) {
    free(order), free(lbytes), free(off);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory (hierarchical allgather)");
  }
  size_t *cbytes = lbytes + L;
  gather_order(h, n, bytes, order, lbytes, &start, &at);
  /* 1. this rank's block into its place in its cross set's collection */
  char *coll = scratch + at;
  size_t mine = 0;
  for (int p = 0; p < H; p++) {
    cbytes[p] = bytes[order[start + p]];
    if (order[start + p] < x->rank) mine += cbytes[p];
  }
  memcpy(coll + mine, (char *)out + off[x->rank], bytes[x->rank]);
  double t0 = plait_now();
  plait_result_t rc = t->allgatherv(h->cross, coll, cbytes);
  if (rc) rc = step_failed(x, t, h->cross, rc, "the allgather across hosts");
  /* 2. every collection to every local rank */
  double t1 = plait_now();
  if (rc == PLAIT_SUCCESS && (rc = h->lt->allgatherv(h->local, scratch, lbytes)))
    rc = step_failed(x, h->lt, h->local, rc, "the allgather within the host");
  /* 3. into rank order */
  double t2 = plait_now();
  size_t from = 0;
  for (int k = 0; rc == PLAIT_SUCCESS && k < n; k++) {
    memcpy((char *)out + off[order[k]], scratch + from, bytes[order[k]]);
    from += bytes[order[k]];
  }
  PLAIT_DEBUG("hier", "hierarchical allgather of %zu bytes: rc %d; %.1f ms across hosts, "
              "%.1f ms within the host, %.1f ms into rank order", off[n], (int)rc,
              (t1 - t0) * 1e3, (t2 - t1) * 1e3, (plait_now() - t2) * 1e3);
  free(order), free(lbytes), free(off);
  return rc;
}
