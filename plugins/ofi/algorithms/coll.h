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
 *   vote.c             a byte's MIN by dissemination, resumable (the epoch's AND)
 *   vote_allreduce.c   that byte's MIN carried with a small allreduce, resumable
 *   kernels.c          the core's reduction kernels, as the others call them
 */
#ifndef PLAIT_OFI_COLL_H
#define PLAIT_OFI_COLL_H

#include "engine/spans.h"
#include "sizes.h"
#include "state.h"

plait_result_t ofi_ring_run(ofi_state_t *st, const ofi_ring_t *ring);

/* Recursive doubling's pairing (allreduce_rd.c, vote_allreduce.c): p the
 * largest power of two <= n; the first 2 (n - p) ranks pair up first (each
 * even one hands over to the odd one above it and sits out), and the rest
 * run as virtual ranks 0..p-1. */
static inline int ofi_rd_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
/* Rank r's virtual rank (r not an even one of the first 2 extra). */
static inline int ofi_rd_virtual(int r, int extra) { return r < 2 * extra ? r / 2 : r - extra; }
/* The real rank of virtual rank vp. */
static inline int ofi_rd_real(int vp, int extra) { return vp < extra ? 2 * vp + 1 : vp + extra; }

/* Same host over shm: allreduce by direct reads of the peers' memory
 * (direct.c). ofi_direct_decide, at init after the endpoint names went
 * round (cookies: each rank's cookie address and value), decides for the
 * state whether every rank can, through the bootstrap; ofi_direct_on says
 * what it decided; ofi_direct_allreduce runs g (spans set) so. */
plait_result_t ofi_direct_decide(ofi_state_t *st, const uint64_t *cookies,
                                 const plait_bootstrap_t *b);
int ofi_direct_on(const ofi_state_t *st);
plait_result_t ofi_direct_allreduce(ofi_state_t *st, const ofi_ring_t *g);

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
/* One byte's MIN over every rank, which the caller may leave after wait_s
 * seconds (< 0: no limit) and go on with later: PLAIT_ERR_TIMEOUT then
 * (vote.c; plait_transport_v2_t.vote). */
plait_result_t ofi_vote(ofi_state_t *st, uint8_t mine, uint8_t *out, double wait_s);

/* The vote carried with a small allreduce, resumable like ofi_vote; recv is
 * written only when every rank voted 1 (vote_allreduce.c;
 * plait_transport_v2_t.vote_allreduce). */
plait_result_t ofi_vote_allreduce(ofi_state_t *st, uint8_t mine, const void *send, void *recv,
                                  size_t count, plait_dtype_t dtype, plait_op_t op, double post,
                                  uint8_t *out, double wait_s);

/* Peers a direct algorithm (alltoallv, direct allgatherv and reducescatter)
 * talks to at once: rank r receives from r-i and sends to r+i for i in one
 * batch, then waits, so no rank posts more than 2x this many operations
 * (within any provider's queues) and the batches match up across ranks. */
#define OFI_DIRECT_BATCH 32

#endif
