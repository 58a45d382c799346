/*
 * allreduce: recursive doubling (allreduce_rd.c) below
 * PLAIT_OFI_ALLREDUCE_RING_MIN bytes, where latency rules; the pipelined ring
 * (ring.c) from there on, where bandwidth does. Every rank has the same
 * count and the same settings (rank 0's, see setup.c), so all choose alike.
 *
 * allreduce_scaled folds the core's copy-in and postscale into these passes:
 * the ring's first reads come from send, and each rank's own block is
 * scaled as its last reduction writes it (chunk by chunk, in cache); the
 * allgather half then moves scaled blocks.
 */
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "errors.h"

plait_result_t ofi_reduce_scale(ofi_state_t *st, plait_dtype_t dtype, plait_op_t op, void *dst,
                                const void *a, const void *b, size_t count, double post) {
  plait_result_t rc;
  if (post == 1.0)
    rc = st->reduce(dtype, op, dst, a, b, count);
  else if (st->reduce_scale) /* one pass */
    rc = st->reduce_scale(dtype, op, dst, a, b, count, post);
  else if ((rc = st->reduce(dtype, op, dst, a, b, count)) == PLAIT_SUCCESS)
    rc = st->scale(dtype, dst, dst, count, post); /* an older core: dst is still in cache */
  if (rc)
    return ofi_break(st, rc, "the core's reduction kernel failed on %zu elements (%s)", count,
                     plait_result_name_inline(rc));
  return PLAIT_SUCCESS;
}

static plait_result_t ring_allreduce(ofi_state_t *st, const void *send, void *recv, size_t count,
                                     plait_dtype_t dtype, plait_op_t op, double post) {
  size_t n = (size_t)st->nranks, es = plait_dtype_size_inline(dtype);
  size_t *off = malloc(2 * n * sizeof *off);
  if (!off) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  size_t *len = off + n;
  ofi_even_blocks(st->nranks, count, es, off, len);
  ofi_ring_t g = {off, len, es, dtype, op, 1, 1, send, recv, NULL, op == PLAIT_OP_AVERAGE, post};
  plait_result_t rc = ofi_ring_run(st, &g);
  free(off);
  return rc;
}

plait_result_t ofi_allreduce_scaled(ofi_state_t *st, const void *send, void *recv, size_t count,
                                    plait_dtype_t dtype, plait_op_t op, double post) {
  if (count == 0) return PLAIT_SUCCESS;
  size_t bytes = count * plait_dtype_size_inline(dtype);
  if (st->nranks == 1) { /* every op over one rank (AVERAGE too): the input, scaled */
    if (post != 1.0) {
      plait_result_t rc = st->scale(dtype, recv, send, count, post);
      return rc ? ofi_fail(st, rc, "the core's scale kernel failed on %zu elements (%s)", count,
                           plait_result_name_inline(rc))
                : PLAIT_SUCCESS;
    }
    if (send != recv) memcpy(recv, send, bytes);
    return PLAIT_SUCCESS;
  }
  if (ofi_allreduce_small(st, bytes)) {
    if (send != recv) memcpy(recv, send, bytes);
    return ofi_allreduce_rd(st, recv, count, dtype, op, post);
  }
  return ring_allreduce(st, send, recv, count, dtype, op, post);
}

plait_result_t ofi_allreduce(ofi_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                             plait_op_t op) {
  if (st->nranks == 1) return PLAIT_SUCCESS;
  return ofi_allreduce_scaled(st, buf, buf, count, dtype, op, 1.0);
}
