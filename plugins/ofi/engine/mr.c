#include "engine/mr.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "errors.h"

#define ALIGNMENT 64
#define HUGE_PAGE ((size_t)2 << 20)

/*
 * Host memory for the plugin's buffers: 64-byte aligned; from 1 MiB on,
 * aligned to and a multiple of 2 MiB and marked for transparent huge pages
 * (MADV_HUGEPAGE; Linux's default THP mode is "madvise"). With huge pages
 * shm's CMA copies (process_vm_readv) pin 512x fewer pages and the
 * reductions miss the TLB less. 1 MiB, not 2: the core's fusion buffer
 * over ofi holds one 1 MiB piece (plait_transport_fusion_piece), and in
 * 4 KiB pages the pinning took about 8% of a 200 x 64 KiB step's CPU time.
 */
static void *alloc_host(size_t len) {
  void *p = NULL;
  if (len >= HUGE_PAGE / 2) {
    size_t rounded = (len + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (rounded < len || posix_memalign(&p, HUGE_PAGE, rounded) != 0) return NULL;
    (void)madvise(p, rounded, MADV_HUGEPAGE);
    return p;
  }
  return posix_memalign(&p, ALIGNMENT, len) == 0 ? p : NULL;
}

static plait_result_t reg(ofi_state_t *st, const void *buf, size_t len, struct fid_mr **out) {
  *out = NULL;
  if (!st->need_mr || !st->domain || len == 0) return PLAIT_SUCCESS;
  uint64_t key = st->mr_prov_key ? 0 : st->next_key++;
  struct fid_mr *mr = NULL;
  int rc = fi_mr_reg(st->domain, buf, len, FI_SEND | FI_RECV, 0, key, 0, &mr, NULL);
  if (rc == 0 && st->mr_endpoint) {
    rc = fi_mr_bind(mr, &st->ep->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
    if (rc != 0) {
      fi_close(&mr->fid);
      mr = NULL;
    }
  }
  if (rc != 0)
    return ofi_fail(st, rc == -FI_ENOMEM ? PLAIT_ERR_NO_MEMORY : PLAIT_ERR_TRANSPORT,
                    "fi_mr_reg of %zu bytes at %p failed: %s (%s)", len, buf,
                    fi_strerror(-rc), st->provider);
  *out = mr;
  return PLAIT_SUCCESS;
}

static ofi_mr_t *find(ofi_state_t *st, const void *buf, size_t len) {
  const char *p = buf;
  for (ofi_mr_t *m = st->mrs; m; m = m->next)
    if (p >= m->base && len <= m->len && (size_t)(p - m->base) <= m->len - len) return m;
  return NULL;
}

plait_result_t ofi_mr_acquire(ofi_state_t *st, const void *buf, size_t len, ofi_desc_t *d) {
  d->desc = NULL;
  d->tmp = NULL;
  if (!st->need_mr || len == 0) return PLAIT_SUCCESS;
  ofi_mr_t *m = find(st, buf, len);
  if (m && m->mr) {
    d->desc = fi_mr_desc(m->mr);
    return PLAIT_SUCCESS;
  }
  OFI_CHECK(reg(st, buf, len, &d->tmp));
  if (d->tmp) d->desc = fi_mr_desc(d->tmp);
  return PLAIT_SUCCESS;
}

void ofi_mr_release(ofi_state_t *st, ofi_desc_t *d) {
  (void)st;
  if (d->tmp) fi_close(&d->tmp->fid);
  d->tmp = NULL;
  d->desc = NULL;
}

static plait_result_t track(ofi_state_t *st, char *base, size_t len) {
  ofi_mr_t *m = calloc(1, sizeof *m);
  if (!m) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  m->base = base;
  m->len = len;
  plait_result_t rc = reg(st, base, len, &m->mr);
  if (rc) {
    free(m);
    return rc;
  }
  m->next = st->mrs;
  st->mrs = m;
  return PLAIT_SUCCESS;
}

static void untrack(ofi_state_t *st, const void *base) {
  for (ofi_mr_t **pm = &st->mrs; *pm; pm = &(*pm)->next)
    if ((*pm)->base == base) {
      ofi_mr_t *m = *pm;
      *pm = m->next;
      if (m->mr) fi_close(&m->mr->fid);
      free(m);
      return;
    }
}

plait_result_t ofi_scratch_reserve(ofi_state_t *st, ofi_scratch_t *s, size_t len) {
  if (len <= s->len) return PLAIT_SUCCESS;
  size_t want = len < 2 * s->len ? 2 * s->len : len;
  void *p = alloc_host(want);
  if (!p)
    return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "cannot allocate %zu bytes of scratch memory",
                    want);
  plait_result_t rc = track(st, p, want);
  if (rc) {
    free(p);
    return rc;
  }
  if (s->buf) {
    untrack(st, s->buf);
    free(s->buf);
  }
  s->buf = p;
  s->len = want;
  return PLAIT_SUCCESS;
}

void ofi_mr_close_all(ofi_state_t *st) {
  for (ofi_mr_t *m = st->mrs; m; m = m->next)
    if (m->mr) {
      fi_close(&m->mr->fid);
      m->mr = NULL;
    }
}

void ofi_mr_free_all(ofi_state_t *st) {
  ofi_scratch_t *scratch[] = {&st->slots, &st->work, &st->tmp, &st->vred_buf};
  for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++) {
    if (scratch[i]->buf) untrack(st, scratch[i]->buf);
    free(scratch[i]->buf);
    scratch[i]->buf = NULL;
    scratch[i]->len = 0;
  }
  while (st->mrs) untrack(st, st->mrs->base); /* fusion buffers the core kept */
}

plait_result_t ofi_mem_alloc(ofi_state_t *st, size_t bytes, void **ptr) {
  OFI_REQUIRE(st, ptr != NULL, "ptr is NULL");
  /* A request for 0 bytes still returns a distinct pointer to free later. */
  size_t len = bytes > 0 ? bytes : ALIGNMENT;
  void *p = alloc_host(len);
  if (!p) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "cannot allocate %zu bytes", bytes);
  plait_result_t rc = track(st, p, len);
  if (rc) {
    free(p);
    return rc;
  }
  *ptr = p;
  return PLAIT_SUCCESS;
}

plait_result_t ofi_mem_free(ofi_state_t *st, void *ptr) {
  if (!ptr) return PLAIT_SUCCESS;
  untrack(st, ptr);
  free(ptr);
  return PLAIT_SUCCESS;
}

plait_result_t ofi_mem_copy(ofi_state_t *st, void *dst, const void *src, size_t bytes,
                            plait_copy_kind_t kind) {
  if (kind != PLAIT_COPY_HOST_TO_HOST)
    return ofi_fail(st, PLAIT_ERR_UNSUPPORTED,
                    "copy kind %d needs device memory; the ofi transport has host memory "
                    "only (PLAIT_COPY_HOST_TO_HOST)",
                    (int)kind);
  OFI_REQUIRE(st, bytes == 0 || (dst != NULL && src != NULL), "%s is NULL but bytes is %zu",
              dst == NULL ? "dst" : "src", bytes);
  if (bytes > 0 && dst != src) memmove(dst, src, bytes);
  return PLAIT_SUCCESS;
}
