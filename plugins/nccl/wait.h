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

/* Waits until ev (recorded on the stream) has passed, as nc_wait does. */
plait_result_t nc_wait_event(nccl_state_t *st, cudaEvent_t ev, const char *what);

/* After enqueuing `what`: nc_wait, unless notify was ever called on the
 * family (it then returns at once: completion is notify's). */
plait_result_t nc_finish(nccl_state_t *st, const char *what);

/* The next operation on st->stream waits for everything enqueued so far on
 * stream (an event recorded there, waited for by st->stream; the host does
 * not block). which names the stream in a failure's message. Fails without
 * breaking the state. */
plait_result_t nc_after_stream(nccl_state_t *st, cudaStream_t stream, const char *which);

/* Orders the next operation on st->stream after everything enqueued so far
 * on the legacy default stream (and, through its semantics, on every
 * blocking stream): an event recorded there, waited for by the stream,
 * without blocking the host. Tensors that the caller wrote on PyTorch's
 * default stream, or with plain CUDA calls on stream 0, are then complete
 * before NCCL reads them; work on non-blocking streams is not covered. Once
 * the core called ready() on the family it names the streams itself and
 * this does nothing. Fails without breaking the state: nothing of the
 * operation is enqueued yet. */
plait_result_t nc_after_default_stream(nccl_state_t *st);

/* Seconds on a monotonic clock. */
double nc_now(void);

#endif
