/*
 * How the progress loop waits when nothing completes (progress.c: idle),
 * given how crowded this host's CPUs are.
 *
 * The rxm and shm providers move data only while a rank reads its completion
 * queue, so a waiting rank polls. Between empty polls it yields the CPU
 * (sched_yield) for up to PLAIT_OFI_YIELD_US microseconds of silence, then
 * sleeps 50 us at a time. A yield keeps the rank runnable: where this host
 * runs more of the job's ranks than this rank may use CPUs (3 ranks on 2
 * cores), the yielding ranks hold the CPUs the rank they wait for needs, and
 * the 200 x 64 KiB step lost to Gloo, which blocks in the kernel. So the
 * default, "auto", yields for 2 ms where the ranks fit the CPUs and not at
 * all (sleep at the first empty poll) where they do not.
 *
 * Pure functions but ofi_cpus (which asks the kernel); thread-safe.
 */
#ifndef PLAIT_OFI_CROWDING_H
#define PLAIT_OFI_CROWDING_H

#include <stddef.h>

#include "plait/transport.h"

/* The yield window of "auto" where the ranks fit the CPUs, in seconds. */
#define OFI_YIELD_FIT_S 0.002

/* The CPUs this process may run on (sched_getaffinity), at least 1. */
int ofi_cpus(void);

/* Whether local_ranks ranks of the job on this host outnumber cpus. */
int ofi_crowded(int local_ranks, int cpus);

/* The yield window in seconds from PLAIT_OFI_YIELD_US's value (NULL when
 * unset: "auto"): "auto" gives OFI_YIELD_FIT_S, or 0 when crowded; an
 * integer 0..1000000 gives that many microseconds. Anything else is
 * PLAIT_ERR_CONFIG, with err naming the variable, the value and what it
 * accepts. */
plait_result_t ofi_yield_window(const char *value, int local_ranks, int cpus, double *yield_s,
                                char *err, size_t err_len);

#endif
