/* User buffers moved into transparent huge pages (hugepages.h). */
#include "hugepages.h"

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

ofi_huge_result_t ofi_huge_use(ofi_state_t *st, const void *buf, size_t len) {
  if (!st->tun.huge_min || len < st->tun.huge_min || !buf || !uses_cma(st)) return OFI_HUGE_SKIP;
  uintptr_t lo = ((uintptr_t)buf + HUGE - 1) & ~(HUGE - 1);
  uintptr_t hi = ((uintptr_t)buf + len) & ~(HUGE - 1);
  if (hi <= lo) return OFI_HUGE_SKIP;
  ofi_huge_t *h = &st->huge;
  for (int i = 0; i < OFI_HUGE_RANGES; i++) {
    if (h->r[i].lo != lo || h->r[i].hi != hi) continue;
    if (h->r[i].collapsed) return OFI_HUGE_DONE;
    h->r[i].collapsed = 1;
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
  h->r[h->next].lo = lo;
  h->r[h->next].hi = hi;
  h->r[h->next].collapsed = 0;
  h->next = (h->next + 1) % OFI_HUGE_RANGES;
  return OFI_HUGE_SEEN;
}
