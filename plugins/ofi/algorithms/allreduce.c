/*
 * allreduce: recursive doubling (allreduce_rd.c) below
 * PLAIT_OFI_ALLREDUCE_RING_MIN bytes, where latency rules; the pipelined ring
 * (ring.c) from there on, where bandwidth does. Every rank has the same
 * count and the same settings (rank 0's, see setup.c), so all choose alike.
 *
 * allreduce_scaled folds the core's copy-in and postscale into these passes:
 * the ring's first reads come from send, and each rank's own block is
 * scaled as its last reduction writes it (chunk by chunk, in cache); the
 * allgather half then moves scaled blocks.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"

static plait_result_t ring_allreduce(ofi_state_t *st, const void *send, void *recv, size_t count,
                                     plait_dtype_t dtype, plait_op_t op, double post) {
  size_t n = (size_t)st->nranks, es = plait_dtype_size_inline(dtype);
  size_t *off = malloc(2 * n * sizeof *off);
  if (!off) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  size_t *len = off + n;
  ofi_even_blocks(st->nranks, count, es, off, len);
  ofi_ring_t g = {off, len, es, dtype, op, 1, 1, send, recv, NULL, op == PLAIT_OP_AVERAGE,
                  post, NULL, NULL, 0};
  plait_result_t rc = ofi_ring_run(st, &g);
  free(off);
  return rc;
}

static plait_result_t direct_one(ofi_state_t *st, const void *send, void *recv, size_t count,
                                 plait_dtype_t dtype, plait_op_t op, double post);

plait_result_t ofi_allreduce_scaled(ofi_state_t *st, const void *send, void *recv, size_t count,
                                    plait_dtype_t dtype, plait_op_t op, double post) {
  if (count == 0) return PLAIT_SUCCESS;
  size_t bytes = count * plait_dtype_size_inline(dtype);
  if (st->nranks == 1) { /* every op over one rank (AVERAGE too): the input, scaled */
    if (post != 1.0) {
      plait_result_t rc = st->scale(dtype, recv, send, count, post);
      return rc ? ofi_fail(st, rc, "the core's scale kernel failed on %zu elements (%s)", count,
                           plait_result_name_inline(rc))
                : PLAIT_SUCCESS;
    }
    if (send != recv) memcpy(recv, send, bytes);
    return PLAIT_SUCCESS;
  }
  if (ofi_allreduce_small(st, bytes)) {
    if (send != recv) memcpy(recv, send, bytes);
    return ofi_allreduce_rd(st, recv, count, dtype, op, post);
  }
  if (ofi_direct_on(st)) return direct_one(st, send, recv, count, dtype, op, post);
  return ring_allreduce(st, send, recv, count, dtype, op, post);
}

plait_result_t ofi_allreduce(ofi_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                             plait_op_t op) {
  if (st->nranks == 1) return PLAIT_SUCCESS;
  return ofi_allreduce_scaled(st, buf, buf, count, dtype, op, 1.0);
}

/* Spans [lo, hi) (bytes long in all) packed into st->work, reduced there and
 * unpacked: what the core's fusion buffer would do. */
static plait_result_t spans_packed(ofi_state_t *st, const plait_span_t *s, size_t lo, size_t hi,
                                   size_t bytes, plait_dtype_t dtype, plait_op_t op, double post) {
  size_t es = plait_dtype_size_inline(dtype), at = 0;
  OFI_CHECK(ofi_scratch_reserve(st, &st->work, bytes));
  for (size_t i = lo; i < hi; at += s[i].count * es, i++)
    memcpy(st->work.buf + at, s[i].src, s[i].count * es);
  OFI_CHECK(ofi_allreduce_scaled(st, st->work.buf, st->work.buf, bytes / es, dtype, op, post));
  at = 0;
  for (size_t i = lo; i < hi; at += s[i].count * es, i++)
    memcpy(s[i].dst, st->work.buf + at, s[i].count * es);
  return PLAIT_SUCCESS;
}

/* Spans too small (or a provider that needs registered memory): through
 * st->work a piece of at most OFI_SPANS_PIECE bytes at a time, so that the
 * buffer, the spans and the peer's reads stay in cache together; a span
 * alone in its piece (one that size or more) is reduced where it is. */
#define OFI_SPANS_PIECE ((size_t)1 << 20)
static plait_result_t spans_by_pieces(ofi_state_t *st, const plait_span_t *s, size_t n,
                                      plait_dtype_t dtype, plait_op_t op, double post) {
  size_t es = plait_dtype_size_inline(dtype);
  for (size_t lo = 0; lo < n;) {
    size_t hi = lo, bytes = 0;
    while (hi < n && (hi == lo || bytes + s[hi].count * es <= OFI_SPANS_PIECE))
      bytes += s[hi++].count * es;
    if (hi == lo + 1)
      OFI_CHECK(ofi_allreduce_scaled(st, s[lo].src, s[lo].dst, s[lo].count, dtype, op, post));
    else
      OFI_CHECK(spans_packed(st, s, lo, hi, bytes, dtype, op, post));
    lo = hi;
  }
  return PLAIT_SUCCESS;
}

/* g over n spans (blocks over their bytes in order), its offsets in *mem
 * (free it); *bytes: their bytes in all. */
static plait_result_t spans_view(ofi_state_t *st, const plait_span_t *spans, size_t n,
                                 plait_dtype_t dtype, plait_op_t op, double post, ofi_ring_t *g,
                                 size_t **mem, size_t *bytes) {
  size_t es = plait_dtype_size_inline(dtype), *at = malloc((n + 1 + 2 * (size_t)st->nranks) *
                                                            sizeof *at);
  *mem = at;
  if (!at) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory for %zu spans", n);
  *bytes = 0;
  for (size_t i = 0; i < n; i++) {
    at[i] = *bytes;
    *bytes += spans[i].count * es;
  }
  at[n] = *bytes;
  size_t *off = at + n + 1, *len = off + st->nranks;
  ofi_even_blocks(st->nranks, *bytes / es, es, off, len);
  *g = (ofi_ring_t){off, len, es, dtype, op, 1, 1, NULL, NULL, NULL, op == PLAIT_OP_AVERAGE, post,
                    spans, at, n};
  return PLAIT_SUCCESS;
}

/* One buffer by direct reads (ofi_direct_on; a ring's size). */
static plait_result_t direct_one(ofi_state_t *st, const void *send, void *recv, size_t count,
                                 plait_dtype_t dtype, plait_op_t op, double post) {
  plait_span_t s = {recv, send, count};
  ofi_ring_t g;
  size_t *mem = NULL, bytes = 0;
  plait_result_t rc = spans_view(st, &s, 1, dtype, op, post, &g, &mem, &bytes);
  if (rc == PLAIT_SUCCESS) rc = ofi_direct_allreduce(st, &g);
  free(mem);
  return rc;
}

plait_result_t ofi_allreduce_spans(ofi_state_t *st, const plait_span_t *spans, size_t n,
                                   plait_dtype_t dtype, plait_op_t op, double post) {
  if (n == 1) /* one buffer: the choice of allreduce_scaled */
    return ofi_allreduce_scaled(st, spans[0].src, spans[0].dst, spans[0].count, dtype, op, post);
  ofi_ring_t g;
  size_t *mem = NULL, bytes = 0;
  OFI_CHECK(spans_view(st, spans, n, dtype, op, post, &g, &mem, &bytes));
  int big = st->nranks > 1 && bytes && !ofi_allreduce_small(st, bytes);
  int direct = big && ofi_direct_on(st);
  int in_place = !direct && big && ofi_spans_in_place(st, &g, n, bytes);
  OFI_DEBUG(st, "allreduce of %zu spans, %zu bytes: %s", n, bytes,
            direct     ? "direct reads of the peers' memory"
            : in_place ? "the ring, in place"
                       : "packed, a piece at a time");
  plait_result_t rc = PLAIT_SUCCESS;
  if (bytes == 0) {
  } else if (direct) {
    rc = ofi_direct_allreduce(st, &g);
    st->spans_direct++;
  } else if (in_place) {
    rc = ofi_ring_run(st, &g);
    st->spans_in_place++;
  } else {
    rc = spans_by_pieces(st, spans, n, dtype, op, post);
    st->spans_packed++;
  }
  free(mem);
  return rc;
}
