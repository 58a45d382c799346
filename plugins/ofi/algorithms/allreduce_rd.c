/*
 * Recursive doubling allreduce, for small messages: log2(p) steps in which
 * partners exchange their whole buffers and both reduce, p the largest power
 * of two <= n. With n not a power of two, the first 2(n-p) ranks pair up
 * first: each even one hands its data to the odd one above it, sits out,
 * and gets the result back at the end (Thakur, Rabenseifner & Gropp).
 *
 * Both partners compute reduce(lower ranks' part, higher ranks' part), in
 * that order, so every rank ends with bit-identical results (MIN/MAX of +0
 * and -0, float16 rounding).
 */
#include <string.h>

#include "algorithms/coll.h"
#include "algorithms/kernels.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"

/* Tag ids: 0 fold, 1.. steps, OFI_TAG_ID_MAX unfold. */
static plait_result_t exchange(ofi_state_t *st, int peer, void *buf, void *tmp, size_t bytes,
                               const ofi_desc_t *db, const ofi_desc_t *dt, uint32_t id,
                               int send, int recv) {
  ofi_req_t q[2];
  memset(q, 0, sizeof q);
  if (recv) OFI_CHECK(ofi_post_recv(st, &q[0], peer, tmp, bytes, dt->desc, id));
  if (send) OFI_CHECK(ofi_post_send(st, &q[1], peer, buf, bytes, db->desc, id));
  return ofi_wait_all(st, q, 2);
}

static plait_result_t combine(ofi_state_t *st, plait_dtype_t dtype, plait_op_t op, void *buf,
                              const void *tmp, size_t count, int theirs_first, double post) {
  return theirs_first ? ofi_reduce_scale(st, dtype, op, buf, tmp, buf, count, post)
                      : ofi_reduce_scale(st, dtype, op, buf, buf, tmp, count, post);
}

static plait_result_t run(ofi_state_t *st, void *buf, void *tmp, size_t count,
                          plait_dtype_t dtype, plait_op_t op, double post,
                          const ofi_desc_t *db, const ofi_desc_t *dt) {
  int n = st->nranks, r = st->rank, p = ofi_rd_pow2(n);
  int extra = n - p, vr = ofi_rd_virtual(r, extra);
  size_t bytes = count * plait_dtype_size_inline(dtype);
  if (r < 2 * extra) {
    if (r % 2 == 0) { /* hand over, sit out, get the result */
      OFI_CHECK(exchange(st, r + 1, buf, tmp, bytes, db, dt, 0, 1, 0));
      return exchange(st, r + 1, buf, buf, bytes, db, db, OFI_TAG_ID_MAX, 0, 1);
    }
    OFI_CHECK(exchange(st, r - 1, buf, tmp, bytes, db, dt, 0, 0, 1));
    OFI_CHECK(combine(st, dtype, op, buf, tmp, count, 1, 1.0));
  }
  uint32_t step = 1;
  for (int mask = 1; mask < p; mask <<= 1, step++) {
    int vp = vr ^ mask;
    int peer = ofi_rd_real(vp, extra);
    OFI_CHECK(exchange(st, peer, buf, tmp, bytes, db, dt, step, 1, 1));
    /* The last step's reduction also scales (not after AVERAGE's divide). */
    int last = mask * 2 >= p && op != PLAIT_OP_AVERAGE;
    OFI_CHECK(combine(st, dtype, op, buf, tmp, count, vp < vr, last ? post : 1.0));
  }
  if (op == PLAIT_OP_AVERAGE) {
    plait_result_t rc = st->divide(dtype, buf, buf, count, (uint32_t)n);
    if (rc == PLAIT_SUCCESS && post != 1.0) rc = st->scale(dtype, buf, buf, count, post);
    if (rc)
      return ofi_break(st, rc, "the core's divide kernel failed on %zu elements (%s)", count,
                       plait_result_name_inline(rc));
  }
  if (r < 2 * extra) /* odd: give the result back */
    OFI_CHECK(exchange(st, r - 1, buf, tmp, bytes, db, dt, OFI_TAG_ID_MAX, 1, 0));
  return PLAIT_SUCCESS;
}

plait_result_t ofi_allreduce_rd(ofi_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                                plait_op_t op, double post) {
  size_t bytes = count * plait_dtype_size_inline(dtype);
  OFI_CHECK(ofi_scratch_reserve(st, &st->tmp, bytes));
  ofi_desc_t db, dt;
  OFI_CHECK(ofi_mr_acquire(st, buf, bytes, &db));
  plait_result_t rc = ofi_mr_acquire(st, st->tmp.buf, bytes, &dt);
  if (rc == PLAIT_SUCCESS) {
    rc = run(st, buf, st->tmp.buf, count, dtype, op, post, &db, &dt);
    ofi_mr_release(st, &dt);
  }
  ofi_mr_release(st, &db);
  return rc;
}
