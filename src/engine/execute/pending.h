/*
 * Internal: device responses whose work the transport runs asynchronously
 * (plait_transport_v1_t.notify). The coordinator enqueues a device response,
 * moves its local entries here and asks the plugin to call back (done) when
 * the work has finished; it does not wait. done runs on a plugin thread and
 * only records the result and wakes the coordinator (the table's eventfd);
 * the coordinator then finishes the entries on its own thread (reap). The
 * names stay in flight (the table's) until then.
 *
 * Threads: plait_pending_done is the plugin's; everything else is the
 * coordinator's. One lock guards the list.
 */
#ifndef PLAIT_PENDING_H
#define PLAIT_PENDING_H

#include "engine/execute/execute.h"

typedef struct plait_pending plait_pending_t;

/* A pending list that wakes the coordinator through wake_fd and waits at
 * most timeout_s for outstanding work (PLAIT_TIMEOUT_S). NULL when out of
 * memory. */
plait_pending_t *plait_pending_new(int wake_fd, double timeout_s);
/* Frees p, unless some done is still outstanding: p is then left (a small
 * leak) so that a plugin calling done later (its finalize must) finds it;
 * it no longer wakes anyone. NULL is harmless. */
void plait_pending_destroy(plait_pending_t *p);

/* After the work of response r was enqueued on x->ts: takes the local
 * entries es[0..r->n) (NULL ones skipped; they leave x->local, their names
 * stay in flight) and the response's scratch buffers, and calls notify.
 * t0 is when the response started (for the statistics). An error from
 * notify is returned like a collective's; the entries then stay with the
 * caller (x->local). */
plait_result_t plait_pending_add(plait_pending_t *p, plait_exec_t *x, const plait_response_t *r,
                                 plait_entry_t **es, double t0);

/* Finishes, on this thread, every response whose done came: their handles
 * complete with their outputs. The first failure is returned as the job's
 * failure ("allreduce 'x' failed in transport 'nccl': ..."); the failed
 * response's entries are failed by plait_pending_fail_all. */
plait_result_t plait_pending_reap(plait_pending_t *p, plait_exec_t *x);

/* Responses whose done has not come yet. */
int plait_pending_outstanding(plait_pending_t *p);
/* Waits (sleeping) until no done is outstanding, at most timeout_s (the
 * pending list's own when negative). Returns how many are still
 * outstanding. */
int plait_pending_wait(plait_pending_t *p, double timeout_s);

/* Fails every entry still held (done or not) with rc and msg. Their scratch
 * buffers are freed only when their done came. */
void plait_pending_fail_all(plait_pending_t *p, plait_exec_t *x, plait_result_t rc,
                            const char *msg);

#endif
