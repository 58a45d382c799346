/*
 * Noticing a peer on this host that has exited, without waiting for the
 * timeout: each rank publishes its pid, its start time and the identity of
 * its kernel and pid namespace at init; while a wait is idle the plugin
 * checks /proc/<pid>/stat of the peers it waits on. A peer on another host
 * (or in another pid or time namespace) is only caught by PLAIT_TIMEOUT_S.
 */
#ifndef PLAIT_OFI_LIVENESS_H
#define PLAIT_OFI_LIVENESS_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

/* This process: pid, start time, and a hash of boot id + pid namespace + time
 * namespace (the start time reads alike only within one time namespace). */
void ofi_self_identity(int64_t *pid, uint64_t *start_time, uint64_t *kernel_id);

/* Whether process pid on this host runs: 1 (and its start time, field 22 of
 * /proc/<pid>/stat, in clock ticks after boot), 0 when there is no such
 * process or it has exited (a zombie), -1 when it cannot be told. */
int ofi_process_start(int64_t pid, uint64_t *start_ticks);

/* 1 (and why) when peer is known to have exited. */
int ofi_peer_gone(const ofi_state_t *st, int peer, char *why, size_t why_len);

/* The same for a peer's record kept apart from its state (parked.h). */
int ofi_peer_record_gone(const ofi_peer_t *p, char *why, size_t why_len);

#endif
