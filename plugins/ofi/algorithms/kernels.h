/*
 * The core's reduction kernels as the algorithms use them (they arrive in
 * plait_transport_init_args_t and are kept in the state: st->reduce,
 * st->reduce_scale, st->scale, st->divide). A kernel's failure breaks the
 * state (errors.h: ofi_break), since the ranks are then out of step.
 */
#ifndef PLAIT_OFI_KERNELS_H
#define PLAIT_OFI_KERNELS_H

#include "state.h"

/* dst = (a op b) * post (post 1.0: a op b), in one pass where the core has
 * reduce_scale, else reduce then scale (an older core: dst is still in
 * cache); breaks the state on failure. Used by the ring, recursive doubling
 * and direct reads for each reduction they do. */
plait_result_t ofi_reduce_scale(ofi_state_t *st, plait_dtype_t dtype, plait_op_t op, void *dst,
                                const void *a, const void *b, size_t count, double post);

#endif
