#include "algorithms/kernels.h"

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
