/*
 * vote_allreduce: the cached epoch's vote carried with its one small
 * allreduce (plait_transport_v2_t.vote_allreduce), so that an agreed round
 * is one exchange per step where the vote and the allreduce were two.
 *
 * The exchanges are recursive doubling's (allreduce_rd.c: the fold of the
 * first 2(n-p) ranks, log2(p) steps, the unfold), each message an 8-byte
 * header whose first byte is the sender's MIN so far, then its partial sums.
 * A rank whose MIN is 0 sends the header alone (a shorter message into the
 * same receive) and reduces nothing more. The sums grow in a buffer of the
 * plugin's (vred_buf: the running half and the half that receives), never in
 * the caller's: recv is written once, at the end, and only when every rank
 * voted 1, so a round the ranks did not all agree to run leaves it as it was.
 *
 * Resumable as vote.c: the caller may leave at any look at the completion
 * queue (wait_s) or while a send is refused for now; the exchange under way,
 * what of it is posted and the buffers live in st->vred, and the next call
 * goes on from there (its arguments but out and wait_s ignored).
 */
#include <math.h>
#include <string.h>

#include "algorithms/coll.h"
#include "algorithms/kernels.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"

#define HDR 8 /* the MIN, then padding that keeps the sums 8-byte aligned */

/* ph[].recv: where a message lands. */
enum { INTO_NOTHING, INTO_SCRATCH, INTO_RUNNING };

/* The exchanges of recursive doubling for this rank (allreduce_rd.c's
 * order, so that every rank ends with bit-identical sums). */
static void plan(ofi_state_t *st) {
  int n = st->nranks, r = st->rank, p = ofi_rd_pow2(n), k = 0;
  int extra = n - p, vr = ofi_rd_virtual(r, extra);
  ofi_vred_phase_t *ph = st->vred.ph;
  memset(ph, 0, sizeof st->vred.ph);
  if (r < 2 * extra && r % 2 == 0) { /* hand over, sit out, get the result */
    ph[k++] = (ofi_vred_phase_t){r + 1, 1, INTO_NOTHING, 0, 0, 1.0, 0};
    ph[k++] = (ofi_vred_phase_t){r + 1, 0, INTO_RUNNING, 0, 0, 1.0, OFI_TAG_ID_MAX};
    st->vred.nphases = k;
    return;
  }
  if (r < 2 * extra) ph[k++] = (ofi_vred_phase_t){r - 1, 0, INTO_SCRATCH, 1, 1, 1.0, 0};
  uint32_t step = 1;
  for (int mask = 1; mask < p; mask <<= 1, step++) {
    int vp = vr ^ mask;
    int peer = ofi_rd_real(vp, extra);
    int last = mask * 2 >= p && st->vred.op != PLAIT_OP_AVERAGE;
    ph[k++] = (ofi_vred_phase_t){peer, 1, INTO_SCRATCH, 1, vp < vr, last ? st->vred.post : 1.0,
                                step};
  }
  if (st->vred.op == PLAIT_OP_AVERAGE) ph[k++] = (ofi_vred_phase_t){-1, 0, 0, 0, 0, 1.0, 0};
  if (r < 2 * extra) /* odd: give the result back */
    ph[k++] = (ofi_vred_phase_t){r - 1, 1, INTO_NOTHING, 0, 0, 1.0, OFI_TAG_ID_MAX};
  st->vred.nphases = k;
}

static unsigned char *running(ofi_state_t *st) { return (unsigned char *)st->vred_buf.buf; }
static unsigned char *scratch(ofi_state_t *st) {
  return (unsigned char *)st->vred_buf.buf + HDR + ((st->vred.bytes + 63) & ~(size_t)63);
}

static plait_result_t give_up(ofi_state_t *st, plait_result_t rc) {
  st->vred.pending = 0;
  return rc;
}

/* AVERAGE: the sum divided by n, then postscale (allreduce_rd.c's order). */
static plait_result_t average(ofi_state_t *st) {
  void *sums = running(st) + HDR;
  plait_dtype_t dt = st->vred.dtype;
  size_t count = st->vred.count;
  plait_result_t rc = st->divide(dt, sums, sums, count, (uint32_t)st->nranks);
  if (rc == PLAIT_SUCCESS && st->vred.post != 1.0) rc = st->scale(dt, sums, sums, count, st->vred.post);
  if (rc)
    return ofi_break(st, rc, "the core's divide kernel failed on %zu elements (%s)", count,
                     plait_result_name_inline(rc));
  return PLAIT_SUCCESS;
}

/* One exchange done: the MIN, and the sums where every rank so far voted 1. */
static plait_result_t combine(ofi_state_t *st, int i) {
  const ofi_vred_phase_t *ph = &st->vred.ph[i];
  unsigned char *acc = running(st), *in = scratch(st);
  if (ph->recv != INTO_SCRATCH) return PLAIT_SUCCESS;
  if (in[0] < acc[0]) acc[0] = in[0];
  if (!acc[0] || !ph->combine) return PLAIT_SUCCESS;
  void *a = acc + HDR, *b = in + HDR;
  return ph->theirs_first
             ? ofi_reduce_scale(st, st->vred.dtype, st->vred.op, a, b, a, st->vred.count, ph->post)
             : ofi_reduce_scale(st, st->vred.dtype, st->vred.op, a, a, b, st->vred.count, ph->post);
}

/* A new vote: its buffers, the caller's input copied in, the plan. */
static plait_result_t start(ofi_state_t *st, uint8_t mine, const void *send, void *recv,
                            size_t count, plait_dtype_t dtype, plait_op_t op, double post) {
  size_t bytes = count * plait_dtype_size_inline(dtype);
  if (HDR + bytes > st->max_msg)
    return ofi_fail(st, PLAIT_ERR_INVALID_ARGUMENT,
                    "vote_allreduce of %zu bytes: a message of %zu bytes is more than the "
                    "provider's %zu", bytes, HDR + bytes, st->max_msg);
  size_t half = HDR + ((bytes + 63) & ~(size_t)63);
  OFI_CHECK(ofi_scratch_reserve(st, &st->vred_buf, 2 * half));
  memset(&st->vred, 0, sizeof st->vred);
  st->vred.count = count;
  st->vred.bytes = bytes;
  st->vred.dtype = dtype;
  st->vred.op = op;
  st->vred.post = post;
  st->vred.recv = recv;
  st->vred.split = st->inject_size > 0 && HDR + bytes > st->inject_size &&
                   bytes <= st->inject_size;
  unsigned char *acc = running(st);
  memset(acc, 0, HDR);
  acc[0] = mine ? 1 : 0;
  if (acc[0] && bytes) memcpy(acc + HDR, send, bytes);
  plan(st);
  st->vred.pending = 1;
  return PLAIT_SUCCESS;
}

/* Every rank voted 1: the sums into recv (postscale applied on the way at
 * one rank, where no reduction applied it; AVERAGE's divide did). */
static plait_result_t deliver(ofi_state_t *st) {
  unsigned char *sums = running(st) + HDR;
  size_t count = st->vred.count;
  if (!st->vred.bytes) return PLAIT_SUCCESS;
  if (st->nranks == 1 && st->vred.op != PLAIT_OP_AVERAGE && st->vred.post != 1.0) {
    plait_result_t rc = st->scale(st->vred.dtype, st->vred.recv, sums, count, st->vred.post);
    return rc ? ofi_fail(st, rc, "the core's scale kernel failed on %zu elements (%s)", count,
                         plait_result_name_inline(rc))
              : PLAIT_SUCCESS;
  }
  memcpy(st->vred.recv, sums, st->vred.bytes);
  return PLAIT_SUCCESS;
}

/* The messages of one exchange, posted in this order (st->vred.posted counts
 * those done): the header's receive, the sums' receive, the header's send,
 * the sums' send. Split in two where header and sums together would not be
 * injected but the sums alone would (a 4 KiB tensor over shm, whose inject
 * size is 4 KiB: one message of 4 KiB + 8 would take the provider's slower
 * path); one message otherwise. A rank whose MIN is 0 sends its sums' part
 * empty (split) or the header alone. */
static plait_result_t post(ofi_state_t *st, const ofi_vred_phase_t *ph, void *desc,
                           double deadline) {
  ofi_req_t *q = st->vred.q;
  size_t bytes = st->vred.bytes;
  int split = st->vred.split;
  unsigned char *into = ph->recv == INTO_SCRATCH ? scratch(st) : running(st);
  uint32_t hid = split ? ph->id ^ (1u << (OFI_TAG_ID_BITS - 1)) : ph->id;
  for (;;) {
    plait_result_t rc = PLAIT_SUCCESS;
    switch (st->vred.posted) {
    case 0:
      if (ph->recv != INTO_NOTHING)
        rc = ofi_post_recv(st, &q[0], ph->peer, into, split ? HDR : HDR + bytes, desc, hid);
      break;
    case 1:
      if (ph->recv != INTO_NOTHING && split)
        rc = ofi_post_recv(st, &q[2], ph->peer, into + HDR, bytes, desc, ph->id);
      break;
    case 2:
      if (ph->send) {
        size_t len = split || !running(st)[0] ? HDR : HDR + bytes;
        rc = ofi_post_send_until(st, &q[1], ph->peer, running(st), len, desc, hid, deadline);
      }
      break;
    case 3:
      if (ph->send && split)
        rc = ofi_post_send_until(st, &q[3], ph->peer, running(st) + HDR,
                                 running(st)[0] ? bytes : 0, desc, ph->id, deadline);
      break;
    default:
      return PLAIT_SUCCESS;
    }
    if (rc) return rc; /* PLAIT_ERR_TIMEOUT: the next call posts it */
    st->vred.posted++;
  }
}

plait_result_t ofi_vote_allreduce(ofi_state_t *st, uint8_t mine, const void *send, void *recv,
                                  size_t count, plait_dtype_t dtype, plait_op_t op, double post_,
                                  uint8_t *out, double wait_s) {
  if (!st->vred.pending) {
    ofi_begin(st, "vote_allreduce");
    OFI_CHECK(start(st, mine, send, recv, count, dtype, op, post_));
  }
  double deadline = wait_s < 0 ? INFINITY : ofi_now() + wait_s;
  size_t half = HDR + ((st->vred.bytes + 63) & ~(size_t)63);
  ofi_desc_t d;
  plait_result_t rc = ofi_mr_acquire(st, st->vred_buf.buf, 2 * half, &d);
  if (rc) return give_up(st, rc);
  ofi_req_t *q = st->vred.q;
  for (; st->vred.phase < st->vred.nphases; st->vred.phase++) {
    int i = st->vred.phase;
    const ofi_vred_phase_t *ph = &st->vred.ph[i];
    if (ph->peer < 0) { /* AVERAGE's divide, where the sums are whole */
      if (running(st)[0]) rc = average(st);
      if (rc) break;
      continue;
    }
    if (st->vred.posted == 0) memset(q, 0, sizeof st->vred.q);
    rc = post(st, ph, d.desc, deadline);
    if (rc) break; /* PLAIT_ERR_TIMEOUT: pending */
    rc = ofi_wait_all_until(st, q, 4, deadline);
    if (rc) break; /* PLAIT_ERR_TIMEOUT: the next call goes on */
    rc = combine(st, i);
    if (rc) break;
    st->vred.posted = 0;
  }
  if (rc == PLAIT_SUCCESS && running(st)[0]) rc = deliver(st);
  ofi_mr_release(st, &d);
  if (rc == PLAIT_ERR_TIMEOUT) return rc; /* pending */
  if (rc) return give_up(st, rc);
  st->vred.pending = 0;
  *out = running(st)[0];
  return PLAIT_SUCCESS;
}
