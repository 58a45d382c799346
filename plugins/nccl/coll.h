/*
 * The collectives on the device: each enqueues NCCL work on the state's
 * stream (holding the family's comm_mu while it uses the communicator),
 * then waits for it (wait.h), or, once notify is in use, returns. Arguments are checked by the
 * entry points (plugin.c) before these run.
 */
#ifndef PLAIT_NCCL_COLL_H
#define PLAIT_NCCL_COLL_H

#include "state.h"

/* NCCL's type for a plait dtype; 0 when NCCL has none (int16, uint16). bool
 * travels as uint8. */
int nc_dtype(plait_dtype_t dtype, ncclDataType_t *out);
/* NCCL's op: AVERAGE is ncclSum (the division follows, as the core's
 * plait_divide, in the plugin's kernel: ncclAvg rounds otherwise); on bool
 * SUM and MAX are ncclMax (logical or on 0/1 bytes), MIN and PRODUCT ncclMin
 * (logical and). */
ncclRedOp_t nc_op(plait_dtype_t dtype, plait_op_t op);

plait_result_t nc_allreduce(nccl_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                            plait_op_t op);
plait_result_t nc_allgatherv(nccl_state_t *st, void *buf, const size_t *bytes);
plait_result_t nc_broadcast(nccl_state_t *st, void *buf, size_t bytes, int root);
plait_result_t nc_alltoallv(nccl_state_t *st, const void *send, const size_t *send_bytes,
                            void *recv, const size_t *recv_bytes);
plait_result_t nc_reducescatter(nccl_state_t *st, const void *send, void *recv,
                                const size_t *counts, plait_dtype_t dtype, plait_op_t op);
plait_result_t nc_barrier(nccl_state_t *st);

/* recv = allreduce(send) * postscale: ncclAllReduce out of place, then
 * (postscale != 1.0) the batch kernel over recv in place, rounding as
 * plait_scale_fn does. */
plait_result_t nc_allreduce_scaled(nccl_state_t *st, const void *send, void *recv, size_t count,
                                   plait_dtype_t dtype, plait_op_t op, double postscale);

plait_result_t nc_mem_copy(nccl_state_t *st, void *dst, const void *src, size_t bytes,
                           plait_copy_kind_t kind);

#endif
