/*
 * How the progress loop waits when nothing completes (progress.c: idle),
 * given how crowded this host's CPUs are.
 *
 * The rxm and shm providers move data only while a rank reads its completion
 * queue, so a waiting rank polls. Between empty polls it yields the CPU
 * (sched_yield) for up to PLAIT_OFI_YIELD_US microseconds of silence, then
 * sleeps 50 us at a time. A yield keeps the rank runnable: where this host
 * runs more of the job's ranks than this rank may use CPUs (3 ranks on 2
 * cores), yielding ranks hold CPUs that the rank they wait for, or
 * a framework's compute needs. So the default, "auto", yields for 2 ms where
 * the ranks fit the CPUs and for 300 us where they do not. Measured at 3
 * ranks on 2 loaded cores (docs/performance.md, bench/results/
 * ofi-yield-3ranks.md): no yield at all (sleep at the first empty poll)
 * made a lone 4 KiB allreduce 2.0x slower (374 against 184 us, medians of
 * 7 rounds) and the 200 x 64 KiB step no faster; with 300 us it took
 * 229 us, while a wait holds a CPU for at most 300 us, not 2 ms, before it
 * sleeps.
 *
 * Pure functions but ofi_cpus (which asks the kernel); thread-safe.
 */
#ifndef PLAIT_OFI_CROWDING_H
#define PLAIT_OFI_CROWDING_H

#include <stddef.h>

#include "plait/transport.h"

/* The yield windows of "auto", in seconds: where the ranks fit the CPUs,
 * and where they outnumber them. */
#define OFI_YIELD_FIT_S 0.002
#define OFI_YIELD_CROWDED_S 0.0003

/* The CPUs this process may run on (sched_getaffinity), at least 1. */
int ofi_cpus(void);

/* Whether local_ranks ranks of the job on this host outnumber cpus. */
int ofi_crowded(int local_ranks, int cpus);

/* The yield window in seconds from PLAIT_OFI_YIELD_US's value (NULL when
 * unset: "auto"): "auto" gives OFI_YIELD_FIT_S, or OFI_YIELD_CROWDED_S when
 * crowded; an
 * integer 0..1000000 gives that many microseconds. Anything else is
 * PLAIT_ERR_CONFIG, with err naming the variable, the value and what it
 * accepts. */
plait_result_t ofi_yield_window(const char *value, int local_ranks, int cpus, double *yield_s,
                                char *err, size_t err_len);

#endif
