#include "robustness/quiesce.h"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "robustness/liveness.h"
#include "robustness/rescue.h"

/* Calls go down only (errors.c calls this file): its own clock and its own
 * unlinking of a request, not progress.c's. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Takes r off st's posted list if it is there (its completion came). */
static void forget(ofi_state_t *st, ofi_req_t *r) {
  if (!r->posted) return;
  if (r->prev) r->prev->next = r->next;
  else st->outstanding = r->next;
  if (r->next) r->next->prev = r->prev;
  r->posted = 0;
}

static int count_posted(const ofi_state_t *st) {
  int n = 0;
  for (const ofi_req_t *r = st->outstanding; r; r = r->next) n++;
  return n;
}

/* One read of the queue: completions and errors alike take their request
 * off the posted list (their data are never used: the state is broken).
 * Returns whether anything was read. */
static int drain_once(ofi_state_t *st) {
  struct fi_cq_entry ent[32];
  ofi_turn(st); /* the watchdog sees the loop turn: only a spin inside fi_cq_read is rescued */
  ssize_t n = fi_cq_read(st->cq, ent, 32);
  if (n == -FI_EAVAIL) {
    struct fi_cq_err_entry e;
    memset(&e, 0, sizeof e);
    if (fi_cq_readerr(st->cq, &e, 0) < 0) return 0;
    if (e.op_context) forget(st, (ofi_req_t *)e.op_context);
    return 1;
  }
  for (ssize_t i = 0; i < n; i++)
    if (ent[i].op_context) forget(st, (ofi_req_t *)ent[i].op_context);
  return n > 0;
}

/* Reads the queue until nothing is posted or `for_s` has passed. */
static void drain_for(ofi_state_t *st, double for_s) {
  double until = now_s() + for_s;
  while (st->outstanding && now_s() < until)
    if (!drain_once(st)) {
      struct timespec ts = {0, 100 * 1000};
      nanosleep(&ts, NULL);
    }
}

/* Whether every peer that a request still posted goes to or comes from is
 * known to be gone (its process on this host has exited: liveness.h). */
static int posted_peers_gone(const ofi_state_t *st) {
  for (const ofi_req_t *r = st->outstanding; r; r = r->next) {
    char why[128];
    if (!ofi_peer_gone(st, r->peer, why, sizeof why)) return 0;
  }
  return 1;
}

void ofi_quiesce(ofi_state_t *st) {
  if (st->abandoned || !st->ep || !st->cq) return;
  int posted = count_posted(st), cancelled = 0;
  for (ofi_req_t *r = st->outstanding; r; r = r->next)
    if (fi_cancel(&st->ep->fid, &r->ctx) == 0) cancelled++;
  double t0 = now_s();
  drain_for(st, OFI_QUIESCE_S);
  /* what completes after the last request: flushed by the close */
  for (int i = 0; i < 64 && drain_once(st); i++) continue;
  int left = count_posted(st);
  OFI_DEBUG(st, "quiesced the broken endpoint: %d requests posted, %d cancels accepted, %d "
            "still posted after %.3f s (%s)", posted, cancelled, left, now_s() - t0,
            st->provider);
  /* Sends rxm cannot cancel stay posted. Closing the endpoint with them
   * posted to a dead peer is safe (reset_cycles, tcp_rank_killed_*), but to
   * a live one (stopped: its connection open, the send half written)
   * libfabric 1.17 crashes in fi_close(ep) (test_blame_ofi_tcp, 2 trials of
   * 3): unless every such peer is known to be gone, the endpoint is
   * parked at teardown and closed once those sends complete (parked.h). */
  if (left && !posted_peers_gone(st)) {
    if (st->parent) { /* a subset's endpoint is its parent's: left open, as before */
      st->abandoned = 1;
      OFI_INFO(st, "the broken endpoint still has %d operations posted to a peer that may be "
               "alive after %.1f s: left open, never closed (%s)", left, OFI_QUIESCE_S,
               st->provider);
    } else {
      st->park_sends = left; /* ofi_teardown parks it (parked.h) */
      if (!st->park_peers) st->park_peers = calloc((size_t)st->nranks, 1);
      for (const ofi_req_t *r = st->outstanding; r && st->park_peers; r = r->next)
        if (r->peer >= 0 && r->peer < st->nranks) st->park_peers[r->peer] = 1;
    }
  }
  /* their memory goes with the collective: never look at them again */
  st->outstanding = NULL;
}
