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
 */
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "errors.h"
#include "mr.h"
#include "progress.h"

enum { NONE = 0, POSTED = 1, DONE = 2 };

typedef struct ring_run {
  ofi_state_t *st;
  const ofi_ring_t *g;
  int n, r, left, right, t0, steps;
  size_t chunk, kmax, window;
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

static size_t chunks(const ring_run_t *x, int b) {
  return (x->g->len[b] + x->chunk - 1) / x->chunk;
}
static size_t chunk_len(const ring_run_t *x, int b, size_t k) {
  size_t rest = x->g->len[b] - k * x->chunk;
  return rest < x->chunk ? rest : x->chunk;
}

static char *final_block(const ring_run_t *x) {
  return x->g->final ? x->g->final : x->g->work + x->g->off[x->r];
}

/* Where the data sent at step i, chunk k comes from. */
static const char *send_from(const ring_run_t *x, int i, size_t k, void **desc) {
  int t = x->t0 + i, b = send_block(x, i);
  size_t at = k * x->chunk;
  if (t == 0) {
    *desc = x->d_src.desc;
    return x->g->src + x->g->off[b] + at;
  }
  if (t == x->n - 1 && x->g->final) {
    *desc = x->d_final.desc;
    return x->g->final + at;
  }
  *desc = x->d_work.desc;
  return x->g->work + x->g->off[b] + at;
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
    char *dst;
    void *desc;
    int slot = -1;
    if (t < x->n - 1) {
      if (x->nfree == 0) return PLAIT_SUCCESS;
      slot = x->free_slots[--x->nfree];
      dst = x->st->slots.buf + (size_t)slot * x->chunk;
      desc = x->d_slots.desc;
    } else {
      /* In place: the block sent from here at step t+1-n must have left. */
      int tp = t + 1 - x->n;
      if (tp >= x->t0 && x->sstate[(size_t)(tp - x->t0) * x->kmax + k] != DONE)
        return PLAIT_SUCCESS;
      dst = x->g->work + x->g->off[b] + k * x->chunk;
      desc = x->d_work.desc;
    }
    ofi_req_t *q = &x->rreq[x->free_rreq[--x->nfree_rreq]];
    q->step = i;
    q->chunk = (int)k;
    q->slot = slot;
    OFI_CHECK(ofi_post_recv(x->st, q, x->left, dst, len, desc,
                            (uint32_t)((size_t)i * x->kmax + k)));
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
    const char *from = send_from(x, i, k, &desc);
    ofi_req_t *q = &x->sreq[x->free_sreq[--x->nfree_sreq]];
    q->step = i;
    q->chunk = (int)k;
    q->slot = -1;
    x->sstate[(size_t)i * x->kmax + k] = POSTED;
    x->sk++;
    OFI_CHECK(ofi_post_send(x->st, q, x->right, from, chunk_len(x, b, k), desc,
                            (uint32_t)((size_t)i * x->kmax + k)));
  }
  return PLAIT_SUCCESS;
}

/* A reduce-scatter chunk arrived in its slot: fold this rank's data in. */
static plait_result_t reduce_chunk(ring_run_t *x, const ofi_req_t *q) {
  const ofi_ring_t *g = x->g;
  int t = x->t0 + q->step, b = recv_block(x, q->step);
  size_t at = (size_t)q->chunk * x->chunk, len = chunk_len(x, b, (size_t)q->chunk);
  size_t count = len / g->es;
  const char *mine = g->src + g->off[b] + at;
  const char *got = x->st->slots.buf + (size_t)q->slot * x->chunk;
  int last = t == x->n - 2;
  char *dst = last ? final_block(x) + at : g->work + g->off[b] + at;
  if (!last || !g->average) /* the block's last reduction also scales it */
    return ofi_reduce_scale(x->st, g->dtype, g->op, dst, mine, got, count, last ? g->post : 1.0);
  plait_result_t rc = x->st->reduce(g->dtype, g->op, dst, mine, got, count);
  if (rc == PLAIT_SUCCESS) rc = x->st->divide(g->dtype, dst, dst, count, (uint32_t)x->n);
  if (rc == PLAIT_SUCCESS && g->post != 1.0) rc = x->st->scale(g->dtype, dst, dst, count, g->post);
  if (rc)
    return ofi_break(x->st, rc, "the core's reduction kernel failed on %zu elements (%s)",
                     count, plait_result_name_inline(rc));
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
    if (g->src != g->work) OFI_CHECK(ofi_mr_acquire(st, g->src, extent, &x->d_src));
    else x->d_src.desc = NULL;
  }
  OFI_CHECK(ofi_mr_acquire(st, g->work, extent, &x->d_work));
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
  x.kmax = (maxlen + chunk - 1) / chunk;
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
  free(x.rstate);
  free(x.sstate);
  free(x.sreq);
  free(x.rreq);
  free(x.free_slots);
  free(x.free_sreq);
  free(x.free_rreq);
  return rc;
}

void ofi_even_blocks(int n, size_t count, size_t es, size_t *off, size_t *len) {
  size_t base = count / (size_t)n, extra = count % (size_t)n, at = 0;
  for (int b = 0; b < n; b++) {
    size_t c = base + ((size_t)b < extra ? 1 : 0);
    off[b] = at * es;
    len[b] = c * es;
    at += c;
  }
}
