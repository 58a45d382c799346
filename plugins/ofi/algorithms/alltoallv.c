/*
 * alltoallv: in batches of OFI_DIRECT_BATCH peers, every rank posts a
 * receive for each non-empty block it expects from r-1, r-2, ..., then sends
 * its blocks to r+1, r+2, ..., so that not every rank sends to the same peer
 * at once; its own block is copied. Blocks larger than the provider's
 * largest message (or 1 GiB) go in several messages.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"

static size_t pieces(size_t bytes, size_t max) { return bytes ? (bytes + max - 1) / max : 0; }

plait_result_t ofi_alltoallv(ofi_state_t *st, const void *send, const size_t *send_bytes,
                             void *recv, const size_t *recv_bytes) {
  int n = st->nranks, r = st->rank;
  size_t soff = 0, roff = 0, stotal = 0, rtotal = 0, nreq = 0, max = st->max_msg;
  if (max > ((size_t)1 << 30)) max = (size_t)1 << 30;
  for (int p = 0; p < n; p++) {
    if (p < r) {
      soff += send_bytes[p];
      roff += recv_bytes[p];
    }
    stotal += send_bytes[p];
    rtotal += recv_bytes[p];
    if (p != r) nreq += pieces(send_bytes[p], max) + pieces(recv_bytes[p], max);
  }
  if (send_bytes[r]) memcpy((char *)recv + roff, (const char *)send + soff, send_bytes[r]);
  if (n == 1 || nreq == 0) return PLAIT_SUCCESS;
  ofi_req_t *q = calloc(nreq, sizeof *q);
  size_t *so = malloc(2 * (size_t)n * sizeof *so);
  if (!q || !so) {
    free(q);
    free(so);
    return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  }
  size_t *ro = so + n;
  size_t a = 0, b = 0;
  for (int p = 0; p < n; p++) {
    so[p] = a;
    ro[p] = b;
    a += send_bytes[p];
    b += recv_bytes[p];
  }
  ofi_desc_t ds = {NULL, NULL}, dr = {NULL, NULL};
  plait_result_t rc = ofi_mr_acquire(st, send, stotal, &ds);
  if (rc == PLAIT_SUCCESS) rc = ofi_mr_acquire(st, recv, rtotal, &dr);
  size_t k = 0;
  for (int base = 1; base < n && rc == PLAIT_SUCCESS; base += OFI_DIRECT_BATCH) {
    int end = base + OFI_DIRECT_BATCH < n ? base + OFI_DIRECT_BATCH : n;
    size_t first = k;
    for (int i = base; i < end && rc == PLAIT_SUCCESS; i++) {
      int from = (r - i + n) % n;
      for (size_t at = 0, id = 0; at < recv_bytes[from] && rc == PLAIT_SUCCESS; at += max, id++) {
        size_t len = recv_bytes[from] - at < max ? recv_bytes[from] - at : max;
        rc = ofi_post_recv(st, &q[k++], from, (char *)recv + ro[from] + at, len, dr.desc,
                           (uint32_t)id);
      }
    }
    for (int i = base; i < end && rc == PLAIT_SUCCESS; i++) {
      int to = (r + i) % n;
      for (size_t at = 0, id = 0; at < send_bytes[to] && rc == PLAIT_SUCCESS; at += max, id++) {
        size_t len = send_bytes[to] - at < max ? send_bytes[to] - at : max;
        rc = ofi_post_send(st, &q[k++], to, (const char *)send + so[to] + at, len, ds.desc,
                           (uint32_t)id);
      }
    }
    if (rc == PLAIT_SUCCESS) rc = ofi_wait_all(st, q + first, k - first);
  }
  ofi_mr_release(st, &ds);
  ofi_mr_release(st, &dr);
  free(q);
  free(so);
  return rc;
}
