/*
 * broadcast, in place. Below PLAIT_OFI_BROADCAST_CHAIN_MIN bytes: a binomial
 * tree (ceil(log2 n) steps, the least latency). From there on: a pipelined
 * chain root -> root+1 -> ... in chunks of PLAIT_OFI_CHUNK bytes, each rank
 * passing chunk k on as soon as it has it, so every link carries the data
 * once and all links are busy at the same time.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"

static plait_result_t binomial(ofi_state_t *st, char *buf, size_t bytes, int root, void *desc) {
  int n = st->nranks, vr = (st->rank - root + n) % n, mask = 1;
  ofi_req_t q[33];
  memset(q, 0, sizeof q);
  while (mask < n) {
    if (vr & mask) {
      int from = (vr - mask + root) % n;
      OFI_CHECK(ofi_post_recv(st, &q[0], from, buf, bytes, desc, 0));
      OFI_CHECK(ofi_wait_all(st, q, 1));
      break;
    }
    mask <<= 1;
  }
  int k = 1;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n)
      OFI_CHECK(ofi_post_send(st, &q[k++], (vr + mask + root) % n, buf, bytes, desc, 0));
  return ofi_wait_all(st, q, (size_t)k);
}

/* Requests by index, with a stack of free ones: completions come in any
 * order. */
typedef struct pool {
  ofi_req_t *q;
  int *free, nfree;
} pool_t;

static int pool_init(pool_t *p, size_t w) {
  p->q = calloc(w, sizeof *p->q);
  p->free = malloc(w * sizeof *p->free);
  p->nfree = 0;
  if (!p->q || !p->free) return -1;
  for (size_t i = 0; i < w; i++) p->free[p->nfree++] = (int)i;
  return 0;
}

static void pool_free(pool_t *p) {
  free(p->q);
  free(p->free);
}

static plait_result_t chain(ofi_state_t *st, char *buf, size_t bytes, int root, void *desc) {
  int n = st->nranks, vr = (st->rank - root + n) % n;
  int prev = (st->rank - 1 + n) % n, next = (st->rank + 1) % n;
  int has_prev = vr > 0, has_next = vr < n - 1;
  size_t chunk = (size_t)st->tun.chunk;
  if (chunk > st->max_msg) chunk = st->max_msg;
  while ((bytes + chunk - 1) / chunk > OFI_TAG_ID_MAX) chunk *= 2;
  size_t nch = (bytes + chunk - 1) / chunk, w = (size_t)st->tun.window;
  pool_t rp = {NULL, NULL, 0}, sp = {NULL, NULL, 0};
  int *rdone = calloc(nch, sizeof *rdone);
  int ok = rdone && pool_init(&rp, w) == 0 && pool_init(&sp, w) == 0;
  plait_result_t rc = ok ? PLAIT_SUCCESS : ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  /* received / sent: chunks done; rposted / sposted: chunks posted. */
  size_t received = has_prev ? 0 : nch, rposted = received, sent = has_next ? 0 : nch,
         sposted = sent;
  while (rc == PLAIT_SUCCESS && (received < nch || sent < nch)) {
    while (rc == PLAIT_SUCCESS && rposted < nch && rp.nfree > 0) {
      size_t len = rposted + 1 == nch ? bytes - rposted * chunk : chunk;
      ofi_req_t *q = &rp.q[rp.free[--rp.nfree]];
      q->chunk = (int)rposted;
      rc = ofi_post_recv(st, q, prev, buf + rposted * chunk, len, desc, (uint32_t)rposted);
      rposted++;
    }
    while (rc == PLAIT_SUCCESS && sposted < nch && sp.nfree > 0 &&
           (!has_prev || rdone[sposted])) {
      size_t len = sposted + 1 == nch ? bytes - sposted * chunk : chunk;
      ofi_req_t *q = &sp.q[sp.free[--sp.nfree]];
      q->chunk = (int)sposted;
      rc = ofi_post_send(st, q, next, buf + sposted * chunk, len, desc, (uint32_t)sposted);
      sposted++;
    }
    if (rc) break;
    ofi_req_t *q;
    rc = ofi_wait_any(st, &q);
    if (rc) break;
    if (q->is_send) {
      sent++;
      sp.free[sp.nfree++] = (int)(q - sp.q);
    } else {
      rdone[q->chunk] = 1;
      received++;
      rp.free[rp.nfree++] = (int)(q - rp.q);
    }
  }
  free(rdone);
  pool_free(&rp);
  pool_free(&sp);
  return rc;
}

plait_result_t ofi_broadcast(ofi_state_t *st, void *buf, size_t bytes, int root) {
  if (st->nranks == 1 || bytes == 0) return PLAIT_SUCCESS;
  ofi_desc_t d;
  OFI_CHECK(ofi_mr_acquire(st, buf, bytes, &d));
  plait_result_t rc;
  if (ofi_broadcast_small(st, bytes))
    rc = binomial(st, buf, bytes, root, d.desc);
  else
    rc = chain(st, buf, bytes, root, d.desc);
  ofi_mr_release(st, &d);
  return rc;
}
