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
} ofi_ring_t;

plait_result_t ofi_ring_run(ofi_state_t *st, const ofi_ring_t *ring);

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
/* dst = (a op b) * post (post 1.0: a op b), with the core's kernels; breaks
 * the state on failure. */
plait_result_t ofi_reduce_scale(ofi_state_t *st, plait_dtype_t dtype, plait_op_t op, void *dst,
                                const void *a, const void *b, size_t count, double post);
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
