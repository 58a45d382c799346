/*
 * Quiescing a broken endpoint so that it can be closed (issue 38 item 1).
 *
 * A state breaks (errors.h: ofi_break) inside a collective, while that
 * collective's requests are still posted: receives into the caller's buffers,
 * sends from them. Closing the endpoint then was what crashed libfabric
 * 1.17's rxm in fi_close, so broken endpoints used to be left open, one
 * endpoint's sockets, buffers (about 116 MiB of rxm pools over tcp) and
 * threads leaked per failed job: per reset, with elastic training.
 *
 * ofi_quiesce runs at the break, while the requests and their buffers are
 * still alive (the collective has not returned): it cancels every posted
 * request (fi_cancel) and reads the completion queue until each has
 * completed (cancelled, failed or done) or a bound passes. The state is then
 * closed when the call returns (plugin.c's guarded entry layer: ofi_teardown),
 * guarded too, so a close that spins on a dead peer's lock is rescued.
 * rxm cannot cancel sends: when some stay posted to a peer not known to be
 * gone (stopped, or on another host), closing crashed libfabric 1.17 in
 * fi_close(ep) (test_blame_ofi_tcp), so the endpoint is parked instead,
 * and closed once they complete (parked.h).
 *
 * Not for a rescued state (rescue.h): there libfabric's locks may be held and
 * it is never called again here (abandoned; parked at teardown, closed at a
 * later init, bounded: parked.h).
 */
#ifndef PLAIT_OFI_QUIESCE_H
#define PLAIT_OFI_QUIESCE_H

#include "state.h"

/* The bound on reading the queue after the cancels, in seconds. */
#define OFI_QUIESCE_S 1.0

/* Cancels st's posted requests and drains the queue (bounded); logs at
 * debug level what it did. Never fails: what stays posted (a send the
 * provider cannot cancel) goes with the endpoint's close when its peer is
 * gone; otherwise st->park_sends says how many stay (parked.h). */
void ofi_quiesce(ofi_state_t *st);

#endif
