/* Internal: PLAIT_THREAD_AFFINITY, the CPU a rank's coordinator thread runs on.
 *
 * The value is Horovod's HOROVOD_THREAD_AFFINITY: comma-separated CPU ids,
 * one per local rank; the rank with local rank i pins its coordinator
 * thread to the i-th. Ids past the local size are ignored (one list may
 * serve hosts with fewer ranks). Where Horovod logs a bad list and runs
 * unpinned, plait refuses it at init, naming what is wrong. */
#ifndef PLAIT_UTIL_AFFINITY_H
#define PLAIT_UTIL_AFFINITY_H

#include <pthread.h>
#include <sched.h> /* cpu_set_t: needs _GNU_SOURCE, defined for the library's sources */

#include "plait/plait.h"

/* The CPU list gives local_rank of local_size: *cpu, or -1 when list is
 * NULL or blank (not pinned). PLAIT_ERR_CONFIG naming PLAIT_THREAD_AFFINITY
 * and the value: an entry that is not an integer >= 0 (surrounding blanks
 * allowed), fewer entries than local_size, or a CPU outside allowed (the
 * CPUs this process may run on; NULL: any below CPU_SETSIZE). */
plait_result_t plait_affinity_cpu(const char *list, int local_rank, int local_size,
                                  const cpu_set_t *allowed, int *cpu);

/* Starts fn(arg) on a new thread named name (at most 15 characters: what
 * top -H and gdb show), on CPU cpu when cpu >= 0 (plait_affinity_cpu's).
 * PLAIT_ERR_SYSTEM naming the thread, the CPU and why when it cannot. */
plait_result_t plait_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name,
                                  int cpu);

#endif
