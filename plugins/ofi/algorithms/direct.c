/*
 * allreduce (allreduce_spans, and allreduce_scaled of one buffer) on one
 * host over shm by reading the peers' memory directly (process_vm_readv: CMA, the same kernel copy shm itself uses for
 * large messages), instead of passing chunks round the ring as messages.
 *
 * Every rank sends every peer where its spans are (their src and dst
 * addresses: 16 bytes a span). Rank r then reduces block r of the spans
 * (the ring's blocks): chunk by chunk it reads each peer's contributions
 * into a scratch chunk, peers r+1, r+2, ... in that order, and reduces them
 * into its own outputs, the first reduction from its own inputs, the last
 * one scaled (AVERAGE divided once). It tells every peer "reduced", and
 * reads each peer's reduced block, once that peer has said so, straight
 * from the peer's outputs into its own. It returns once every peer has
 * said "done" (finished reading this rank's memory), so the caller may
 * touch its tensors again.
 *
 * Safe in place (src == dst): rank r writes only block r of its outputs
 * before it says "reduced", and peers read only other blocks of its inputs,
 * each before saying "reduced" itself; rank r overwrites block p of its
 * outputs (the allgather) only after p said "reduced". Each block is
 * reduced once, by its owner, and copied: every rank's result is the same
 * bit for bit.
 *
 * Per rank and call: 3 (n-1) small messages each way; CMA reads of
 * (n-1)/n of the data twice; one reduction pass over 1/n of it per peer. No
 * message carries data, so none waits for a receive to be posted, and no
 * limit on pieces per message applies: one read takes up to IOV_MAX pieces.
 *
 * Used for every allreduce at the ring's sizes where it works: provider shm,
 * PLAIT_OFI_DIRECT not off, CMA not disabled for shm (FI_SHM_DISABLE_CMA),
 * every peer on this kernel, no registration needed, and every rank able to
 * read every peer's memory: decided at init (each rank reads a cookie from
 * every peer, then every rank's verdict goes round the bootstrap), so every
 * rank decides alike; a subset keeps its parent's decision.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

#include "algorithms/coll.h"
#include "algorithms/kernels.h"
#include "errors.h"
#include "robustness/liveness.h"
#include "engine/mr.h"
#include "engine/progress.h"

#define DIRECT_CHUNK ((size_t)256 * 1024) /* reduced while in L2 */
#define DIRECT_IOV 1024                   /* pieces per process_vm_readv (IOV_MAX) */
#define ID_WHERE 0u                       /* tag ids of the three messages */
#define ID_REDUCED 1u
#define ID_DONE 2u

enum { DIRECT_UNKNOWN = 0, DIRECT_ON = 1, DIRECT_OFF = 2 };

/* Whether FI_SHM_DISABLE_CMA asks shm not to use CMA (libfabric's booleans). */
static int cma_disabled(void) {
  const char *v = getenv("FI_SHM_DISABLE_CMA");
  if (!v || !*v) return 0;
  return strcmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no") &&
         strcasecmp(v, "off");
}

/* Reads len bytes at remote address `at` of peer's process into buf. */
static ssize_t peek(const ofi_state_t *st, int peer, void *buf, uint64_t at, size_t len) {
  struct iovec l = {buf, len}, r = {(void *)(uintptr_t)at, len};
  return process_vm_readv((pid_t)st->peers[peer].pid, &l, 1, &r, 1, 0);
}

plait_result_t ofi_direct_decide(ofi_state_t *st, const uint64_t *cookies,
                                 const plait_bootstrap_t *b) {
  int n = st->nranks;
  const char *why = NULL;
  if (!st->tun.direct) why = "PLAIT_OFI_DIRECT=off";
  else if (strcmp(st->provider, "shm")) why = "the provider is not shm";
  else if (cma_disabled()) why = "FI_SHM_DISABLE_CMA is set";
  else if (st->need_mr) why = "memory registration is on";
  for (int p = 0; p < n && !why; p++)
    if (p != st->rank && !st->peers[p].same_kernel) why = "a peer runs on another kernel";
  int err = 0, bad = -1;
  for (int p = 0; p < n && !why; p++) {
    uint64_t v = 0;
    if (p == st->rank) continue;
    if (peek(st, p, &v, cookies[2 * p], sizeof v) != (ssize_t)sizeof v ||
        v != cookies[2 * p + 1])
      err = errno, bad = p, why = "reading a peer's memory failed";
  }
  unsigned char mine = why == NULL, *all = malloc((size_t)n);
  if (!all) return PLAIT_ERR_NO_MEMORY;
  plait_result_t rc = b->allgather(b->ctx, &mine, 1, all); /* on where every rank says so */
  int ok = rc == PLAIT_SUCCESS;
  for (int p = 0; p < n && ok; p++) ok = all[p] == 1;
  free(all);
  if (rc) return rc;
  st->direct = ok ? DIRECT_ON : DIRECT_OFF;
  if (ok)
    OFI_DEBUG(st, "allreduce at the ring's sizes: direct reads of the peers' memory (CMA)");
  else if (bad >= 0)
    OFI_DEBUG(st, "allreduce: no direct reads: reading rank %d's memory failed: %s", bad,
              strerror(err));
  else
    OFI_DEBUG(st, "allreduce: no direct reads: %s", why ? why : "another rank cannot");
  return PLAIT_SUCCESS;
}

int ofi_direct_on(const ofi_state_t *st) { return st->direct == DIRECT_ON; }

/* The pieces of bytes [at, at + len) of g's spans at addr[2 i + which]
 * (0: src, 1: dst); returns their count (the cuts keep it <= DIRECT_IOV). */
static size_t at_pieces(const ofi_ring_t *g, const uint64_t *addr, int which, size_t at,
                        size_t len, struct iovec *iov) {
  size_t n = 0;
  for (size_t i = ofi_span_of(g, at); len > 0; i++) {
    size_t avail = g->span_at[i + 1] - at, take = avail < len ? avail : len;
    if (take == 0) continue;
    iov[n].iov_base = (char *)(uintptr_t)addr[2 * i + (size_t)which] + (at - g->span_at[i]);
    iov[n++].iov_len = take;
    at += take;
    len -= take;
  }
  return n;
}

/* One process_vm_readv of len bytes from peer, all of it or a failure. */
static plait_result_t cma(ofi_state_t *st, int peer, const struct iovec *local, size_t nl,
                          const struct iovec *remote, size_t nr, size_t len) {
  ssize_t got = process_vm_readv((pid_t)st->peers[peer].pid, local, nl, remote, nr, 0);
  if (got == (ssize_t)len) return PLAIT_SUCCESS;
  int err = got < 0 ? errno : 0;
  if (err == ESRCH)
    return ofi_break(st, PLAIT_ERR_PEER_LOST, "lost rank %d: its process (pid %lld) has exited "
                     "while this rank read its memory (%s)", ofi_job_rank(st, peer),
                     (long long)st->peers[peer].pid, st->provider);
  /* A peer frees what it gave only after every "done", or after it failed
   * itself (it lost a rank): name the rank that is gone, if one is. */
  char why[128];
  for (int p = 0; p < st->nranks; p++)
    if (p != st->rank && ofi_peer_gone(st, p, why, sizeof why))
      return ofi_break(st, PLAIT_ERR_PEER_LOST, "lost rank %d: %s; reading rank %d's memory "
                       "failed meanwhile (%s)", ofi_job_rank(st, p), why,
                       ofi_job_rank(st, peer), st->provider);
  return ofi_break(st, PLAIT_ERR_PEER_LOST, "rank %d left this allreduce: reading %zu bytes of "
                   "its memory (pid %lld) failed: %s; it failed itself, or lost another rank "
                   "(%s)", ofi_job_rank(st, peer), len, (long long)st->peers[peer].pid,
                   got < 0 ? strerror(err) : "a partial read", st->provider);
}

typedef struct direct_run {
  ofi_state_t *st;
  const ofi_ring_t *g;
  const uint64_t *mine; /* this rank's addresses: 2 per span */
  uint64_t *theirs;     /* each rank's, nspans * 2 apart */
  size_t *cofs, *first, *nch;
  ofi_req_t *req; /* [0, n): where from; [n, 2n): reduced from; [2n, 3n): done from;
                   * [3n, 6n): the same three sent */
} direct_run_t;

/* dst = a op b over count elements; the block's last reduction also divides
 * (AVERAGE) and scales. */
static plait_result_t fold(direct_run_t *x, int last, void *dst, const void *a, const void *b,
                           size_t count) {
  const ofi_ring_t *g = x->g;
  ofi_state_t *st = x->st;
  if (!last || !g->average)
    return ofi_reduce_scale(st, g->dtype, g->op, dst, a, b, count, last ? g->post : 1.0);
  plait_result_t rc = st->reduce(g->dtype, g->op, dst, a, b, count);
  if (rc == PLAIT_SUCCESS) rc = st->divide(g->dtype, dst, dst, count, (uint32_t)st->nranks);
  if (rc == PLAIT_SUCCESS && g->post != 1.0) rc = st->scale(g->dtype, dst, dst, count, g->post);
  if (rc)
    return ofi_break(st, rc, "the core's reduction kernel failed on %zu elements (%s)", count,
                     plait_result_name_inline(rc));
  return PLAIT_SUCCESS;
}

/* Block r, chunk by chunk: the peers' contributions read into scratch and
 * folded into this rank's outputs. */
static plait_result_t reduce_block(direct_run_t *x, struct iovec *a, struct iovec *b,
                                   struct iovec *c) {
  ofi_state_t *st = x->st;
  const ofi_ring_t *g = x->g;
  int n = st->nranks, r = st->rank;
  size_t nspans2 = g->nspans * 2;
  for (size_t k = 0; k < x->nch[r]; k++) {
    size_t at = g->off[r] + x->cofs[x->first[r] + k];
    size_t len = x->cofs[x->first[r] + k + 1] - x->cofs[x->first[r] + k];
    size_t np = at_pieces(g, x->mine, 0, at, len, a); /* inputs */
    at_pieces(g, x->mine, 1, at, len, b);             /* outputs */
    struct iovec tmp = {st->slots.buf, len};
    for (int j = 1; j < n; j++) {
      int p = (r + j) % n;
      at_pieces(g, x->theirs + (size_t)p * nspans2, 0, at, len, c);
      OFI_CHECK(cma(st, p, &tmp, 1, c, np, len));
      const char *got = st->slots.buf;
      for (size_t i = 0; i < np; got += a[i].iov_len, i++)
        OFI_CHECK(fold(x, j == n - 1, b[i].iov_base, j == 1 ? a[i].iov_base : b[i].iov_base,
                       got, a[i].iov_len / g->es));
    }
    OFI_CHECK(ofi_progress(st)); /* the others' messages move; the watchdog sees a turn */
  }
  return PLAIT_SUCCESS;
}

/* Peer p's reduced block, chunk by chunk, from its outputs into ours. */
static plait_result_t read_block(direct_run_t *x, int p, struct iovec *b, struct iovec *c) {
  ofi_state_t *st = x->st;
  const ofi_ring_t *g = x->g;
  for (size_t k = 0; k < x->nch[p]; k++) {
    size_t at = g->off[p] + x->cofs[x->first[p] + k];
    size_t len = x->cofs[x->first[p] + k + 1] - x->cofs[x->first[p] + k];
    size_t np = at_pieces(g, x->mine, 1, at, len, b);
    at_pieces(g, x->theirs + (size_t)p * g->nspans * 2, 1, at, len, c);
    OFI_CHECK(cma(st, p, b, np, c, np, len));
    OFI_CHECK(ofi_progress(st));
  }
  return PLAIT_SUCCESS;
}

static plait_result_t run(direct_run_t *x) {
  ofi_state_t *st = x->st;
  const ofi_ring_t *g = x->g;
  int n = st->nranks, r = st->rank;
  size_t where = g->nspans * 2 * sizeof(uint64_t);
  ofi_req_t *q = x->req;
  for (int p = 0; p < n; p++) { /* every receive first */
    if (p == r) continue;
    OFI_CHECK(ofi_post_recv(st, &q[p], p, x->theirs + (size_t)p * g->nspans * 2, where, NULL,
                            ID_WHERE));
    OFI_CHECK(ofi_post_recv(st, &q[n + p], p, NULL, 0, NULL, ID_REDUCED));
    OFI_CHECK(ofi_post_recv(st, &q[2 * n + p], p, NULL, 0, NULL, ID_DONE));
  }
  for (int p = 0; p < n; p++)
    if (p != r)
      OFI_CHECK(ofi_post_send(st, &q[3 * n + p], p, x->mine, where, NULL, ID_WHERE));
  for (int p = 0; p < n; p++)
    if (p != r) OFI_CHECK(ofi_wait_all(st, &q[p], 1));
  struct iovec *a = malloc(3 * DIRECT_IOV * sizeof *a);
  if (!a) return ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  plait_result_t rc = reduce_block(x, a, a + DIRECT_IOV, a + 2 * DIRECT_IOV);
  for (int p = 0; p < n && rc == PLAIT_SUCCESS; p++)
    if (p != r) rc = ofi_post_send(st, &q[4 * n + p], p, NULL, 0, NULL, ID_REDUCED);
  for (int j = 1; j < n && rc == PLAIT_SUCCESS; j++) {
    int p = (r + j) % n;
    rc = ofi_wait_all(st, &q[n + p], 1);
    if (rc == PLAIT_SUCCESS) rc = read_block(x, p, a + DIRECT_IOV, a + 2 * DIRECT_IOV);
    if (rc == PLAIT_SUCCESS) rc = ofi_post_send(st, &q[5 * n + p], p, NULL, 0, NULL, ID_DONE);
  }
  free(a);
  OFI_CHECK(rc);
  return ofi_wait_all(st, q, 6 * (size_t)n); /* every "done", every send */
}

plait_result_t ofi_direct_allreduce(ofi_state_t *st, const ofi_ring_t *g) {
  int n = st->nranks;
  direct_run_t x = {st, g, NULL, NULL, NULL, NULL, NULL, NULL};
  size_t ncuts = ofi_ring_max_cuts(g, n, DIRECT_CHUNK), pairs = g->nspans * 2;
  uint64_t *mine = malloc(pairs * sizeof *mine);
  x.theirs = malloc((size_t)n * pairs * sizeof *x.theirs);
  x.cofs = malloc((ncuts + 2 * (size_t)n) * sizeof *x.cofs);
  x.req = calloc(6 * (size_t)n, sizeof *x.req);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!mine || !x.theirs || !x.cofs || !x.req)
    rc = ofi_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory for %zu spans", g->nspans);
  if (rc == PLAIT_SUCCESS)
    rc = ofi_scratch_reserve(st, &st->slots, DIRECT_CHUNK);
  if (rc == PLAIT_SUCCESS) {
    for (size_t i = 0; i < g->nspans; i++) {
      mine[2 * i] = (uint64_t)(uintptr_t)g->spans[i].src;
      mine[2 * i + 1] = (uint64_t)(uintptr_t)g->spans[i].dst;
    }
    x.mine = mine;
    x.first = x.cofs + ncuts;
    x.nch = x.first + n;
    ofi_ring_cuts(g, n, DIRECT_CHUNK, DIRECT_IOV, x.cofs, x.first, x.nch);
    rc = run(&x);
  }
  free(mine), free(x.theirs), free(x.cofs), free(x.req);
  return rc;
}
