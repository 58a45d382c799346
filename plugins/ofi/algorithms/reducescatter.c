/*
 * reducescatter: rank r receives the reduction of block r (counts[r]
 * elements). Below PLAIT_OFI_REDUCESCATTER_RING_MIN bytes in all: direct,
 * every rank sends block p to rank p at once and reduces the n blocks it
 * gets in rank order (one step). From there on: the reduce-scatter half of
 * the pipelined ring (ring.c), partial sums in a scratch buffer and the last
 * step reducing straight into recv.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"

static plait_result_t finish(ofi_state_t *st, plait_result_t rc, size_t count) {
  if (rc)
    return ofi_break(st, rc, "the core's reduction kernel failed on %zu elements (%s)", count,
                     plait_result_name_inline(rc));
  return PLAIT_SUCCESS;
}

static plait_result_t direct(ofi_state_t *st, const char *send, char *recv, const size_t *off,
                             const size_t *len, size_t es, plait_dtype_t dtype, plait_op_t op) {
  int n = st->nranks, r = st->rank;
  size_t mine = len[r], count = mine / es;
  /* Block r from every other rank p lands at tmp + p * mine. */
  OFI_CHECK(ofi_scratch_reserve(st, &st->tmp, mine * (size_t)n + 1));
  char *tmp = st->tmp.buf;
  ofi_req_t *q = calloc(2 * (size_t)n, sizeof *q);
  if (!q) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  size_t total = off[n - 1] + len[n - 1];
  ofi_desc_t ds, dt = {NULL, NULL};
  plait_result_t rc = ofi_mr_acquire(st, send, total, &ds);
  if (rc == PLAIT_SUCCESS) rc = ofi_mr_acquire(st, tmp, mine * (size_t)n, &dt);
  for (int base = 1; base < n && rc == PLAIT_SUCCESS; base += OFI_DIRECT_BATCH) {
    int end = base + OFI_DIRECT_BATCH < n ? base + OFI_DIRECT_BATCH : n;
    for (int i = base; i < end && rc == PLAIT_SUCCESS; i++) {
      int from = (r - i + n) % n;
      if (mine)
        rc = ofi_post_recv(st, &q[2 * i], from, tmp + (size_t)from * mine, mine, dt.desc, 0);
    }
    for (int i = base; i < end && rc == PLAIT_SUCCESS; i++) {
      int to = (r + i) % n;
      if (len[to]) rc = ofi_post_send(st, &q[2 * i + 1], to, send + off[to], len[to], ds.desc, 0);
    }
    if (rc == PLAIT_SUCCESS) rc = ofi_wait_all(st, q + 2 * base, 2 * (size_t)(end - base));
  }
  ofi_mr_release(st, &ds);
  ofi_mr_release(st, &dt);
  free(q);
  if (rc || mine == 0) return rc;
  /* Rank order: ((x0 op x1) op x2) ..., the same on every run. */
  memcpy(tmp + (size_t)r * mine, send + off[r], mine);
  memcpy(recv, tmp, mine);
  for (int p = 1; p < n && rc == PLAIT_SUCCESS; p++)
    rc = finish(st, st->reduce(dtype, op, recv, recv, tmp + (size_t)p * mine, count), count);
  if (rc == PLAIT_SUCCESS && op == PLAIT_OP_AVERAGE)
    rc = finish(st, st->divide(dtype, recv, recv, count, (uint32_t)n), count);
  return rc;
}

plait_result_t ofi_reducescatter(ofi_state_t *st, const void *send, void *recv,
                                 const size_t *counts, plait_dtype_t dtype, plait_op_t op) {
  int n = st->nranks;
  size_t es = plait_dtype_size_inline(dtype), total = 0, largest = 0;
  size_t *off = malloc(2 * (size_t)n * sizeof *off);
  if (!off) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  size_t *len = off + n;
  for (int p = 0; p < n; p++) {
    off[p] = total;
    len[p] = counts[p] * es;
    total += len[p];
    if (len[p] > largest) largest = len[p];
  }
  plait_result_t rc = PLAIT_SUCCESS;
  if (n == 1) {
    if (len[0]) memcpy(recv, send, len[0]);
  } else if (total == 0) {
    /* nothing to move */
  } else if (ofi_reducescatter_small(st, total, largest)) {
    rc = direct(st, send, recv, off, len, es, dtype, op);
  } else {
    rc = ofi_scratch_reserve(st, &st->work, total);
    ofi_ring_t g = {off, len, es, dtype, op, 1, 0, send, st->work.buf, recv,
                    op == PLAIT_OP_AVERAGE, 1.0, NULL, NULL, 0};
    if (rc == PLAIT_SUCCESS) rc = ofi_ring_run(st, &g);
  }
  free(off);
  return rc;
}
