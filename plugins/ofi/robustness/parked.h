/*
 * Broken endpoints parked until they can be closed (issue 38, item 1).
 *
 * When a collective breaks over rxm (tcp;ofi_rxm), ofi_quiesce cancels what
 * it can, but rxm cannot cancel a send. With such a send still posted to a
 * peer that may be alive (stopped, or on another host, where its pid cannot
 * be checked), closing the endpoint crashed libfabric 1.17 in fi_close(ep)
 * (test_blame_ofi_tcp), so the endpoint used to be left open for ever:
 * about 116 MiB of rxm pools and 10 descriptors per failed job
 * (reset_cycles --stop-peer over ofi-tcp).
 *
 * Instead its libfabric objects (endpoint, queues, address vector, memory
 * registrations, domain, fabric) and the scratch buffers its sends may read
 * are parked here, in a list of the plugin's own, when the state is torn
 * down, with the peers of those sends. Every later init of a state sweeps
 * the list (never a teardown: closing an endpoint whose peer was killed a
 * moment before crashed rxm in fi_close, test_blame_ofi_tcp under load): a
 * parked endpoint is closed (in the order teardown
 * closes, then its buffers freed) once every send has completed (its queue
 * read briefly first, which also makes rxm progress; rxm was not seen to
 * complete them, even after the peer was killed), or once every peer of its
 * sends is known to be gone: its process on this host has exited
 * (liveness.h), or, where its pid cannot be checked (another host, another
 * pid namespace), every TCP connection this endpoint had to it when parked
 * has been closed by its end (tcp_links.h: killed or exited; a stopped peer
 * keeps them open). Without either verdict (no connection when parked,
 * another provider) it stays parked until the process exits, as before.
 *
 * The first park pins the plugin in memory (RTLD_NODELETE), so that the list
 * and libfabric outlive plait_shutdown's dlclose until the next plait_init.
 * A rescued state (rescue.h: its thread was got out of a spin inside
 * libfabric shm) is parked too, with no sends (ofi_park_rescued): until
 * then it was left open for good, its two dead peers' region mappings, 1.5
 * MiB of heap and 5 MiB of RSS per rescue (reset_cycles --kill-in-lock).
 * libfabric's locks may be held there: the jump left a lock of the dead
 * peer's region held, and may have left one of this process's. So a later
 * init closes it on a thread of its own, waited for at most
 * OFI_PARKED_CLOSE_S: a close blocked on a mutex the rescued thread left
 * held, once that thread has exited, is let through (orphan_lock.h); one
 * that spins or blocks on anything else is left there (logged at warn
 * level), and the init goes on.
 * The list has its own lock: inits and teardowns of states of several
 * engines may run at once.
 */
#ifndef PLAIT_OFI_PARKED_H
#define PLAIT_OFI_PARKED_H

#include "state.h"

/* The bound on one sweep's reading of one parked queue, in seconds: short,
 * since every init pays it per endpoint still parked (rxm was
 * not seen to complete such sends; the peers' exit is what frees them). */
#define OFI_PARKED_SWEEP_S 0.01

/* Moves st's libfabric objects, memory registrations and scratch buffers to
 * the parked list (st's pointers to them become NULL), with `sends` posted
 * sends left to complete. st must not be a subset. Logs at info level. */
void ofi_park(ofi_state_t *st, int sends);

/* The bound on the close of a rescued endpoint at a later init, in seconds. */
#define OFI_PARKED_CLOSE_S 2.0

/* Moves a rescued state's libfabric objects, registrations and scratch
 * buffers to the parked list, to be closed at a later init. */
void ofi_park_rescued(ofi_state_t *st);

/* Closes every parked endpoint whose sends have all completed; `st` (any
 * state, may be NULL) only for the log. Returns how many stay parked. */
int ofi_parked_sweep(ofi_state_t *st);

#endif
