#include "engine/progress.h"

#include <errno.h>
#include <math.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "robustness/liveness.h"
#include "robustness/rescue.h"

double ofi_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ofi_begin(ofi_state_t *st, const char *op) {
  st->seq++;
  st->op = op;
  st->done_head = st->done_tail = NULL;
  st->last_progress = ofi_now();
  st->last_liveness = st->last_watch = st->last_progress;
}

/* A wait polls many times a millisecond: more time since its last empty
 * poll than a heartbeat period (the core's, min(PLAIT_TIMEOUT_S / 4, 0.5 s))
 * is time this rank did not watch (descheduled, the host stalled, or its own
 * work between polls), not the peers' silence. Shorter gaps, frequent on a
 * loaded host, still count, so that a stopped peer is named about as soon. */
static double watch_gap_s(const ofi_state_t *st) {
  return st->timeout_s / 4 < 0.5 ? st->timeout_s / 4 : 0.5;
}

/* The rank of the job a peer of st is, for messages (a subset numbers its
 * members from 0; the core names ranks of the job). */
static int job_rank(const ofi_state_t *st, int peer) {
  return st->global_ranks && peer >= 0 && peer < st->nranks ? st->global_ranks[peer] : peer;
}

static uint64_t make_tag(const ofi_state_t *st, int src, uint32_t id) {
  return ((uint64_t)(st->comm & 0xfu) << 56) | ((uint64_t)(st->seq & 0xfffu) << 44) |
         ((uint64_t)((uint32_t)src & 0xfffffu) << 24) | (uint64_t)(id & OFI_TAG_ID_MAX);
}

static void push_done(ofi_state_t *st, ofi_req_t *r) {
  r->done = 1;
  r->done_next = NULL;
  if (st->done_tail)
    st->done_tail->done_next = r;
  else
    st->done_head = r;
  st->done_tail = r;
}

static void link_req(ofi_state_t *st, ofi_req_t *r) {
  r->posted = 1;
  r->prev = NULL;
  r->next = st->outstanding;
  if (st->outstanding) st->outstanding->prev = r;
  st->outstanding = r;
}

static void unlink_req(ofi_state_t *st, ofi_req_t *r) {
  if (!r->posted) return;
  if (r->prev)
    r->prev->next = r->next;
  else
    st->outstanding = r->next;
  if (r->next) r->next->prev = r->prev;
  r->posted = 0;
}

static void complete(ofi_state_t *st, ofi_req_t *r) {
  unlink_req(st, r);
  push_done(st, r);
}

/* A completion with an error: the request's peer, fi_strerror's text and
 * the provider's own (fi_cq_strerror). */
static plait_result_t read_error(ofi_state_t *st) {
  struct fi_cq_err_entry e;
  memset(&e, 0, sizeof e);
  ssize_t n = fi_cq_readerr(st->cq, &e, 0);
  if (n < 0) {
    if (n == -FI_EAGAIN) return PLAIT_SUCCESS;
    return ofi_break(st, PLAIT_ERR_TRANSPORT, "fi_cq_readerr failed: %s (%s)",
                     fi_strerror((int)-n), st->provider);
  }
  ofi_req_t *r = (ofi_req_t *)e.op_context;
  /* This plugin calls fi_cancel only on a broken state (quiesce.h), which
   * reads no result: a cancelled transfer here is one the provider gave up (tcp flushes what a closed connection still had), and
   * its buffer holds no result. Completing it as done reduced stale bytes
   * into a result reported as a success (ci/chaos, a kill over tcp). */
  if (e.err == FI_ECANCELED && r != NULL)
    return ofi_break(st, PLAIT_ERR_PEER_LOST,
                     "%s %s rank %d (%zu bytes) was cancelled by the provider: the connection "
                     "closed (%s)", r->is_send ? "send" : "receive", r->is_send ? "to" : "from",
                     job_rank(st, r->peer), r->len, st->provider);
  char prov[256] = "";
  const char *p = fi_cq_strerror(st->cq, e.prov_errno, e.err_data, prov, sizeof prov);
  if (r != NULL)
    return ofi_break(st, ofi_code(e.err),
                     "%s %s rank %d (%zu bytes) failed: %s [%s: %s]",
                     r->is_send ? "send" : "receive", r->is_send ? "to" : "from",
                     job_rank(st, r->peer),
                     r->len, fi_strerror(e.err), st->provider, p ? p : "");
  return ofi_break(st, ofi_code(e.err), "a transfer failed: %s [%s: %s]", fi_strerror(e.err),
                   st->provider, p ? p : "");
}

/* Reads the completion queue until it is empty; *got: whether anything
 * completed. */
static plait_result_t poll_cq(ofi_state_t *st, int *got) {
  *got = 0;
  if (st->broken) return st->broken;
  struct fi_cq_entry ent[32];
  for (;;) {
    ofi_turn(st);
    ssize_t n = fi_cq_read(st->cq, ent, 32);
    if (n == -FI_EAGAIN) return PLAIT_SUCCESS;
    if (n == -FI_EAVAIL) {
      OFI_CHECK(read_error(st));
      *got = 1;
      continue;
    }
    if (n < 0)
      return ofi_break(st, PLAIT_ERR_TRANSPORT, "fi_cq_read failed: %s (%s)",
                       fi_strerror((int)-n), st->provider);
    for (ssize_t i = 0; i < n; i++)
      if (ent[i].op_context) complete(st, (ofi_req_t *)ent[i].op_context);
    st->last_progress = ofi_now();
    *got = 1;
    if (n < 32) return PLAIT_SUCCESS;
  }
}

/* The ranks of the job this rank waits on (receives first), as text. */
static void waited_ranks(ofi_state_t *st, char *buf, size_t len, int *first) {
  int ranks[5], n = 0, more = 0;
  for (int pass = 0; pass < 2; pass++)
    for (ofi_req_t *r = st->outstanding; r; r = r->next) {
      if (r->is_send != pass) continue;
      int seen = 0, peer = job_rank(st, r->peer); /* a set numbers its members from 0 */
      for (int i = 0; i < n; i++) seen |= ranks[i] == peer;
      if (seen) continue;
      if (n == 5) {
        more = 1;
        continue;
      }
      ranks[n++] = peer;
    }
  *first = n ? ranks[0] : -1;
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    int k = snprintf(buf + o, len - o, "%s%d", i ? ", " : "", ranks[i]);
    if (k > 0 && (size_t)k < len - o) o += (size_t)k;
  }
  if (more) snprintf(buf + o, len - o, ", ...");
}

/* Nothing completed: check the timeout and the local peers, then yield. */
static plait_result_t idle(ofi_state_t *st) {
  double now = ofi_now(), unwatched = now - st->last_watch - watch_gap_s(st);
  st->last_watch = now;
  /* Not counted: the first rank to run again after a stall the ranks shared
   * timed out before the others could send (test_blame_ofi_tcp under load:
   * every rank timed out in the same millisecond, waiting for the others). */
  if (unwatched > 0) st->last_progress = st->last_progress + unwatched < now
                                             ? st->last_progress + unwatched : now;
  double quiet = now - st->last_progress;
  if (quiet > st->timeout_s) {
    char ranks[128];
    int first;
    waited_ranks(st, ranks, sizeof ranks, &first);
    if (first >= 0)
      return ofi_break(st, PLAIT_ERR_PEER_LOST,
                       "timed out after %g s (PLAIT_TIMEOUT_S) waiting for rank %s, which "
                       "died, hung or is unreachable (%s)",
                       st->timeout_s, ranks, st->provider);
    return ofi_break(st, PLAIT_ERR_PEER_LOST,
                     "timed out after %g s (PLAIT_TIMEOUT_S) with no transfer completing (%s)",
                     st->timeout_s, st->provider);
  }
  if (quiet > 0.05 && now - st->last_liveness > 0.1) {
    st->last_liveness = now;
    for (ofi_req_t *r = st->outstanding; r; r = r->next) {
      char why[128];
      if (ofi_peer_gone(st, r->peer, why, sizeof why))
        return ofi_break(st, PLAIT_ERR_PEER_LOST,
                         "lost rank %d: %s, with a %s of %zu bytes outstanding (%s)",
                         job_rank(st, r->peer),
                         why, r->is_send ? "send" : "receive", r->len, st->provider);
    }
  }
  if (quiet >= st->yield_s) { /* crowding.h: 2 ms, or 0 where ranks outnumber CPUs */
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, NULL);
  } else {
    sched_yield();
  }
  return PLAIT_SUCCESS;
}

static plait_result_t post_failed(ofi_state_t *st, const char *call, ssize_t rc, int peer,
                                  size_t len) {
  return ofi_break(st, ofi_code((int)-rc), "%s to rank %d (%zu bytes) failed: %s (%s)", call,
                   job_rank(st, peer), len, fi_strerror((int)-rc), st->provider);
}

/* A request about to be posted: to or from peer, len bytes, tag id. */
static void start_req(ofi_state_t *st, ofi_req_t *req, int peer, int is_send, size_t len,
                      uint32_t id) {
  req->used = 1;
  req->peer = peer;
  req->is_send = is_send;
  req->done = 0;
  req->posted = 0;
  req->len = len;
  req->tag = make_tag(st, is_send ? st->rank : peer, id);
}

/* What a post returned (rc, from `call`): taken (the request outstanding,
 * or done at once when injected), or -FI_EAGAIN (*again: the completion
 * queue was read, post again), or a failure. */
static plait_result_t taken(ofi_state_t *st, ofi_req_t *req, ssize_t rc, int inject,
                            const char *call, int *again) {
  *again = 0;
  if (rc == 0) {
    if (inject) push_done(st, req);
    else link_req(st, req);
    return PLAIT_SUCCESS;
  }
  if (rc != -FI_EAGAIN) return post_failed(st, call, rc, req->peer, req->len);
  *again = 1;
  int got;
  OFI_CHECK(poll_cq(st, &got));
  if (!got) OFI_CHECK(idle(st));
  return PLAIT_SUCCESS;
}

plait_result_t ofi_post_send(ofi_state_t *st, ofi_req_t *req, int peer, const void *buf,
                             size_t len, void *desc, uint32_t id) {
  return ofi_post_send_until(st, req, peer, buf, len, desc, id, INFINITY);
}

plait_result_t ofi_post_send_until(ofi_state_t *st, ofi_req_t *req, int peer, const void *buf,
                                   size_t len, void *desc, uint32_t id, double deadline) {
  if (st->broken) return st->broken;
  start_req(st, req, peer, 1, len, id);
  static const char zero = 0;
  if (buf == NULL) buf = &zero; /* empty messages still need an address */
  int inject = st->inject_size > 0 && len <= st->inject_size, again = 1;
  while (again) {
    ssize_t rc = inject ? fi_tinject(st->ep, buf, len, st->addrs[peer], req->tag)
                        : fi_tsend(st->ep, buf, len, desc, st->addrs[peer], req->tag, &req->ctx);
    OFI_CHECK(taken(st, req, rc, inject, inject ? "fi_tinject" : "fi_tsend", &again));
    /* -FI_EAGAIN until the peer progresses (rxm connects on the first send) */
    if (again && deadline < INFINITY && ofi_now() >= deadline) {
      req->used = 0; /* not posted */
      return PLAIT_ERR_TIMEOUT;
    }
  }
  return PLAIT_SUCCESS;
}

plait_result_t ofi_post_recv(ofi_state_t *st, ofi_req_t *req, int peer, void *buf, size_t len,
                             void *desc, uint32_t id) {
  if (st->broken) return st->broken;
  start_req(st, req, peer, 0, len, id);
  static char sink;
  if (buf == NULL) buf = &sink;
  int again = 1;
  while (again) {
    ssize_t rc = fi_trecv(st->ep, buf, len, desc, FI_ADDR_UNSPEC, req->tag, 0, &req->ctx);
    OFI_CHECK(taken(st, req, rc, 0, "fi_trecv", &again));
  }
  return PLAIT_SUCCESS;
}

/* Several pieces as one message (fi_tsendmsg / fi_trecvmsg): only buffers
 * that need no registration (every desc NULL). One piece takes the plain
 * path above (and may be injected). */
static plait_result_t post_pieces(ofi_state_t *st, ofi_req_t *req, int peer, int is_send,
                                  const struct iovec *iov, size_t n, uint32_t id) {
  if (n <= 1 && is_send)
    return ofi_post_send(st, req, peer, n ? iov[0].iov_base : NULL, n ? iov[0].iov_len : 0,
                         NULL, id);
  if (n <= 1)
    return ofi_post_recv(st, req, peer, n ? iov[0].iov_base : NULL, n ? iov[0].iov_len : 0,
                         NULL, id);
  if (st->broken) return st->broken;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += iov[i].iov_len;
  start_req(st, req, peer, is_send, len, id);
  void *desc[OFI_IOV_MAX] = {NULL};
  struct fi_msg_tagged m = {.msg_iov = iov, .desc = desc, .iov_count = n,
                            .addr = is_send ? st->addrs[peer] : FI_ADDR_UNSPEC,
                            .tag = req->tag, .context = &req->ctx};
  int again = 1;
  while (again) {
    ssize_t rc = is_send ? fi_tsendmsg(st->ep, &m, 0) : fi_trecvmsg(st->ep, &m, 0);
    OFI_CHECK(taken(st, req, rc, 0, is_send ? "fi_tsendmsg" : "fi_trecvmsg", &again));
  }
  return PLAIT_SUCCESS;
}

plait_result_t ofi_post_sendv(ofi_state_t *st, ofi_req_t *req, int peer, const struct iovec *iov,
                              size_t n, uint32_t id) {
  return post_pieces(st, req, peer, 1, iov, n, id);
}

plait_result_t ofi_post_recvv(ofi_state_t *st, ofi_req_t *req, int peer, const struct iovec *iov,
                              size_t n, uint32_t id) {
  return post_pieces(st, req, peer, 0, iov, n, id);
}

plait_result_t ofi_wait_any(ofi_state_t *st, ofi_req_t **out) {
  for (;;) {
    if (st->done_head) {
      ofi_req_t *r = st->done_head;
      st->done_head = r->done_next;
      if (!st->done_head) st->done_tail = NULL;
      *out = r;
      return PLAIT_SUCCESS;
    }
    int got;
    OFI_CHECK(poll_cq(st, &got));
    if (!got) OFI_CHECK(idle(st));
  }
}

plait_result_t ofi_progress(ofi_state_t *st) {
  int got;
  return poll_cq(st, &got);
}

int ofi_job_rank(const ofi_state_t *st, int peer) { return job_rank(st, peer); }

plait_result_t ofi_wait_all(ofi_state_t *st, ofi_req_t *reqs, size_t n) {
  return ofi_wait_all_until(st, reqs, n, INFINITY);
}

plait_result_t ofi_wait_all_until(ofi_state_t *st, ofi_req_t *reqs, size_t n, double deadline) {
  for (size_t i = 0; i < n; i++) {
    while (reqs[i].used && !reqs[i].done) {
      int got;
      OFI_CHECK(poll_cq(st, &got));
      if (got) continue;
      if (deadline < INFINITY && ofi_now() >= deadline) return PLAIT_ERR_TIMEOUT;
      OFI_CHECK(idle(st));
    }
  }
  st->done_head = st->done_tail = NULL;
  return PLAIT_SUCCESS;
}
