/*
 * Completion without waiting (the table's notify) and the family's life.
 *
 * notify enqueues a host function (cudaLaunchHostFunc) on the family's
 * stream; when the stream reaches it, it counts one more marker as run and
 * signals a condition variable (it calls no CUDA function, as host
 * functions must not). One waiter thread per family, started at the first
 * notify, sleeps on that condition variable; between wake-ups (at least
 * every NC_POLL_S) it polls every member's ncclCommGetAsyncError and the
 * stream's error, and checks PLAIT_TIMEOUT_S against the oldest outstanding
 * notify (or the last progress, if later). A failure breaks the family
 * (aborting every communicator, errors.h) and fails every outstanding done
 * with the first failure's message, which names the rank and device. No
 * thread spins.
 */
#ifndef PLAIT_NCCL_NOTIFY_H
#define PLAIT_NCCL_NOTIFY_H

#include "state.h"

/* The longest sleep of the waiter between checks, seconds. */
#define NC_POLL_S 0.05

/* A new family for the init state st (its device, stream, timeout): locks
 * and an empty queue, no thread yet. NULL when out of memory. */
nc_family_t *nc_family_new(nccl_state_t *st);

/* Adds st to (or removes it from) the members whose communicators the
 * waiter polls and a break aborts. */
void nc_family_join(nc_family_t *f, nccl_state_t *st);
void nc_family_leave(nc_family_t *f, nccl_state_t *st);

/* The table's notify on st (core thread). */
plait_result_t nc_notify(nccl_state_t *st, plait_done_fn done, void *ctx);

/* finalize's first step on any member: waits (up to the state's timeout)
 * until every outstanding done was called; if the work never finishes,
 * breaks the family with PLAIT_ERR_SHUTDOWN so that they are called with
 * it, and waits for that. */
void nc_family_drain(nccl_state_t *st);

/* finalize of the init state, after nc_family_drain and after its
 * communicator is gone: stops the waiter, frees the staging buffers and the
 * family. Frees nothing a host function may still touch: if markers are
 * still queued on a stream that does not drain, the family is left
 * allocated (logged). */
void nc_family_free(nc_family_t *f);

#endif
