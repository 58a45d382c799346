/*
 * Shared-memory regions that a killed process left behind.
 *
 * libfabric's shm provider (1.17) names each endpoint's region
 * "/dev/shm/<pid>:<endpoint>:<n>" and removes it when the endpoint closes. A
 * rank killed with kill -9 leaves its regions behind, and a later process
 * that is given the same pid (pid_max is 32768 on many machines, so pids come
 * round within a long test run) cannot make its own: libfabric maps the stale
 * file and the process dies of SIGBUS, or fails fi_enable. A pid names one
 * live process, so before this process's first shm endpoint every region
 * named with its pid is a dead process's, and is removed.
 */
#ifndef PLAIT_OFI_SHM_STALE_H
#define PLAIT_OFI_SHM_STALE_H

#include "state.h"

/* Removes /dev/shm/<this pid>:* the first time it is called in this process
 * (later calls, e.g. a second engine in one process, do nothing: the regions
 * with this pid are then this process's own). Logs what it removed. */
void ofi_shm_clear_stale(ofi_state_t *st);

#endif
