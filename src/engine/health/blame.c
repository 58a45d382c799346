/* Who is to blame when a collective fails in the transport (blame.h). */
#include "engine/health/blame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/messages.h"
#include "engine/negotiate/messages.h"
#include "util/clock.h"
#include "util/error.h"

#define ORIG_MAX 1600

double plait_blame_live_period_s(double timeout_s) {
  double p = timeout_s / 4;
  return p < 0.5 ? p : 0.5;
}

/* Live ranks always show a sign of life within a round: whatever they are
 * doing, they or their liveness thread send within a heartbeat period (a
 * rank idle in its loop answers rank 0's heartbeats at once). */
static double round_s(const plait_blame_t *b) {
  return 2 * plait_blame_live_period_s(b->timeout_s) + 1;
}

/* The failures that ranks reported, as "on rank R: message" items: those
 * that name a cause first, then those that only say a peer seemed gone
 * (PEER_LOST, a consequence when every rank answered). */
typedef struct {
  char first[3072], then[3072];
  uint32_t code; /* the first cause's error, or 0 */
} causes_t;

static void add_cause(causes_t *c, int rank, uint32_t code, const char *text) {
  int consequence = code == PLAIT_ERR_PEER_LOST || code == 0 || code >= PLAIT_RESULT_COUNT_;
  char *buf = consequence ? c->then : c->first;
  size_t len = strlen(buf), cap = sizeof c->first;
  snprintf(buf + len, cap - len, "%son rank %d: %s", len ? "; " : "", rank,
           text && *text ? text : "(no message)");
  if (!consequence && !c->code) c->code = code;
}

/* The report's cause added to c (when c); 1 when f was a failure report. */
static int failure_report(const plait_frame_t *f, int rank, causes_t *c) {
  plait_request_list_t req;
  uint32_t code = 0;
  char *text = NULL;
  if (f->type != PLAIT_MSG_REQUESTS ||
      plait_requests_decode_failure(f->payload, f->length, &req, &code, &text))
    return 0;
  int failed = (req.flags & PLAIT_REQ_FAILED) != 0;
  if (failed && c) add_cause(c, rank, code, text);
  plait_requests_free(&req);
  free(text);
  return failed;
}

/* Reads what is queued from peer without waiting: -1 closed, 1 when a failure
 * report (or, with abort_out, rank 0's ABORT) was among it, else 0. What was
 * queued before the round proves nothing (a rank stopped since may have sent
 * it), except a failure report. */
static int drain(plait_blame_t *b, int peer, plait_frame_t *abort_out, causes_t *c) {
  int seen = 0;
  while (plait_control_readable(b->ctrl, peer)) {
    plait_frame_t f;
    if (plait_control_recv_any(b->ctrl, peer, plait_now() + 1, "peer", &f)) return -1;
    if (abort_out && f.type == PLAIT_MSG_ABORT) {
      *abort_out = f;
      return 1;
    }
    if (failure_report(&f, peer, c)) seen = 1;
    plait_frame_free(&f);
  }
  return seen;
}

/* The round: state[r] becomes 1 (a sign of life) or 2 (closed) for each
 * rank that shows one before it ends; 0 stays for the silent. */
static void hold_round(plait_blame_t *b, uint8_t *state, causes_t *why) {
  int n = b->size, left = n - 1;
  for (int r = 1; r < n; r++) {
    int d = drain(b, r, NULL, why);
    if (d && !state[r]) state[r] = d < 0 ? 2 : 1;
    left -= state[r] != 0;
  }
  double deadline = plait_now() + round_s(b);
  while (left > 0 && plait_now() < deadline) {
    int k = 0;
    for (int r = 1; r < n; r++)
      if (!state[r]) b->pfd[k++] = plait_control_pollfd(b->ctrl, r);
    if (poll(b->pfd, (nfds_t)k, (int)((deadline - plait_now()) * 1000) + 1) <= 0) continue;
    for (int i = 0, r = 1; i < k; r++) {
      if (state[r]) continue;
      if (!b->pfd[i++].revents) continue;
      plait_frame_t f;
      state[r] = plait_control_recv_any(b->ctrl, r, deadline, "peer", &f) ? 2 : 1;
      if (state[r] == 1) {
        failure_report(&f, r, why);
        plait_frame_free(&f);
      }
      left--;
    }
  }
}

plait_result_t plait_blame_reported(plait_blame_t *b, int rank, uint32_t code, const char *text) {
  b->reporter = rank;
  b->reported_code = code;
  snprintf(b->reported, sizeof b->reported, "%s", text && *text ? text : "(no message)");
  return plait_error(PLAIT_ERR_TRANSPORT, "rank %d reported that a collective failed in its "
                     "transport: %s", rank, b->reported);
}

/* Rank 0: the failure rc (its message in plait_last_error()) judged by a
 * blame round; returns the verdict, its message set. */
static plait_result_t plait_blame_root(plait_blame_t *b, plait_result_t rc) {
  char orig[ORIG_MAX];
  snprintf(orig, sizeof orig, "%s", plait_last_error());
  int n = b->size;
  uint8_t *state = calloc((size_t)n, 1); /* 0 unknown, 1 here, 2 closed */
  causes_t *why = calloc(1, sizeof *why);
  if (!state || !why) {
    free(state);
    free(why);
    return rc;
  }
  if (b->reporter > 0) {
    state[b->reporter] = 1;
    add_cause(why, b->reporter, b->reported_code, b->reported);
  } else {
    add_cause(why, 0, (uint32_t)rc, orig);
  }
  plait_live_away(b->live); /* our heartbeats also ask idle ranks to answer */
  hold_round(b, state, why);
  plait_live_back(b->live);
  uint8_t *cl = calloc((size_t)n, 1), *si = calloc((size_t)n, 1);
  int nclosed = 0, nsilent = 0;
  for (int r = 1; cl && si && r < n; r++) {
    cl[r] = state[r] == 2, nclosed += cl[r];
    si[r] = state[r] == 0, nsilent += si[r];
  }
  char who[512] = "";
  if (nclosed || nsilent) {
    plait_format_ranks(who, sizeof who, n, nclosed ? cl : si);
    rc = plait_error(PLAIT_ERR_PEER_LOST, "%s %s lost: %s after a collective failed (the "
                     "transport said: %s)", who, (nclosed ? nclosed : nsilent) == 1 ? "was" : "were",
                     nclosed ? "connection closed" : "silent", orig);
  } else if (cl && si) { /* every rank answered: the failure itself, where it happened */
    rc = why->code ? (plait_result_t)why->code : PLAIT_ERR_TRANSPORT;
    plait_error(rc, "a collective failed in the transport %s%s%s (no rank was lost: every rank "
                "answered rank 0 after it)", why->first, *why->first && *why->then ? "; " : "",
                why->then);
  } else {
    plait_error(rc, "%s", orig);
  }
  free(cl);
  free(si);
  free(state);
  free(why);
  return rc;
}

/* Rank 0's ABORT as the error it carries, or the transport's own. */
static plait_result_t take_verdict(plait_frame_t *f, plait_result_t rc, const char *orig) {
  plait_msg_text_t m;
  int ok = plait_msg_decode_text(f->payload, f->length, 1, &m) == PLAIT_SUCCESS && m.code &&
           m.code < PLAIT_RESULT_COUNT_;
  plait_result_t verdict = ok ? plait_error((plait_result_t)m.code, "%s", m.text)
                              : plait_error(rc, "%s", orig);
  plait_frame_free(f);
  return verdict;
}

/* The failure report: rc and its message, best effort. */
static void report(plait_blame_t *b, plait_result_t rc, const char *orig) {
  plait_request_list_t req = {PLAIT_REQ_FAILED, 0, NULL, b->lists_run};
  plait_writer_t w = {0};
  if (plait_requests_encode_failure(&w, &req, (uint32_t)rc, orig) == PLAIT_SUCCESS)
    plait_control_send_by(b->ctrl, 0, &w, plait_now() + 1.0);
  plait_wr_free(&w);
}

/* Rank > 0: reports rc (its message in plait_last_error()) to rank 0 and
 * returns rank 0's verdict, its message set. */
static plait_result_t plait_blame_peer(plait_blame_t *b, plait_result_t rc) {
  char orig[ORIG_MAX];
  snprintf(orig, sizeof orig, "%s", plait_last_error());
  report(b, rc, orig);
  plait_live_away(b->live); /* rank 0's round sees our heartbeats */
  plait_frame_t f = {0};
  plait_result_t r = PLAIT_SUCCESS;
  int d = drain(b, 0, &f, NULL);
  /* rank 0 may itself wait up to PLAIT_TIMEOUT_S in the transport first,
   * sending heartbeats meanwhile */
  double start = plait_now(), end = start + b->timeout_s + round_s(b) + 1;
  double alive_until = start + round_s(b);
  while (d == 0) {
    double t = plait_now(), until = alive_until < end ? alive_until : end;
    if (t >= until) break;
    struct pollfd p = plait_control_pollfd(b->ctrl, 0);
    if (poll(&p, 1, (int)((until - t) * 1000) + 1) <= 0) continue;
    r = plait_control_recv_any(b->ctrl, 0, end, "rank 0", &f);
    if (r) break; /* rank 0 itself is gone: that is the verdict */
    if (f.type == PLAIT_MSG_ABORT) {
      d = 1;
      break;
    }
    plait_frame_free(&f); /* heartbeats, or lists sent before rank 0 knew */
    alive_until = plait_now() + round_s(b);
  }
  plait_live_back(b->live);
  if (r) return r;
  if (d < 0) return plait_error(PLAIT_ERR_PEER_LOST, "rank 0 was lost: connection closed after "
                                "a collective failed (the transport said: %s)", orig);
  if (d > 0 && f.type == PLAIT_MSG_ABORT) return take_verdict(&f, rc, orig);
  if (plait_now() >= end) return plait_error(rc, "%s", orig);
  return plait_error(PLAIT_ERR_PEER_LOST, "rank 0 was lost: silent for %.1f s after a collective "
                     "failed (PLAIT_TIMEOUT_S=%g; the transport said: %s)", plait_now() - start,
                     b->timeout_s, orig);
}

void plait_blame_init(plait_blame_t *b, plait_control_t *ctrl, plait_live_t *live, int rank,
                      int size, double timeout_s, struct pollfd *pfd) {
  b->ctrl = ctrl;
  b->live = live;
  b->rank = rank;
  b->size = size;
  b->timeout_s = timeout_s;
  b->pfd = pfd;
}

plait_result_t plait_blame_verdict(plait_blame_t *b, plait_result_t rc, int in_transport,
                                   uint64_t lists_run) {
  if (!in_transport || b->size < 2) return rc;
  b->lists_run = lists_run;
  return b->rank == 0 ? plait_blame_root(b, rc) : plait_blame_peer(b, rc);
}
