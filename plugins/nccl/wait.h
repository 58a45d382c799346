/*
 * Waiting without hanging. The communicator is non-blocking
 * (ncclConfig_t.blocking = 0), so no NCCL call blocks this thread; every
 * wait polls, checks ncclCommGetAsyncError and gives up after the state's
 * timeout_s (PLAIT_TIMEOUT_S), aborting the communicator so that no kernel
 * stays stuck waiting for a peer.
 *
 * Polling: the first 100 us without sleeping (a small collective finishes
 * within that), then sleeps that start at 5 us and double up to 1 ms.
 */
#ifndef PLAIT_NCCL_WAIT_H
#define PLAIT_NCCL_WAIT_H

#include "state.h"

/* After an NCCL call `what` on comm returned r: fails (breaking the state) on
 * an error, else waits until the communicator leaves ncclInProgress. */
plait_result_t nc_settle(nccl_state_t *st, ncclComm_t comm, const char *what, ncclResult_t r);

/* Waits until everything enqueued on st->stream so far has run: records
 * st->done and polls it. Breaks the state on an asynchronous NCCL error, a
 * CUDA error or the timeout. */
plait_result_t nc_wait(nccl_state_t *st, const char *what);

/* Seconds on a monotonic clock. */
double nc_now(void);

#endif
