/*
 * What a long-lived process measures of itself after each engine cycle
 * (tests/faults/reset): open file descriptors (/proc/self/fd), threads
 * (/proc/self/task), its shared-memory entries in /dev/shm (libfabric shm's
 * regions are named "<pid>:..."; any other /dev/shm file this process has
 * mapped counts too), resident memory (/proc/self/statm, after malloc_trim:
 * free memory the allocator keeps is no leak) and the
 * heap in use (mallinfo2's uordblks + hblkhd: small blocks and mmapped ones).
 */
#ifndef PLAIT_TEST_RESET_GAUGES_H
#define PLAIT_TEST_RESET_GAUGES_H

#include <stddef.h>
#include <stdio.h>

typedef struct gauges {
  long fds;
  long threads;
  long shm;
  long rss_kib;
  long heap_kib;
} gauges_t;

/* Reads the gauges now; a gauge that cannot be read is -1. */
void gauges_read(gauges_t *g);

/* "fds 12 threads 1 shm 0 rss 10240 KiB heap 812 KiB" into buf. */
void gauges_format(const gauges_t *g, char *buf, size_t len);

/* The allowances: how far each gauge may grow from the warm-up's value to
 * the last cycle's. fds, threads and shm: 0 (a leak of one per failed job
 * is exactly what the test looks for). The heap: 128 KiB, for libfabric's
 * own few hundred bytes per endpoint (heaptrack: shm keeps 280 bytes of
 * each endpoint it enabled, fi_getinfo 40 bytes a call); one leaked rxm
 * endpoint is about 116 MiB. RSS is coarse: glibc's cache of thread stacks
 * (up to 40 MiB) and libfabric tcp's memory move it by tens of MiB between
 * cycles without a leak (over tcp it rose from 8 to 30 MiB in the first 16
 * of 200 cycles, then stayed, with steps to 48 and 62 MiB and back: free
 * memory in a non-main malloc arena (2 MiB-aligned anonymous mappings in its
 * 64 MiB heap, smaps), that
 * malloc_trim does not give back), so the caller passes the lowest RSS of
 * the last cycles and the allowance is 64 MiB: one leaked rxm endpoint per
 * failed cycle still fails within a cycle or two, smaller leaks show in the
 * heap. `extra_heap_kib` adds to the heap's allowance (the caller's reason).
 * Fills why with every gauge over its allowance; returns how many. */
int gauges_grew(const gauges_t *first, const gauges_t *last, long extra_heap_kib, char *why,
                size_t len);

/* The n (at most 16) mappings with the most resident memory, from
 * /proc/self/smaps: where RSS went, printed when it grew too much. */
void gauges_print_rss_maps(FILE *out, int n);

#endif
