/*
 * Shared-memory regions that killed processes left behind.
 *
 * libfabric's shm provider (1.17) names each endpoint's region
 * "/dev/shm/<pid>:<endpoint>:<n>" and removes it when the endpoint closes. A
 * process killed with kill -9 leaves its regions behind, 16 MiB each, until
 * reboot; and a later process that is given the same pid (pid_max is 32768
 * on many machines, so pids come round within a long test run) cannot make
 * its own: libfabric maps the stale file and the process dies of SIGBUS, or
 * fails fi_enable.
 *
 * So before each shm endpoint the plugin removes the regions whose creator
 * is proven dead:
 *  - named with this process's pid, the first time in this process (a pid
 *    names one live process: before this process made a region, one with its
 *    pid is a dead predecessor's; later ones may be this process's own);
 *  - named with a pid that no process has now (or only a zombie): the
 *    process that made it is gone;
 *  - named with a pid whose process started after the region was last
 *    written (its ctime and mtime; 1 s of slack for the boot time's
 *    rounding): the pid was reused, the region's maker is gone.
 * Only regions of this user, named exactly <digits>:<digits>:<digits>, are
 * looked at; a region whose pid's process cannot be examined is left alone.
 * Pids are this pid namespace's: libfabric 1.17's names already require
 * that no other pid namespace shares this /dev/shm (two processes with one
 * pid in two namespaces collide there anyway).
 */
#ifndef PLAIT_OFI_SHM_STALE_H
#define PLAIT_OFI_SHM_STALE_H

#include <stdint.h>
#include <sys/stat.h>

#include "state.h"

/* Removes the regions above from /dev/shm, logging each. */
void ofi_shm_clear_stale(ofi_state_t *st);

/* The judgement, for one directory entry: 1 when the region named name
 * (stat in st) is a dead process's, 0 when it may be a live one's or is not
 * a region. own_pid_too: whether this process's own pid counts as dead. */
int ofi_shm_region_is_stale(const char *name, const struct stat *st, int own_pid_too);

#endif
