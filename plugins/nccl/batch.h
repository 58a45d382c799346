/*
 * batch_copy on the device: the span table (batch_plan.h) staged in a ring
 * of NC_STAGE_SLOTS pinned host buffers, copied to a device table on the
 * family's stream (cudaMemcpyAsync), then one kernel launch (kernels.h).
 * A slot is written again only after the event recorded behind its copy
 * has passed (waited for with the timeout, as nc_wait does), so a table is
 * never changed while the stream may still read it; the device table is
 * rewritten only in stream order, after the kernel that read it.
 */
#ifndef PLAIT_NCCL_BATCH_H
#define PLAIT_NCCL_BATCH_H

#include "state.h"

/* Enqueues the copy/scale/fill of n spans (checked by the caller: pointers
 * on the device, aligned to the element, bool only with factor 1.0) on the
 * stream, after what is already there; no wait for it. divisor != 0
 * divides instead of scaling (kernels.h). */
plait_result_t nc_batch_enqueue(nccl_state_t *st, const plait_span_t *spans, size_t n,
                                plait_dtype_t dtype, plait_op_t op, double factor,
                                uint32_t divisor);

/* buf[0..count) /= divisor in place, as the core's plait_divide: how
 * AVERAGE finishes an ncclSum. Enqueued only. */
plait_result_t nc_batch_divide(nccl_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                               uint32_t divisor);

/* The staging buffers and the device table (the family's finalize, once the
 * stream has passed every use of them). */
void nc_batch_release(nc_family_t *f);

#endif
