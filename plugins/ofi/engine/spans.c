/*
 * How the ring's data is cut: into blocks, the blocks into chunks, and,
 * for allreduce_spans (a fused response's tensors reduced where they are),
 * the chunks so that each is one message of at most st->iov_limit pieces;
 * and whether the ring runs over spans in place at all
 * (algorithms/allreduce.c packs them into a buffer otherwise). Pure
 * functions of lengths and settings, so that every rank decides and cuts
 * alike (tests/plugins/ofi/test_ofi_spans.c).
 */
#include <stdlib.h>

#include "engine/progress.h"
#include "engine/spans.h"
#include "sizes.h"

size_t ofi_span_of(const ofi_ring_t *g, size_t at) {
  size_t lo = 0, hi = g->nspans - 1;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->span_at[mid + 1] > at) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

size_t ofi_ring_max_cuts(const ofi_ring_t *g, int n, size_t chunk) {
  size_t cuts = 2 * (size_t)n + (g->spans ? g->nspans : 0);
  for (int b = 0; b < n; b++) cuts += g->len[b] / chunk + 1;
  return cuts;
}

size_t ofi_ring_cuts(const ofi_ring_t *g, int n, size_t chunk, size_t iov_limit, size_t *cofs,
                     size_t *first, size_t *nch) {
  size_t at = 0, kmax = 0;
  for (int b = 0; b < n; b++) {
    size_t len = g->len[b], o = 0, k = 0, i = g->spans && len ? ofi_span_of(g, g->off[b]) : 0;
    first[b] = at;
    cofs[at] = 0;
    while (o < len) {
      if (!g->spans) {
        o = len - o > chunk ? o + chunk : len;
      } else { /* up to chunk bytes in up to iov_limit pieces */
        size_t start = o;
        for (size_t p = 0; o < len && p < iov_limit && o - start < chunk; p++) {
          while (g->span_at[i + 1] <= g->off[b] + o) i++;
          size_t take = g->span_at[i + 1] - (g->off[b] + o);
          if (take > chunk - (o - start)) take = chunk - (o - start);
          if (take > len - o) take = len - o;
          o += take;
        }
      }
      cofs[at + ++k] = o;
    }
    nch[b] = k;
    at += k + 1;
    if (k > kmax) kmax = k;
  }
  return kmax;
}

/* Small spans cost a message each iov_limit of them: below the mean size
 * PLAIT_OFI_SPANS_MIN the two copies of packing them cost less. */
int ofi_spans_in_place(const ofi_state_t *st, const ofi_ring_t *g, size_t n, size_t bytes) {
  if (st->need_mr || ofi_allreduce_small(st, bytes) || bytes / n < st->tun.spans_min) return 0;
  size_t chunk = st->tun.chunk < st->max_msg ? (size_t)st->tun.chunk : st->max_msg;
  chunk -= chunk % g->es;
  if (chunk < g->es) return 0;
  return (size_t)(2 * st->nranks) * ofi_ring_max_cuts(g, st->nranks, chunk) <= OFI_TAG_ID_MAX;
}

void ofi_even_blocks(int n, size_t count, size_t es, size_t *off, size_t *len) {
  size_t base = count / (size_t)n, extra = count % (size_t)n, at = 0;
  for (int b = 0; b < n; b++) {
    size_t c = base + ((size_t)b < extra ? 1 : 0);
    off[b] = at * es;
    len[b] = c * es;
    at += c;
  }
}
