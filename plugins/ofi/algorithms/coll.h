/*
 * The collectives, one algorithm per file, all on the progress engine
 * (progress.h). Every rank calls them in the same order with matching
 * arguments (the core guarantees it); arguments were checked in plugin.c.
 *
 *   allreduce.c        chooses: recursive doubling below
 *                      PLAIT_OFI_ALLREDUCE_RING_MIN bytes, else the ring
 *   allreduce_rd.c     recursive doubling (latency: log2(n) steps)
 *   ring.c             the pipelined ring: reduce-scatter and/or allgather
 *                      over n blocks, chunked, sends / receives / reductions
 *                      overlapping (allreduce, reducescatter, allgatherv)
 *   allgatherv.c       direct (one step) or the ring
 *   broadcast.c        binomial tree or pipelined chain
 *   alltoallv.c        every pair at once
 *   reducescatter.c    direct (alltoallv + local reduction) or the ring
 *   barrier.c          dissemination (log2(n) rounds of empty messages)
 *   kernels.c          the core's reduction kernels, as the others call them
 */
#ifndef PLAIT_OFI_COLL_H
#define PLAIT_OFI_COLL_H

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

plait_result_t ofi_ring_run(ofi_state_t *st, const ofi_ring_t *ring);

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
 * where they are (spans.c): the provider needs no registration, the size
 * is a ring's (not ofi_allreduce_small), the spans average at least
 * PLAIT_OFI_SPANS_MIN bytes, and the chunks fit the tag ids. */
int ofi_spans_in_place(const ofi_state_t *st, const ofi_ring_t *g, size_t n, size_t bytes);

/* Same host over shm: allreduce by direct reads of the peers' memory
 * (direct.c). ofi_direct_decide, at init after the endpoint names went
 * round (cookies: each rank's cookie address and value), decides for the
 * state whether every rank can, through the bootstrap; ofi_direct_on says
 * what it decided; ofi_direct_allreduce runs g (spans set) so. */
plait_result_t ofi_direct_decide(ofi_state_t *st, const uint64_t *cookies,
                                 const plait_bootstrap_t *b);
int ofi_direct_on(const ofi_state_t *st);
plait_result_t ofi_direct_allreduce(ofi_state_t *st, const ofi_ring_t *g);

/* The size rules, in one place: the collectives follow them and
 * plait_transport_v1.algorithm reports them. total: bytes in all; largest:
 * the largest single message the small algorithm would send. */
static inline int ofi_allreduce_small(const ofi_state_t *st, size_t bytes) {
  return bytes < st->tun.allreduce_ring_min && bytes <= st->max_msg;
}
static inline int ofi_allgatherv_small(const ofi_state_t *st, size_t total, size_t largest) {
  return total < st->tun.allgatherv_ring_min && largest <= st->max_msg;
}
static inline int ofi_broadcast_small(const ofi_state_t *st, size_t bytes) {
  return bytes < st->tun.broadcast_chain_min && bytes <= st->max_msg;
}
static inline int ofi_reducescatter_small(const ofi_state_t *st, size_t total, size_t largest) {
  return total < st->tun.reducescatter_ring_min && largest <= st->max_msg;
}

/* Splits count elements of es bytes into n blocks (the first count % n one
 * element longer). off and len have n entries. */
void ofi_even_blocks(int n, size_t count, size_t es, size_t *off, size_t *len);

plait_result_t ofi_allreduce(ofi_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                             plait_op_t op);
plait_result_t ofi_allreduce_rd(ofi_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                                plait_op_t op, double post);
/* allreduce from send into recv (send == recv: in place), the result scaled
 * by post as the core's scale kernel does: the ring reads send where it
 * would read buf and scales each block as it finishes reducing it; recursive
 * doubling (small) copies send first and scales in its last reduction. */
plait_result_t ofi_allreduce_scaled(ofi_state_t *st, const void *send, void *recv, size_t count,
                                    plait_dtype_t dtype, plait_op_t op, double post);
/* allreduce_scaled over n spans (plait_transport_v1.allreduce_spans): the
 * ring reads and writes the spans where they are when the provider needs no
 * registration, the reduction is a ring's and the spans are not too small
 * (PLAIT_OFI_SPANS_MIN); otherwise they go through a buffer of the plugin's,
 * a piece at a time. */
plait_result_t ofi_allreduce_spans(ofi_state_t *st, const plait_span_t *spans, size_t n,
                                   plait_dtype_t dtype, plait_op_t op, double post);
plait_result_t ofi_allgatherv(ofi_state_t *st, void *buf, const size_t *bytes);
plait_result_t ofi_broadcast(ofi_state_t *st, void *buf, size_t bytes, int root);
plait_result_t ofi_alltoallv(ofi_state_t *st, const void *send, const size_t *send_bytes,
                             void *recv, const size_t *recv_bytes);
plait_result_t ofi_reducescatter(ofi_state_t *st, const void *send, void *recv,
                                 const size_t *counts, plait_dtype_t dtype, plait_op_t op);
plait_result_t ofi_barrier(ofi_state_t *st);

/* Peers a direct algorithm (alltoallv, direct allgatherv and reducescatter)
 * talks to at once: rank r receives from r-i and sends to r+i for i in one
 * batch, then waits, so no rank posts more than 2x this many operations
 * (within any provider's queues) and the batches match up across ranks. */
#define OFI_DIRECT_BATCH 32

#endif
