/* User buffers moved into transparent huge pages (hugepages.h). */
#include "engine/hugepages.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "errors.h"
#include "state.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older headers lack it */
#endif

#define HUGE ((uintptr_t)2 << 20)

static int uses_cma(const ofi_state_t *st) {
  return strncmp(st->provider, "shm", 3) == 0;
}

/* The range [lo, hi) of 2 MiB-aligned memory, the second time it comes. */
static ofi_huge_result_t use_range(ofi_state_t *st, uintptr_t lo, uintptr_t hi) {
  ofi_huge_t *h = &st->huge;
  size_t set = (size_t)(lo / HUGE) % OFI_HUGE_SETS;
  int oldest = 0;
  h->clock++;
  for (int w = 0; w < OFI_HUGE_WAYS; w++) {
    if (h->r[set][w].used < h->r[set][oldest].used) oldest = w;
    if (h->r[set][w].lo != lo || h->r[set][w].hi != hi) continue;
    h->r[set][w].used = h->clock;
    if (h->r[set][w].collapsed) return OFI_HUGE_DONE;
    h->r[set][w].collapsed = 1;
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    if (madvise((void *)lo, hi - lo, MADV_COLLAPSE) == 0) {
      h->collapsed++;
      return OFI_HUGE_COLLAPSED;
    }
    int err = errno;
    h->refused++;
    if (!h->said) {
      h->said = 1;
      OFI_DEBUG(st, "%zu bytes at %p stay in small pages: madvise(MADV_COLLAPSE) failed: %s "
                "(PLAIT_OFI_HUGE_PAGES_MIN; said once)", (size_t)(hi - lo), (void *)lo,
                strerror(err));
    }
    return OFI_HUGE_REFUSED;
  }
  h->r[set][oldest].lo = lo;
  h->r[set][oldest].hi = hi;
  h->r[set][oldest].collapsed = 0;
  h->r[set][oldest].used = h->clock;
  return OFI_HUGE_SEEN;
}

ofi_huge_result_t ofi_huge_use(ofi_state_t *st, const void *buf, size_t len) {
  if (!st->tun.huge_min || len < st->tun.huge_min || !buf || !uses_cma(st)) return OFI_HUGE_SKIP;
  uintptr_t lo = ((uintptr_t)buf + HUGE - 1) & ~(HUGE - 1);
  uintptr_t hi = ((uintptr_t)buf + len) & ~(HUGE - 1);
  if (hi <= lo) return OFI_HUGE_SKIP;
  return use_range(st, lo, hi);
}

/* Bytes of [a, a + len) inside the window starting at w. */
static size_t inside(uintptr_t a, size_t len, uintptr_t w) {
  uintptr_t lo = a > w ? a : w, hi = a + len < w + HUGE ? a + len : w + HUGE;
  return hi > lo ? (size_t)(hi - lo) : 0;
}

/* Adds the bytes of [a, a + len) to the windows they fall in (win[0..*nw),
 * at most OFI_HUGE_WINDOWS; windows beyond that are not counted). */
static void cover(uintptr_t a, size_t len, uintptr_t *win, size_t *got, int *nw) {
  for (uintptr_t w = a & ~(HUGE - 1); w < a + len; w += HUGE) {
    int k = 0;
    while (k < *nw && win[k] != w) k++;
    if (k == *nw) {
      if (*nw == OFI_HUGE_WINDOWS) continue;
      win[k] = w, got[k] = 0, (*nw)++;
    }
    got[k] += inside(a, len, w);
  }
}

int ofi_huge_use_spans(ofi_state_t *st, const plait_span_t *spans, size_t n, size_t es) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += spans[i].count * es * (spans[i].dst != spans[i].src ? 2 : 1);
  /* each large one by itself */
  for (size_t i = 0; i < n; i++) {
    ofi_huge_use(st, spans[i].src, spans[i].count * es);
    if (spans[i].dst != spans[i].src) ofi_huge_use(st, spans[i].dst, spans[i].count * es);
  }
  if (!st->tun.huge_min || total < st->tun.huge_min || !uses_cma(st)) return 0;
  /* the smaller ones: the windows they cover at least half of */
  uintptr_t win[OFI_HUGE_WINDOWS];
  size_t got[OFI_HUGE_WINDOWS];
  int nw = 0, dense = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = spans[i].count * es;
    if (len >= st->tun.huge_min || !len) continue;
    cover((uintptr_t)spans[i].src, len, win, got, &nw);
    if (spans[i].dst != spans[i].src) cover((uintptr_t)spans[i].dst, len, win, got, &nw);
  }
  for (int k = 0; k < nw; k++)
    if (got[k] >= HUGE / 2) {
      use_range(st, win[k], win[k] + HUGE);
      dense++;
    }
  return dense;
}
