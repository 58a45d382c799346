/*
 * User buffers moved into transparent huge pages (PLAIT_OFI_HUGE_PAGES_MIN).
 *
 * The shm provider moves large messages with CMA (process_vm_readv): the
 * kernel pins and walks the other process's pages one by one. In ordinary
 * 4 KiB pages a 64 MiB tensor is 16384 of them, and the plugin then runs at
 * 0.45x its speed on its own 2 MiB-page buffers (3 ranks, measured:
 * docs/transport-ofi.md, "Huge pages"). So a user buffer of at least
 * huge_min bytes that a collective over shm reads or writes is, the second
 * time the same range comes (a buffer reused from step to step, as
 * gradients are; a one-off buffer is left alone), marked MADV_HUGEPAGE and
 * collapsed into huge pages (MADV_COLLAPSE, Linux 6.1: one copy of the
 * range, once). Only the 2 MiB-aligned interior is touched; the contents
 * never change. A range is collapsed at most once; a refusal (memory that
 * is not anonymous, an older kernel, THP off) is logged once at debug level
 * and costs nothing after. The table of ranges seen holds 1024 (256 sets of
 * 4 by address, the least recently used of a set replaced): a step of a
 * large model must fit in it whole, or each range is forgotten before it
 * comes again and none is ever collapsed. BERT-base fused up to 64 MiB is
 * 24 ranges and about 55 windows a step; the 64-range ring this replaced
 * (2026-12-03) kept it in 4 KiB pages, 119-120 ms a step at 2 ranks in a
 * fresh launch against 92-93 ms in huge pages.
 *
 * A fused allreduce (allreduce_spans) of at least huge_min bytes in all
 * whose tensors are smaller (a step's 64 KiB gradients, side by side in
 * the allocator's heap) is treated by 2 MiB window: a window its smaller
 * tensors cover at least half of is a range as above. The pinning of their
 * 4 KiB pages took 17% of the coordinator's time at 2 ranks, 200 x 64 KiB
 * a step. The rest of such a window is the process's other memory in the
 * same mapping: it stays as it was, in a huge page (at most 1 MiB more of
 * resident memory per window, where the rest was not resident).
 *
 * Coordinator thread only (the plugin's calls), like the rest of the state.
 */
#ifndef PLAIT_OFI_HUGEPAGES_H
#define PLAIT_OFI_HUGEPAGES_H

#include <stddef.h>
#include <stdint.h>

#include "plait/transport.h"

#define OFI_HUGE_SETS 256 /* ranges remembered: OFI_HUGE_SETS x OFI_HUGE_WAYS */
#define OFI_HUGE_WAYS 4
#define OFI_HUGE_WINDOWS 64 /* windows of one fused allreduce counted (ofi_huge_use_spans) */

typedef struct ofi_huge {
  struct {
    uintptr_t lo, hi; /* 2 MiB-aligned interior; hi == 0: empty slot */
    int collapsed;    /* 0 seen once, 1 done (or refused) */
    uint64_t used;    /* when last looked up (clock): the set's oldest goes first */
  } r[OFI_HUGE_SETS][OFI_HUGE_WAYS]; /* set: (lo / 2 MiB) % OFI_HUGE_SETS */
  uint64_t clock;
  uint64_t collapsed;   /* ranges collapsed, for tests and the log */
  uint64_t refused;     /* ranges the kernel refused */
  int said;             /* the refusal was logged */
} ofi_huge_t;

struct ofi_state;

/* What ofi_huge_use did. */
typedef enum {
  OFI_HUGE_SKIP = 0,    /* too small, not shm, or off */
  OFI_HUGE_SEEN = 1,    /* first time: recorded */
  OFI_HUGE_DONE = 2,    /* collapsed before: nothing to do */
  OFI_HUGE_COLLAPSED = 3,
  OFI_HUGE_REFUSED = 4  /* the kernel said no (logged once) */
} ofi_huge_result_t;

/* A collective is about to read or write buf[0..len). */
ofi_huge_result_t ofi_huge_use(struct ofi_state *st, const void *buf, size_t len);

/* A fused allreduce is about to read and write spans[0..n) (elements of es
 * bytes): each large one as ofi_huge_use, and the windows the smaller ones
 * cover at least half of (see above). Returns how many such windows. */
int ofi_huge_use_spans(struct ofi_state *st, const plait_span_t *spans, size_t n, size_t es);

#endif
