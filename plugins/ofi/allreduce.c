/*
 * allreduce: recursive doubling (allreduce_rd.c) below
 * PLAIT_OFI_ALLREDUCE_RING_MIN bytes, where latency rules; the pipelined ring
 * (ring.c) from there on, where bandwidth does. Every rank has the same
 * count and the same settings (rank 0's, see setup.c), so all choose alike.
 */
#include <stdlib.h>

#include "coll.h"
#include "errors.h"

static plait_result_t ring_allreduce(ofi_state_t *st, void *buf, size_t count,
                                     plait_dtype_t dtype, plait_op_t op) {
  size_t n = (size_t)st->nranks, es = plait_dtype_size_inline(dtype);
  size_t *off = malloc(2 * n * sizeof *off);
  if (!off) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  size_t *len = off + n;
  ofi_even_blocks(st->nranks, count, es, off, len);
  ofi_ring_t g = {off, len, es, dtype, op, 1, 1, buf, buf, NULL, op == PLAIT_OP_AVERAGE};
  plait_result_t rc = ofi_ring_run(st, &g);
  free(off);
  return rc;
}

plait_result_t ofi_allreduce(ofi_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                             plait_op_t op) {
  if (st->nranks == 1 || count == 0) return PLAIT_SUCCESS;
  size_t bytes = count * plait_dtype_size_inline(dtype);
  if (ofi_allreduce_small(st, bytes))
    return ofi_allreduce_rd(st, buf, count, dtype, op);
  return ring_allreduce(st, buf, count, dtype, op);
}
