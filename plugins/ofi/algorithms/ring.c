/*
 * The pipelined ring over n blocks (Patarasuk & Yuan's bandwidth-optimal
 * allreduce, split in its two halves so reducescatter and allgatherv use
 * them alone).
 *
 * Global step t runs from 0 to 2n-3: steps 0..n-2 reduce-scatter, steps
 * n-1..2n-3 allgather. At step t rank r sends block (r-1-t) mod n to r+1 and
 * receives block (r-2-t) mod n from r-1; in the reduce-scatter half it
 * reduces what it receives with its own contribution, so after step n-2 it
 * holds block r fully reduced, and the allgather half passes the reduced
 * blocks around.
 *
 * Each block is cut into chunks of PLAIT_OFI_CHUNK bytes, and chunk k of step
 * t is sent as soon as chunk k of step t-1 has arrived (and been reduced):
 * sends, receives and reductions of different chunks overlap. Sends and
 * receives on each link are posted in (step, chunk) order, at most
 * PLAIT_OFI_WINDOW receives and 2x that many sends in flight; because both
 * ends of a link follow that one order, the smallest message not yet
 * delivered can always be posted on both sides, so the ring cannot deadlock.
 * Reduce-scatter chunks arrive in a window of scratch slots; allgather chunks
 * land in place.
 *
 * Over spans (allreduce_spans: a fused response's tensors where they are)
 * the blocks are cut the same way, but a chunk also ends where it would
 * take more than st->iov_limit pieces of spans; its message is those
 * pieces (fi_tsendmsg / fi_trecvmsg), and its reduction runs piece by
 * piece. The cuts depend only on the lengths, the same on every rank.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/coll.h"
#include "algorithms/kernels.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"

enum { NONE = 0, POSTED = 1, DONE = 2 };
enum { SRC = 0, WORK = 1, FINAL = 2 }; /* where a byte range lies (pieces) */

typedef struct ring_run {
  ofi_state_t *st;
  const ofi_ring_t *g;
  int n, r, left, right, t0, steps;
  size_t chunk, kmax, window;
  size_t *cofs, *first, *nch;     /* the cuts (ofi_ring_cuts) */
  unsigned char *rstate, *sstate; /* [step * kmax + chunk] */
  ofi_req_t *sreq, *rreq;         /* window sends, window receives */
  int *free_slots, nfree;
  int *free_sreq, nfree_sreq, *free_rreq, nfree_rreq;
  ofi_desc_t d_src, d_work, d_final, d_slots;
  size_t sends_left, recvs_left;
  int si, ri;      /* next step to send / receive */
  size_t sk, rk;   /* next chunk */
} ring_run_t;

static int mod(int a, int n) { return ((a % n) + n) % n; }
static int send_block(const ring_run_t *x, int i) { return mod(x->r - 1 - (x->t0 + i), x->n); }
static int recv_block(const ring_run_t *x, int i) { return mod(x->r - 2 - (x->t0 + i), x->n); }

static size_t chunks(const ring_run_t *x, int b) { return x->nch[b]; }
static size_t chunk_at(const ring_run_t *x, int b, size_t k) { return x->cofs[x->first[b] + k]; }
static size_t chunk_len(const ring_run_t *x, int b, size_t k) {
  return x->cofs[x->first[b] + k + 1] - x->cofs[x->first[b] + k];
}

/* The memory of bytes [at, at + len) of `where` (SRC, WORK: offsets into
 * the blocks' buffer; FINAL: into g->final) as pieces in iov; returns their
 * count: 1 without spans, at most st->iov_limit within one chunk. */
static size_t pieces(const ring_run_t *x, int where, size_t at, size_t len, struct iovec *iov) {
  const ofi_ring_t *g = x->g;
  if (!g->spans) {
    char *base = where == SRC ? (char *)g->src : where == WORK ? g->work : g->final;
    iov[0].iov_base = base + at;
    iov[0].iov_len = len;
    return 1;
  }
  size_t n = 0;
  for (size_t i = ofi_span_of(g, at); len > 0; i++) {
    size_t avail = g->span_at[i + 1] - at, take = avail < len ? avail : len;
    if (take == 0) continue;
    char *base = where == SRC ? (char *)g->spans[i].src : (char *)g->spans[i].dst;
    iov[n].iov_base = base + (at - g->span_at[i]);
    iov[n++].iov_len = take;
    at += take;
    len -= take;
  }
  return n;
}

/* Where the data sent at step i, chunk k comes from. */
static int send_from(const ring_run_t *x, int i, size_t k, size_t *at, void **desc) {
  int t = x->t0 + i, b = send_block(x, i);
  size_t in = chunk_at(x, b, k);
  if (t == 0) {
    *desc = x->d_src.desc;
    *at = x->g->off[b] + in;
    return SRC;
  }
  if (t == x->n - 1 && x->g->final) {
    *desc = x->d_final.desc;
    *at = in;
    return FINAL;
  }
  *desc = x->d_work.desc;
  *at = x->g->off[b] + in;
  return WORK;
}

static plait_result_t post_recvs(ring_run_t *x) {
  while (x->ri < x->steps) {
    int i = x->ri, b = recv_block(x, i), t = x->t0 + i;
    if (x->rk >= chunks(x, b)) {
      x->ri++;
      x->rk = 0;
      continue;
    }
    if (x->nfree_rreq == 0) return PLAIT_SUCCESS;
    size_t k = x->rk, len = chunk_len(x, b, k);
    uint32_t id = (uint32_t)((size_t)i * x->kmax + k);
    struct iovec iov[OFI_IOV_MAX];
    size_t np = 1;
    void *desc;
    int slot = -1;
    if (t < x->n - 1) {
      if (x->nfree == 0) return PLAIT_SUCCESS;
      slot = x->free_slots[--x->nfree];
      iov[0].iov_base = x->st->slots.buf + (size_t)slot * x->chunk;
      iov[0].iov_len = len;
      desc = x->d_slots.desc;
    } else {
      /* In place: the block sent from here at step t+1-n must have left. */
      int tp = t + 1 - x->n;
      if (tp >= x->t0 && x->sstate[(size_t)(tp - x->t0) * x->kmax + k] != DONE)
        return PLAIT_SUCCESS;
      np = pieces(x, WORK, x->g->off[b] + chunk_at(x, b, k), len, iov);
      desc = x->d_work.desc;
    }
    ofi_req_t *q = &x->rreq[x->free_rreq[--x->nfree_rreq]];
    q->step = i;
    q->chunk = (int)k;
    q->slot = slot;
    if (np == 1)
      OFI_CHECK(ofi_post_recv(x->st, q, x->left, iov[0].iov_base, len, desc, id));
    else
      OFI_CHECK(ofi_post_recvv(x->st, q, x->left, iov, np, id));
    x->rstate[(size_t)i * x->kmax + k] = POSTED;
    x->rk++;
  }
  return PLAIT_SUCCESS;
}

static plait_result_t post_sends(ring_run_t *x) {
  while (x->si < x->steps) {
    int i = x->si, b = send_block(x, i);
    if (x->sk >= chunks(x, b)) {
      x->si++;
      x->sk = 0;
      continue;
    }
    size_t k = x->sk;
    if (x->nfree_sreq == 0) return PLAIT_SUCCESS;
    if (i > 0 && x->rstate[(size_t)(i - 1) * x->kmax + k] != DONE) return PLAIT_SUCCESS;
    void *desc;
    size_t at, len = chunk_len(x, b, k);
    struct iovec iov[OFI_IOV_MAX];
    int where = send_from(x, i, k, &at, &desc);
    size_t np = pieces(x, where, at, len, iov);
    uint32_t id = (uint32_t)((size_t)i * x->kmax + k);
    ofi_req_t *q = &x->sreq[x->free_sreq[--x->nfree_sreq]];
    q->step = i;
    q->chunk = (int)k;
    q->slot = -1;
    x->sstate[(size_t)i * x->kmax + k] = POSTED;
    x->sk++;
    if (np == 1)
      OFI_CHECK(ofi_post_send(x->st, q, x->right, iov[0].iov_base, len, desc, id));
    else
      OFI_CHECK(ofi_post_sendv(x->st, q, x->right, iov, np, id));
  }
  return PLAIT_SUCCESS;
}

/* dst = mine op got over count elements; the block's last reduction also
 * divides (AVERAGE) and scales it. */
static plait_result_t reduce_piece(ring_run_t *x, int last, void *dst, const void *mine,
                                   const void *got, size_t count) {
  const ofi_ring_t *g = x->g;
  if (!last || !g->average)
    return ofi_reduce_scale(x->st, g->dtype, g->op, dst, mine, got, count, last ? g->post : 1.0);
  plait_result_t rc = x->st->reduce(g->dtype, g->op, dst, mine, got, count);
  if (rc == PLAIT_SUCCESS) rc = x->st->divide(g->dtype, dst, dst, count, (uint32_t)x->n);
  if (rc == PLAIT_SUCCESS && g->post != 1.0) rc = x->st->scale(g->dtype, dst, dst, count, g->post);
  if (rc)
    return ofi_break(x->st, rc, "the core's reduction kernel failed on %zu elements (%s)",
                     count, plait_result_name_inline(rc));
  return PLAIT_SUCCESS;
}

/* A reduce-scatter chunk arrived in its slot: fold this rank's data in,
 * piece by piece (one piece without spans). */
static plait_result_t reduce_chunk(ring_run_t *x, const ofi_req_t *q) {
  const ofi_ring_t *g = x->g;
  int t = x->t0 + q->step, b = recv_block(x, q->step);
  size_t at = chunk_at(x, b, (size_t)q->chunk), len = chunk_len(x, b, (size_t)q->chunk);
  const char *got = x->st->slots.buf + (size_t)q->slot * x->chunk;
  int last = t == x->n - 2; /* then b is this rank's block */
  struct iovec mine[OFI_IOV_MAX], dst[OFI_IOV_MAX];
  size_t np = pieces(x, SRC, g->off[b] + at, len, mine);
  if (last && g->final) pieces(x, FINAL, at, len, dst);
  else pieces(x, WORK, g->off[b] + at, len, dst);
  for (size_t j = 0; j < np; got += mine[j].iov_len, j++)
    OFI_CHECK(reduce_piece(x, last, dst[j].iov_base, mine[j].iov_base, got,
                           mine[j].iov_len / g->es));
  return PLAIT_SUCCESS;
}

static plait_result_t handle(ring_run_t *x, ofi_req_t *q) {
  size_t at = (size_t)q->step * x->kmax + (size_t)q->chunk;
  if (q->is_send) {
    x->sstate[at] = DONE;
    x->free_sreq[x->nfree_sreq++] = (int)(q - x->sreq);
    x->sends_left--;
    return PLAIT_SUCCESS;
  }
  if (q->slot >= 0) {
    OFI_CHECK(reduce_chunk(x, q));
    x->free_slots[x->nfree++] = q->slot;
  }
  x->rstate[at] = DONE;
  x->free_rreq[x->nfree_rreq++] = (int)(q - x->rreq);
  x->recvs_left--;
  return PLAIT_SUCCESS;
}

static plait_result_t run(ring_run_t *x) {
  const ofi_ring_t *g = x->g;
  ofi_state_t *st = x->st;
  size_t extent = 0;
  for (int b = 0; b < x->n; b++)
    if (g->off[b] + g->len[b] > extent) extent = g->off[b] + g->len[b];
  if (g->reduce_scatter) {
    OFI_CHECK(ofi_scratch_reserve(st, &st->slots, x->window * x->chunk));
    OFI_CHECK(ofi_mr_acquire(st, st->slots.buf, x->window * x->chunk, &x->d_slots));
    if (g->src != g->work && !g->spans) OFI_CHECK(ofi_mr_acquire(st, g->src, extent, &x->d_src));
    else x->d_src.desc = NULL;
  }
  if (!g->spans) OFI_CHECK(ofi_mr_acquire(st, g->work, extent, &x->d_work)); /* spans: none */
  if (g->src == g->work) x->d_src.desc = x->d_work.desc;
  if (g->final) OFI_CHECK(ofi_mr_acquire(st, g->final, g->len[x->r], &x->d_final));
  for (int i = 0; i < x->steps; i++) {
    x->sends_left += chunks(x, send_block(x, i));
    x->recvs_left += chunks(x, recv_block(x, i));
  }
  while (x->sends_left > 0 || x->recvs_left > 0) {
    OFI_CHECK(post_recvs(x));
    OFI_CHECK(post_sends(x));
    ofi_req_t *q;
    OFI_CHECK(ofi_wait_any(st, &q));
    OFI_CHECK(handle(x, q));
  }
  return PLAIT_SUCCESS;
}

plait_result_t ofi_ring_run(ofi_state_t *st, const ofi_ring_t *g) {
  ring_run_t x;
  memset(&x, 0, sizeof x);
  x.st = st;
  x.g = g;
  x.n = st->nranks;
  x.r = st->rank;
  x.left = mod(x.r - 1, x.n);
  x.right = mod(x.r + 1, x.n);
  x.t0 = g->reduce_scatter ? 0 : x.n - 1;
  x.steps = (g->allgather ? 2 * x.n - 2 : x.n - 1) - x.t0;
  size_t maxlen = 0;
  for (int b = 0; b < x.n; b++)
    if (g->len[b] > maxlen) maxlen = g->len[b];
  if (x.steps <= 0 || maxlen == 0) return PLAIT_SUCCESS;
  /* Whole elements per chunk, within the provider's message size, and few
   * enough chunks that every (step, chunk) has its own tag id. */
  size_t chunk = (size_t)st->tun.chunk;
  if (chunk > st->max_msg) chunk = st->max_msg;
  chunk -= chunk % g->es;
  if (chunk < g->es) chunk = g->es;
  while ((size_t)x.steps * ((maxlen + chunk - 1) / chunk) > OFI_TAG_ID_MAX) chunk *= 2;
  x.chunk = chunk;
  size_t ncuts = ofi_ring_max_cuts(g, x.n, chunk);
  x.cofs = malloc((ncuts + 2 * (size_t)x.n) * sizeof *x.cofs);
  if (!x.cofs) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory for %zu ring chunks", ncuts);
  x.first = x.cofs + ncuts;
  x.nch = x.first + x.n;
  x.kmax = ofi_ring_cuts(g, x.n, chunk, st->iov_limit, x.cofs, x.first, x.nch);
  if ((size_t)x.steps * x.kmax > OFI_TAG_ID_MAX) { /* spans: the caller's check failed */
    free(x.cofs);
    return ofi_fail(st, PLAIT_ERR_INTERNAL, "%zu chunks a block need more tag ids than the "
                    "ring has (%u)", x.kmax, OFI_TAG_ID_MAX);
  }
  x.window = (size_t)st->tun.window;
  size_t cells = (size_t)x.steps * x.kmax, w = x.window;
  x.rstate = calloc(cells, 1);
  x.sstate = calloc(cells, 1);
  x.sreq = calloc(w, sizeof *x.sreq);
  x.rreq = calloc(w, sizeof *x.rreq);
  x.free_slots = malloc(w * sizeof(int));
  x.free_sreq = malloc(w * sizeof(int));
  x.free_rreq = malloc(w * sizeof(int));
  plait_result_t rc;
  if (!x.rstate || !x.sstate || !x.sreq || !x.rreq || !x.free_slots || !x.free_sreq ||
      !x.free_rreq) {
    rc = ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory for %zu ring chunks", cells);
  } else {
    for (size_t i = 0; i < w; i++) {
      x.free_slots[x.nfree++] = (int)i;
      x.free_rreq[x.nfree_rreq++] = (int)i;
    }
    for (size_t i = 0; i < w; i++) x.free_sreq[x.nfree_sreq++] = (int)i;
    rc = run(&x);
  }
  ofi_mr_release(st, &x.d_slots);
  ofi_mr_release(st, &x.d_src);
  ofi_mr_release(st, &x.d_work);
  ofi_mr_release(st, &x.d_final);
  free(x.cofs);
  free(x.rstate);
  free(x.sstate);
  free(x.sreq);
  free(x.rreq);
  free(x.free_slots);
  free(x.free_sreq);
  free(x.free_rreq);
  return rc;
}
