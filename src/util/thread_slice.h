/* Internal: ask the scheduler for short turns on the CPU for this thread.
 *
 * Linux 6.12 and later schedule normal threads with EEVDF, where a thread may
 * ask for a custom slice (sched_attr.sched_runtime of a SCHED_OTHER thread,
 * clamped by the kernel to 0.1-100 ms; the default is a few ms). A thread
 * with a shorter slice than the running one preempts it when it wakes, so a
 * thread that sleeps most of the time and must react at once (the
 * coordinator) does not wait out a CPU-bound task's slice; its share of the
 * CPU is unchanged. Older kernels ignore the field. */
#ifndef PLAIT_UTIL_THREAD_SLICE_H
#define PLAIT_UTIL_THREAD_SLICE_H

#include <stdint.h>

/* Sets the calling thread's slice to ns nanoseconds, keeping its policy,
 * nice value and reset-on-fork flag. Only a SCHED_OTHER thread is changed.
 * Returns 0 when set, 1 when left alone (another policy, or no
 * sched_setattr here), -1 when the kernel refused (errno says why). Never
 * blocks; any thread. */
int plait_thread_short_slice(uint64_t ns);

#endif
