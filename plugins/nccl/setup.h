/*
 * Start and stop: the CUDA device, the stream, the communicator (its unique
 * id sent over the core's bootstrap), and subset communicators
 * (ncclCommSplit).
 */
#ifndef PLAIT_NCCL_SETUP_H
#define PLAIT_NCCL_SETUP_H

#include "state.h"

/* init(): on failure the message is in err and nothing is left allocated. */
plait_result_t nc_start(const plait_transport_init_args_t *args, nccl_state_t **out, char *err,
                        size_t err_len);

/* finalize(): waits (bounded) for the communicator to flush, destroys it (or
 * aborts it when broken or when the flush fails), frees st. NULL is fine. */
void nc_stop(nccl_state_t *st);

/* subset(): a collective over parent (ncclCommSplit); *out is NULL on a
 * non-member. */
plait_result_t nc_subset(nccl_state_t *parent, const int *ranks, int n, nccl_state_t **out);

#endif
