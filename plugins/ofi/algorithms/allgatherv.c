/*
 * allgatherv, in place. Below PLAIT_OFI_ALLGATHERV_RING_MIN bytes in all:
 * direct, every rank sends its part to every other at once (one step, the
 * least latency). From there on: the allgather half of the pipelined ring
 * (ring.c), which sends each byte over each link once.
 */
#include <stdlib.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"

static plait_result_t direct(ofi_state_t *st, char *buf, const size_t *off, const size_t *bytes,
                             size_t total) {
  int n = st->nranks, r = st->rank;
  ofi_req_t *q = calloc(2 * (size_t)n, sizeof *q);
  if (!q) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  ofi_desc_t d;
  plait_result_t rc = ofi_mr_acquire(st, buf, total, &d);
  for (int base = 1; base < n && rc == PLAIT_SUCCESS; base += OFI_DIRECT_BATCH) {
    int end = base + OFI_DIRECT_BATCH < n ? base + OFI_DIRECT_BATCH : n;
    for (int i = base; i < end && rc == PLAIT_SUCCESS; i++) {
      int from = (r - i + n) % n;
      if (bytes[from] > 0)
        rc = ofi_post_recv(st, &q[2 * i], from, buf + off[from], bytes[from], d.desc, 0);
    }
    for (int i = base; i < end && rc == PLAIT_SUCCESS; i++)
      if (bytes[r] > 0)
        rc = ofi_post_send(st, &q[2 * i + 1], (r + i) % n, buf + off[r], bytes[r], d.desc, 0);
    if (rc == PLAIT_SUCCESS) rc = ofi_wait_all(st, q + 2 * base, 2 * (size_t)(end - base));
  }
  ofi_mr_release(st, &d);
  free(q);
  return rc;
}

plait_result_t ofi_allgatherv(ofi_state_t *st, void *buf, const size_t *bytes) {
  int n = st->nranks;
  if (n == 1) return PLAIT_SUCCESS;
  size_t *off = malloc((size_t)n * sizeof *off);
  if (!off) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  size_t total = 0, largest = 0;
  for (int r = 0; r < n; r++) {
    off[r] = total;
    total += bytes[r];
    if (bytes[r] > largest) largest = bytes[r];
  }
  plait_result_t rc = PLAIT_SUCCESS;
  if (total == 0) {
    /* nothing to move */
  } else if (ofi_allgatherv_small(st, total, largest)) {
    rc = direct(st, buf, off, bytes, total);
  } else {
    ofi_ring_t g = {off, bytes, 1, PLAIT_UINT8, PLAIT_OP_SUM, 0, 1, buf, buf, NULL, 0, 1.0,
                    NULL, NULL, 0};
    rc = ofi_ring_run(st, &g);
  }
  free(off);
  return rc;
}
