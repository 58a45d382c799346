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
 * is exactly what the test looks for); memory: a small fixed slack for the
 * allocator's fragmentation, far less than one leaked endpoint per cycle
 * over 50 cycles. Fills why with every gauge over its allowance; returns how
 * many. */
int gauges_grew(const gauges_t *first, const gauges_t *last, char *why, size_t len);

#endif
