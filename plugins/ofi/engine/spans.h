/*
 * The ring's blocks over one buffer or over spans (ofi_ring_t: what
 * algorithms/ring.c and algorithms/direct.c run), and how they are cut: the
 * blocks into chunks, the chunks over spans into messages of at most
 * st->iov_limit pieces; and whether allreduce_spans runs the ring over the
 * spans where they are. Pure functions of lengths and settings, so that
 * every rank decides and cuts alike (tests/plugins/ofi/test_ofi_spans.c).
 */
#ifndef PLAIT_OFI_SPANS_H
#define PLAIT_OFI_SPANS_H

#include "state.h"

typedef struct ofi_ring {
  const size_t *off, *len; /* per block, in bytes: block b at off[b] */
  size_t es;               /* element size (1 for bytes) */
  plait_dtype_t dtype;
  plait_op_t op;
  int reduce_scatter;      /* run the n-1 reduce-scatter steps */
  int allgather;           /* run the n-1 allgather steps */
  const char *src;         /* this rank's contributions (reduce-scatter) */
  char *work;              /* partial results and the allgathered blocks */
  char *final;             /* this rank's reduced block; NULL: work + off[rank] */
  int average;             /* divide this rank's reduced block by n */
  double post;             /* then scale it by this (1.0: not at all) */
  /* Scatter-gather (allreduce_spans): with spans set, src and work are
   * unused and final is NULL; byte o of the blocks' buffer lies in span i
   * where span_at[i] <= o < span_at[i+1], at spans[i].src + (o - span_at[i])
   * for this rank's contributions and at spans[i].dst + (o - span_at[i])
   * for the work. No registration: the caller checked !st->need_mr. */
  const plait_span_t *spans;
  const size_t *span_at;   /* nspans + 1 entries, span_at[0] = 0 */
  size_t nspans;
} ofi_ring_t;

/* The chunks ofi_ring_run cuts g's blocks into: boundaries (relative to each
 * block's start) into cofs, block b's chunks from cofs[first[b]], nch[b] of
 * them; each chunk at most `chunk` bytes and, over spans, at most
 * st->iov_limit pieces. cofs needs room for ofi_ring_max_cuts(...) entries.
 * Every rank computes the same cuts from the same lengths. Returns the
 * largest chunk count of a block. */
size_t ofi_ring_cuts(const ofi_ring_t *g, int n, size_t chunk, size_t iov_limit, size_t *cofs,
                     size_t *first, size_t *nch);
/* An upper bound on the entries ofi_ring_cuts writes into cofs. */
size_t ofi_ring_max_cuts(const ofi_ring_t *g, int n, size_t chunk);
/* The span of g holding byte `at` of the blocks' buffer (at < the total):
 * the first whose end is past it, so empty spans are skipped. */
size_t ofi_span_of(const ofi_ring_t *g, size_t at);
/* Whether allreduce_spans runs the ring over g's n spans (bytes in all)
 * where they are: the provider needs no registration, the size
 * is a ring's (not ofi_allreduce_small), the spans average at least
 * PLAIT_OFI_SPANS_MIN bytes, and the chunks fit the tag ids. */
int ofi_spans_in_place(const ofi_state_t *st, const ofi_ring_t *g, size_t n, size_t bytes);

/* Splits count elements of es bytes into n blocks (the first count % n one
 * element longer). off and len have n entries. */
void ofi_even_blocks(int n, size_t count, size_t es, size_t *off, size_t *len);

#endif
