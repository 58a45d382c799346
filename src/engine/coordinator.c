/* The coordinator thread: drain, announce, (rank 0) decide, execute. One
 * per engine, owning its control plane and transport after start. */
#include "engine/coordinator.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/negotiate/announce.h"
#include "engine/health/blame.h"
#include "engine/negotiate/cache.h"
#include "engine/negotiate/epoch.h"
#include "engine/engine.h"
#include "util/error.h"
#include "engine/execute/execute.h"
#include "engine/submit/handle.h"
#include "engine/tune/list_settings.h"
#include "engine/health/liveness.h"
#include "engine/health/silence.h"
#include "util/affinity.h"
#include "util/log.h"
#include "util/thread_slice.h"
#include "util/waitset.h"
#include "control/messages.h"
#include "engine/negotiate/negotiate.h"
#include "engine/negotiate/tree_and.h"
#include "engine/execute/pending.h"
#include "util/clock.h"
#include "engine/observe/stats.h"
#include "engine/submit/table.h"
#include "engine/observe/timeline.h"
#include "util/spin.h"
#include "engine/coordinator_internal.h"


/* The run-time settings (plait_config_set) as of the start of this cycle: one
 * consistent snapshot, taken under the tunables' lock; then the ones rank 0
 * chose for the lists (PLAIT_AUTOTUNE) over them. */
static plait_result_t apply_tuning(plait_coord_t *c) {
  c->tune = plait_tunables_get(&c->e->tunables);
  plait_result_t rc = plait_ls_decide(&c->lists, &c->tune);
  c->exec.threshold = c->tune.fusion_threshold;
  if (c->rank == 0) {
    c->neg.threshold = c->tune.fusion_threshold;
    c->neg.max_tensor = c->tune.fusion_max_tensor;
    c->neg.hold_s = c->tune.cycle_time_ms * 1e-3;
  }
  return rc;
}

plait_result_t plait_coord_submit(plait_coord_t *c, plait_entry_t **entries, int n) {
  return plait_table_submit(&c->table, entries, n);
}

static void count_bytes(plait_coord_t *c, size_t len, int copies) {
  plait_stats_t *s = plait_stats_lock(&c->e->stats);
  s->control_messages += (uint64_t)copies;
  s->control_bytes += (uint64_t)copies * len;
  plait_stats_unlock(&c->e->stats);
}

static void count_sent(plait_coord_t *c, const plait_writer_t *w, int copies) {
  plait_silence_sent(&c->silence);
  count_bytes(c, w->len, copies);
}

/* Drains new submissions into the local map and the request list. */
plait_result_t plait_coord_take_new(plait_coord_t *c, plait_request_list_t *req) {
  memset(req, 0, sizeof *req);
  plait_table_clear_wake(&c->table);
  plait_entry_t *list = plait_table_drain(&c->table);
  int n = 0;
  for (plait_entry_t *e = list; e; e = e->next) n++;
  if (n && !(req->r = calloc((size_t)n, sizeof *req->r)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory announcing operations");
  uint64_t hits = 0, misses = 0;
  for (plait_entry_t *e = list; e;) {
    plait_entry_t *next = e->next;
    plait_request_t *q = &req->r[req->n++];
    char key[PLAIT_OP_KEY_MAX];
    if (plait_namemap_put(&c->local, plait_op_key(key, e->meta.pset, e->name), e))
      return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory announcing '%s'", e->name);
    if (e->meta.coll == PLAIT_COLL_JOIN) c->exec.joined = 1;
    q->cache_id = plait_cache_lookup(&c->cache, e->name, &e->meta);
    if (q->cache_id >= 0) {
      hits++;
    } else {
      misses++;
      q->name = e->name;  /* borrowed: the entry outlives the message */
      q->meta = e->meta;  /* shallow: encoded before anything is freed */
    }
    e = next;
  }
  plait_stats_t *s = plait_stats_lock(&c->e->stats);
  s->cache_hits += hits;
  s->cache_misses += misses;
  plait_stats_unlock(&c->e->stats);
  return PLAIT_SUCCESS;
}

/* Timeline: agreed, now queued to run. */
void plait_coord_mark_queued(plait_coord_t *c, const plait_response_list_t *l) {
  if (!plait_tl_active(c->e->timeline)) return;
  for (uint32_t i = 0; i < l->n; i++)
    for (uint32_t j = 0; j < l->r[i].n; j++) {
      char key[PLAIT_OP_KEY_MAX];
      if (plait_namemap_get(&c->local, plait_op_key(key, l->r[i].pset, l->r[i].e[j].name))) {
        plait_tl_end(c->e->timeline, l->r[i].e[j].name, plait_tl_name(PLAIT_TL_NEGOTIATE));
        plait_tl_begin(c->e->timeline, l->r[i].e[j].name, plait_tl_name(PLAIT_TL_QUEUE));
      }
    }
}

/* Runs a response list (every rank, same order). */
plait_result_t plait_coord_run_list(plait_coord_t *c, const plait_response_list_t *l) {
  plait_coord_mark_queued(c, l);
  if (l->flags & PLAIT_RESP_SHUTDOWN) { /* refuse new work before any handle completes */
    char why[128];
    c->ended_by = l->shutdown_rank;
    snprintf(why, sizeof why, "plait was shut down: rank %d called plait_shutdown", l->shutdown_rank);
    plait_table_close(&c->table, PLAIT_ERR_SHUTDOWN, why);
  }
  plait_result_t rc = PLAIT_SUCCESS;
  if (l->n) plait_ls_before_run(&c->lists, &c->tune, &c->e->stats);
  plait_live_away(&c->live); /* transport calls and callbacks: heartbeats go on */
  double t0 = plait_now();
  for (uint32_t i = 0; i < l->n && rc == PLAIT_SUCCESS; i++) {
    rc = plait_exec_run(&c->exec, &l->r[i]);
    if (rc) c->transport_failed = rc != PLAIT_ERR_PROTOCOL && rc != PLAIT_ERR_NO_MEMORY;
  }
  plait_live_back(&c->live);
  double t1 = plait_now();
  if (l->n) plait_spin_ran(&c->spin, t1 - t0, t1);
  if (l->n && rc == PLAIT_SUCCESS) plait_ls_after_run(&c->lists, l, &c->e->stats, t1);
  return rc;
}



/* Negotiation time begins: now, and this thread's CPU clock for
 * add_negotiation_time. */
double plait_coord_neg_start(plait_coord_t *c) {
  c->neg_cpu0 = plait_thread_cpu_s();
  return plait_now();
}

/* s seconds of wall time since neg_start, and the CPU this thread used */
void plait_coord_add_negotiation_time(plait_coord_t *c, double s) {
  double cpu = plait_thread_cpu_s() - c->neg_cpu0;
  plait_stats_t *st = plait_stats_lock(&c->e->stats);
  st->negotiate_s += s;
  st->negotiate_cpu_s += cpu > 0 ? cpu : 0;
  plait_stats_unlock(&c->e->stats);
}

/* Whether this rank must send now, a heartbeat if nothing else (silence.h). */
int plait_coord_heartbeat_due(plait_coord_t *c) { return plait_silence_beat_due(&c->silence); }

/* Rank > 0: sends its requests over the star, or up the control tree
 * (tree.h; a heartbeat still over the star, straight to rank 0); a relaying
 * rank's through its AND (tree_and.h). */
plait_result_t plait_coord_send_requests(plait_coord_t *c, const plait_request_list_t *req) {
  plait_writer_t w = {0};
  plait_result_t rc = plait_requests_encode(&w, req);
  int up = plait_tree_sends_up(c->ctrl) || plait_and_on(&c->tand);
  if (rc == PLAIT_SUCCESS && up && (req->n || req->flags)) {
    const uint8_t *p = w.data + PLAIT_WIRE_HEADER_SIZE; /* counted when it goes */
    size_t len = w.len - PLAIT_WIRE_HEADER_SIZE;
    if (plait_and_on(&c->tand)) rc = plait_and_payload(&c->tand, c->rank, p, len, plait_now());
    else plait_tree_up_add(c->ctrl, c->rank, p, len);
    plait_wr_free(&w);
    if (rc || !plait_coord_heartbeat_due(c)) return rc;
    plait_request_list_t beat = {0, 0, NULL, req->acked};
    rc = plait_requests_encode(&w, &beat);
  }
  if (rc == PLAIT_SUCCESS) rc = plait_control_send(c->ctrl, 0, &w);
  if (rc == PLAIT_SUCCESS) count_sent(c, &w, 1);
  plait_wr_free(&w);
  return rc;
}

/* Rank > 0 with children in the control tree: what its subtree announced
 * (and its own announcements) go up in one frame (tree.h). */
static plait_result_t forward_up(plait_coord_t *c, int polled, int *busy) {
  plait_tree_t *t = &c->ctrl->tree;
  if (!t->fanout) return PLAIT_SUCCESS;
  for (int i = 0; polled && i < t->nchildren; i++) PLAIT_CHECK(plait_tree_up_read(c->ctrl, i));
  if (plait_and_on(&c->tand)) plait_and_tick(&c->tand, plait_now()); /* held too long: detail */
  if (!t->up_count) return PLAIT_SUCCESS;
  size_t bytes = 0;
  PLAIT_CHECK(plait_tree_up_flush(c->ctrl, &bytes));
  count_bytes(c, bytes, 1);
  *busy = 1;
  return PLAIT_SUCCESS;
}

/* Whether a list (or the link closing) waits on the control-tree parent link. */
static int tree_readable(plait_coord_t *c) {
  struct pollfd p = {c->ctrl->tree.parent_fd, POLLIN, 0};
  return plait_tree_has_parent_link(c->ctrl) && p.fd >= 0 && poll(&p, 1, 0) > 0;
}

/* Rank > 0: announce what is new, run what rank 0 decided (readable: from
 * rank 0 over the star; from_parent: from the control-tree parent). */
static plait_result_t peer_cycle(plait_coord_t *c, int woke, int readable, int from_parent,
                                 int polled, int *busy) {
  double t0 = plait_coord_neg_start(c);
  /* read before draining: what was submitted before plait_shutdown on this
   * rank is then announced before the shutdown is */
  int stopping = atomic_load(&c->stop);
  double hold_s = c->tune.cycle_time_ms * 1e-3, until = plait_announce_until(&c->ann, hold_s);
  if (c->ep.open) {
    PLAIT_CHECK(plait_coord_peer_epoch(c, busy)); /* counts its own negotiation time */
    t0 = plait_coord_neg_start(c);
  }
  if (c->ep.open) {
  } else if (woke || (until > 0 && t0 >= until) || (stopping && !c->sent_shutdown) || plait_coord_heartbeat_due(c)) {
    plait_request_list_t req;
    plait_result_t rc = plait_coord_take_new(c, &req);
    if (rc == PLAIT_SUCCESS && stopping && !c->sent_shutdown) {
      req.flags |= PLAIT_REQ_SHUTDOWN;
      c->sent_shutdown = 1;
      c->shutdown_sent_at = plait_now();
    }
    if (rc == PLAIT_SUCCESS) /* cached allreduces may wait for their burst (announce.h) */
      plait_announce_merge(&c->ann, &req, !plait_coord_heartbeat_due(c) && !c->exec.joined, &c->cache,
                           c->tune.fusion_threshold, hold_s, t0);
    plait_table_await(&c->table, c->ann.missing); /* no wake-up per companion */
    req.acked = c->lists_run;
    if (rc == PLAIT_SUCCESS && (req.n || req.flags || plait_coord_heartbeat_due(c))) {
      rc = plait_coord_send_requests(c, &req);
      *busy = 1;
    }
    free(req.r);
    PLAIT_CHECK(rc);
  }
  PLAIT_CHECK(forward_up(c, polled, busy));
  while (readable || from_parent) {
    plait_frame_t f;
    if (from_parent) { /* the control tree: lists only (control/tree.h) */
      PLAIT_CHECK(plait_tree_recv(c->ctrl, &f));
      if (!f.type) break; /* the parent's link closed: rank 0 names who was lost */
    } else {
      PLAIT_CHECK(plait_control_recv_polled(c->ctrl, 0, PLAIT_MSG_RESPONSES, &f));
    }
    plait_silence_heard(&c->silence, 0, plait_now());
    if (f.type == PLAIT_MSG_ALIVE) { /* rank 0 is away; it may be asking who is here */
      c->answer_alive = 1;
      readable = plait_control_readable(c->ctrl, 0);
      continue;
    }
    if (plait_tree_has_parent_link(c->ctrl) && !from_parent) {
      plait_frame_free(&f);
      return plait_control_fail(c->ctrl, plait_error(PLAIT_ERR_PROTOCOL, "rank 0 sent a response "
                                                     "list over the star to a rank that takes "
                                                     "them from its control-tree parent"));
    }
    plait_result_t rc = plait_tree_relay(c->ctrl, &f); /* the children's turn first */
    if (rc) {
      plait_frame_free(&f);
      return rc;
    }
    if (c->ctrl->tree.nchildren) /* relayed: counted as this rank's control bytes */
      count_bytes(c, PLAIT_WIRE_HEADER_SIZE + (size_t)f.length, c->ctrl->tree.nchildren);
    plait_response_list_t l;
    rc = plait_responses_decode(f.payload, f.length, &l);
    plait_frame_free(&f);
    if (rc) return plait_error_context(rc, "from rank 0");
    rc = plait_cache_resolve_responses(&c->cache, &c->local, &l);
    plait_and_ran(&c->tand, &l);
    if (l.flags & PLAIT_RESP_TUNING) { /* this list and the next run with rank 0's settings */
      plait_ls_receive(&c->lists, &l);
      if (rc == PLAIT_SUCCESS) rc = apply_tuning(c);
    }
    *busy = 1;
    plait_coord_add_negotiation_time(c, plait_now() - t0);
    if (rc == PLAIT_SUCCESS && c->ep.open && l.n)
      rc = plait_control_fail(c->ctrl, plait_error(PLAIT_ERR_PROTOCOL, "rank 0 sent a response "
                                                   "list during a cached epoch"));
    if (rc == PLAIT_SUCCESS) rc = plait_coord_run_list(c, &l);
    plait_announce_ran(&c->ann, &l);
    c->lists_run++;
    if (rc == PLAIT_SUCCESS) rc = plait_coord_maybe_open_epoch(c, &l);
    t0 = plait_coord_neg_start(c);
    plait_silence_heard(&c->silence, 0, t0); /* rank 0 was in those collectives too */
    int done = (l.flags & PLAIT_RESP_SHUTDOWN) != 0;
    if (done) PLAIT_DEBUG("coord", "rank %d ended coordination", l.shutdown_rank);
    plait_responses_free(&l);
    PLAIT_CHECK(rc);
    if (done) return CYCLE_DONE;
    readable = plait_control_readable(c->ctrl, 0);
    from_parent = !readable && tree_readable(c);
  }
  plait_coord_add_negotiation_time(c, plait_now() - t0);
  if (c->answer_alive) { /* once for all the heartbeats just read */
    c->answer_alive = 0;
    plait_request_list_t beat = {0, 0, NULL, c->lists_run};
    plait_writer_t w = {0};
    plait_result_t rc = plait_requests_encode(&w, &beat);
    if (rc == PLAIT_SUCCESS) rc = plait_control_send(c->ctrl, 0, &w);
    if (rc == PLAIT_SUCCESS) count_sent(c, &w, 1);
    plait_wr_free(&w);
    PLAIT_CHECK(rc);
  }
  return PLAIT_SUCCESS;
}

/* Rank 0 records one rank's requests. */
plait_result_t plait_coord_root_take(plait_coord_t *c, int rank, const plait_request_list_t *req,
                                uint32_t fail_code, const char *fail_text) {
  for (uint32_t i = 0; i < req->n; i++) {
    const char *name = NULL;
    const plait_meta_t *meta = NULL;
    PLAIT_CHECK(plait_cache_resolve(&c->cache, rank, &req->r[i], &name, &meta));
    PLAIT_CHECK(plait_neg_add(&c->neg, rank, name, meta, req->r[i].cache_id,
                              rank == 0 ? UINT64_MAX : req->acked));
  }
  if ((req->flags & PLAIT_REQ_SHUTDOWN) && c->neg.shutdown_rank < 0) c->neg.shutdown_rank = rank;
  if (req->flags & PLAIT_REQ_FAILED) { /* a collective failed there but not here */
    c->transport_failed = 1;
    return plait_blame_reported(&c->blame, rank, fail_code, fail_text);
  }
  return PLAIT_SUCCESS;
}

/* Rank 0 records one REQUESTS payload of rank. */
static plait_result_t root_take_frame(plait_coord_t *c, int rank, const uint8_t *p, size_t n) {
  plait_request_list_t req;
  uint32_t fail_code = 0;
  char *fail_text = NULL;
  plait_result_t rc = plait_requests_decode_failure(p, n, &req, &fail_code, &fail_text);
  if (rc) return plait_error_context(rc, "from rank %d", rank);
  rc = plait_coord_root_take(c, rank, &req, fail_code, fail_text);
  plait_requests_free(&req);
  free(fail_text);
  return rc;
}

/* Rank 0: one payload relayed up the control tree (tree.h), recorded as
 * its origin's own. */
static plait_result_t take_relayed_cb(void *arg, int origin, const uint8_t *p, size_t len) {
  plait_coord_t *c = arg;
  plait_silence_heard(&c->silence, origin, plait_now());
  return root_take_frame(c, origin, p, len);
}

/* Rank 0: an AND of a cached id relayed up the control tree (tree_and.h),
 * recorded once for the ranks it covers (plait_neg_add_cover). */
static plait_result_t take_and_cb(void *arg, const plait_tree_and_t *a) {
  plait_coord_t *c = arg;
  plait_request_t q = {NULL, a->id, {0}};
  const char *name = NULL;
  const plait_meta_t *meta = NULL;
  int k = a->one ? 0 : c->ctrl->tree.fanout;
  PLAIT_CHECK(plait_cache_resolve(&c->cache, (int)a->root, &q, &name, &meta));
  plait_silence_heard_subtree(&c->silence, (int)a->root, k, plait_now());
  return plait_neg_add_cover(&c->neg, (int)a->root, k, name, meta, a->id, a->acked);
}

static plait_result_t root_receive(plait_coord_t *c, int rank, int *busy) {
  for (;;) {
    plait_frame_t f;
    PLAIT_CHECK(plait_control_recv_polled(c->ctrl, rank, PLAIT_MSG_REQUESTS, &f));
    plait_silence_heard(&c->silence, rank, plait_now());
    if (f.type == PLAIT_MSG_ALIVE) {
      if (!plait_control_readable(c->ctrl, rank)) return PLAIT_SUCCESS;
      continue;
    }
    plait_result_t rc = f.type == PLAIT_MSG_RELAYED
                          ? plait_tree_each_item(c->ctrl, rank, &f, take_relayed_cb, take_and_cb, c)
                                                    : root_take_frame(c, rank, f.payload, f.length);
    plait_frame_free(&f);
    PLAIT_CHECK(rc);
    *busy = 1;
    if (!plait_control_readable(c->ctrl, rank)) return PLAIT_SUCCESS;
  }
}

/* Rank 0: take everyone's announcements, decide, tell everyone, run. */
static plait_result_t root_cycle(plait_coord_t *c, int woke, int *busy) {
  double t0 = plait_coord_neg_start(c);
  int stopping = atomic_load(&c->stop); /* before draining: see peer_cycle */
  if (c->ep.open) {
    PLAIT_CHECK(plait_coord_epoch_turn(c, busy, -1)); /* counts its own negotiation time */
    t0 = plait_coord_neg_start(c);
  }
  if (c->ep.open) {
  } else if (woke || stopping || c->lazy) {
    plait_request_list_t req;
    plait_result_t rc = plait_coord_take_new(c, &req);
    if (rc == PLAIT_SUCCESS) rc = plait_coord_root_take(c, 0, &req, 0, NULL);
    free(req.r);
    PLAIT_CHECK(rc);
    if (stopping && c->neg.shutdown_rank < 0) c->neg.shutdown_rank = 0;
    *busy |= req.n > 0;
  }
  for (int r = 1; r < c->size; r++)
    if (c->pfd[r].revents) PLAIT_CHECK(root_receive(c, r, busy));
  plait_response_list_t l;
  int any = 0, done = c->neg.shutdown_rank >= 0;
  if (done) {
    char why[128];
    snprintf(why, sizeof why, "rank %d shut down (plait_shutdown) before every rank submitted it",
             c->neg.shutdown_rank);
    PLAIT_CHECK(plait_neg_fail_all(&c->neg, PLAIT_ERR_SHUTDOWN, why, &l));
    l.flags |= PLAIT_RESP_SHUTDOWN;
    l.shutdown_rank = c->neg.shutdown_rank;
  } else if (c->ep.open) { /* nothing is planned while every rank agrees by itself */
    memset(&l, 0, sizeof l);
  } else {
    PLAIT_CHECK(plait_neg_plan(&c->neg, plait_now(), &l, &any));
  }
  plait_result_t rc = PLAIT_SUCCESS;
  if (any) plait_ls_attach(&c->lists, &l); /* planned with new settings: say so */
  if (any && plait_coord_epoch_may_open(c) && plait_epoch_may_open(&l, 1)) l.flags |= PLAIT_RESP_EPOCH;
  if (any || done || plait_coord_heartbeat_due(c)) { /* an empty list is a heartbeat */
    plait_writer_t w = {0};
    rc = plait_responses_encode(&w, &l);
    /* the star: every rank; the control tree: rank 0's children relay it */
    int last = c->ctrl->tree.fanout ? c->ctrl->tree.nchildren : c->size - 1;
    for (int r = 1; r <= last && rc == PLAIT_SUCCESS; r++)
      rc = plait_control_send(c->ctrl, r, &w);
    if (rc == PLAIT_SUCCESS) count_sent(c, &w, last);
    c->neg.lists_sent++;
    plait_wr_free(&w);
    *busy = 1;
  }
  plait_coord_add_negotiation_time(c, plait_now() - t0);
  if (rc == PLAIT_SUCCESS && (any || done)) {
    rc = plait_coord_run_list(c, &l);
    plait_silence_all_busy(&c->silence); /* everyone was in those collectives */
    if (rc == PLAIT_SUCCESS) rc = plait_coord_maybe_open_epoch(c, &l);
  }
  plait_responses_free(&l);
  PLAIT_CHECK(rc);
  return done ? CYCLE_DONE : PLAIT_SUCCESS;
}

static int poll_timeout_ms(plait_coord_t *c) {
  int ms = 1000;
  if (c->rank == 0 && (c->neg.records.count || c->neg.nready)) ms = 100; /* stall checks */
  if (c->sent_shutdown) ms = 100;
  int beat = (int)(c->cfg->timeout_s * 1000 / 8); /* wake twice per heartbeat period */
  ms = beat < ms ? (beat > 1 ? beat : 1) : ms;
  /* operations wait for companions (rank 0: ready ones; others: announce.h): until then */
  double until = c->rank == 0 ? plait_neg_hold_until(&c->neg)
                              : plait_announce_until(&c->ann, c->tune.cycle_time_ms * 1e-3);
  if (c->ep.open) until = plait_epoch_until(&c->ep); /* nothing else waits meanwhile */
  double held = plait_and_on(&c->tand) ? plait_and_until(&c->tand) : 0; /* tree_and.h */
  if (held > 0 && (until <= 0 || held < until)) until = held;
  if (until > 0) { /* compared as a double: a day's hold does not fit an int of ms */
    double left_ms = (until - plait_now()) * 1000;
    if (left_ms < ms) ms = left_ms <= 0 ? 0 : (int)left_ms + 1;
  }
  return ms;
}

/* Rank 0 with nothing pending: no operation of the global process set can
 * become ready before another rank announces it, and that announcement wakes
 * this thread anyway. So its own submissions need not wake it: it drains them
 * when the announcement (or a timeout) comes, and a lone operation costs one
 * cycle here, not two (plait_table_set_lazy). Entries then wait for their
 * record at most one poll timeout (1 s) when no other rank ever speaks:
 * their stall warning comes that much later. */
static int root_may_sleep(plait_coord_t *c) {
  return c->size > 1 && !atomic_load(&c->stop) && c->neg.records.count == 0 &&
         c->neg.nready == 0 && !c->neg.holding && c->neg.njoined == 0 && !c->exec.joined &&
         c->neg.shutdown_rank < 0 && !c->ep.open;
}

/* Rank > 0: the open control-tree links (parent, children) after pfd[n-1];
 * the new count. */
static int tree_pollfds(plait_coord_t *c, int n) {
  const plait_tree_t *t = &c->ctrl->tree;
  if (!t->fanout) return n;
  if (t->parent_fd >= 0) c->pfd[n++] = (struct pollfd){t->parent_fd, POLLIN, 0};
  for (int i = 0; i < t->nchildren; i++)
    if (t->child_fds[i] >= 0) c->pfd[n++] = (struct pollfd){t->child_fds[i], POLLIN, 0};
  return n;
}

/* One wait and one cycle; CYCLE_DONE when coordination ended. */
static plait_result_t cycle(plait_coord_t *c) {
  int n = 1;
  c->pfd[0] = (struct pollfd){c->table.wake_fd, POLLIN, 0};
  if (c->size > 1) {
    if (c->rank == 0)
      for (int r = 1; r < c->size; r++) c->pfd[n++] = plait_control_pollfd(c->ctrl, r);
    else
      c->pfd[n++] = plait_control_pollfd(c->ctrl, 0);
    if (c->rank > 0) n = tree_pollfds(c, n); /* the control tree's links, when open */
  }
  int waiting = 0; /* rank 0: submissions made while it was lazy are waiting */
  if (c->rank == 0) {
    c->lazy = root_may_sleep(c);
    waiting = plait_table_set_lazy(&c->table, c->lazy);
  }
  /* PLAIT_CALLER_RUNS: a lone burst's submissions may run in their waits */
  waiting |= plait_table_set_lone(&c->table, c->turn && c->ep.open && c->ep.n == 1);
  /* read while this thread holds the turn: a caller's round changes the
   * epoch and the records it looks at (a stale bound only wakes it early;
   * a caller that needs it writes the eventfd) */
  int timeout = waiting ? 0 : poll_timeout_ms(c);
  if (c->turn && plait_turn_coord_release(c->turn)) waiting = 1, timeout = 0; /* a knock */
  /* right after work, the next frame or submission usually comes soon */
  int ready = timeout ? plait_spin_poll(&c->spin, &c->waitset, c->pfd, n,
                                        c->last_busy + c->spin.spin_s) : 0;
  if (ready == 0) ready = plait_waitset_poll(&c->waitset, c->pfd, n, timeout);
  int knocked = 0;
  if (c->turn) plait_turn_coord_claim(c->turn, &knocked); /* waits out a caller's round */
  waiting |= knocked;
  if (c->caller_rc) { /* as if this thread's own collective had failed */
    c->transport_failed = 1;
    return plait_error(c->caller_rc, "%s", c->caller_msg);
  }
  PLAIT_CHECK(apply_tuning(c));
  if (ready < 0 && errno != EINTR)
    return plait_error(PLAIT_ERR_SYSTEM, "coordinator poll failed: %s", strerror(errno));
  /* No batching wait here: what is submitted is announced at once, and rank
   * 0 decides in its tick whether ready operations wait for companions
   * (negotiate.h, hold_s), the same decision for every rank. */
  int woke = (ready > 0 && c->pfd[0].revents) || waiting;
  int busy = 0;
  /* device work that finished meanwhile (pending.h): its handles complete */
  plait_result_t rc = plait_pending_reap(c->exec.pending, &c->exec);
  if (rc) {
    c->transport_failed = 1;
    return rc;
  }
  if (c->rank == 0)
    rc = root_cycle(c, woke, &busy);
  else
    rc = peer_cycle(c, woke, c->size > 1 && ready > 0 && c->pfd[1].revents,
                    ready > 0 && tree_readable(c), ready > 0, &busy);
  plait_stats_t *s = plait_stats_lock(&c->e->stats);
  s->cycles++;
  s->busy_cycles += busy != 0;
  plait_stats_unlock(&c->e->stats);
  if (busy) plait_tl_mark_cycle(c->e->timeline);
  if (busy) c->last_busy = plait_now();
  if (rc == PLAIT_SUCCESS) rc = plait_silence_check(&c->silence);
  if (rc == PLAIT_SUCCESS) rc = plait_tree_check(c->ctrl); /* a lost parent, unnamed by rank 0 */
  if (rc == PLAIT_SUCCESS && c->sent_shutdown &&
      plait_now() - c->shutdown_sent_at > 2 * c->cfg->timeout_s + 1)
    rc = plait_error(PLAIT_ERR_PEER_LOST, "rank 0 was lost: it did not end coordination within "
                     "%g s of this rank's shutdown", 2 * c->cfg->timeout_s + 1);
  return rc;
}

/* The coordinator thread asks for short turns on the CPU (util/thread_slice.h):
 * 0.1 ms, the least. Woken by a frame or a submission on a CPU that a
 * CPU-bound task holds, it then runs at once instead of after that task's
 * slice. Measured: with two busy loops on a 2-core machine, a lone 4 KiB
 * allreduce took about 2-3.5 ms per operation in 6 runs of 20, none with it. */
static void ask_short_turns(void) {
  if (plait_thread_short_slice(100 * 1000) < 0)
    PLAIT_DEBUG("coord", "no short scheduler slice for the coordinator: %s", strerror(errno));
}

static void *coordinator_main(void *arg) {
  plait_coord_t *c = arg;
  ask_short_turns();
  plait_handle_mark_coordinator_thread();
  plait_engine_bind_thread(c->e); /* completion callbacks reach their own engine */
  plait_log_set_thread_rank(c->rank);
  int knocked;
  if (c->turn) plait_turn_coord_claim(c->turn, &knocked); /* held but while it polls */
  for (;;) {
    plait_result_t rc = cycle(c);
    if (rc == CYCLE_DONE) break;
    if (rc != PLAIT_SUCCESS) {
      rc = plait_blame_verdict(&c->blame, rc, c->transport_failed, c->lists_run); /* blame.h */
      char msg[2048];
      snprintf(msg, sizeof msg, "%s", plait_last_error());
      if (c->turn) plait_turn_kill(c->turn); /* no caller's round again */
      plait_table_close(&c->table, rc, msg); /* refuse new work before completing any */
      plait_control_fail(c->ctrl, plait_error(rc, "%s", msg)); /* rank 0 tells the others */
      PLAIT_ERROR("coord", "the job failed: %s", msg);
      plait_exec_settle(&c->exec, rc, msg); /* interrupt, then outstanding device work fails */
      plait_exec_fail_all(&c->exec, rc, msg, c->ended_by);
      return NULL;
    }
  }
  if (c->turn) plait_turn_kill(c->turn);
  plait_exec_settle(&c->exec, PLAIT_SUCCESS, "plait was shut down"); /* device work finishes */
  plait_exec_fail_all(&c->exec, PLAIT_ERR_SHUTDOWN,
                     "plait was shut down (plait_shutdown) on this or another rank", c->ended_by);
  return NULL;
}

/* Allocates what a cycle needs; c->e, rank, size and cfg are set. */
static plait_result_t coord_alloc(plait_coord_t *c) {
  PLAIT_CHECK(plait_table_open(&c->table));
  c->table.tl = c->e->timeline;
  if (PLAIT_TRANSPORT_HAS(c->t, notify) && /* device work completes asynchronously */
      !(c->exec.pending = plait_pending_new(c->table.wake_fd, c->cfg->timeout_s)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  uint64_t cap = c->cfg->cache_capacity;
  PLAIT_CHECK(plait_cache_init(&c->cache, (int)(cap > 1 << 24 ? 1 << 24 : cap)));
  if (plait_namemap_init(&c->local))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  if (c->rank == 0) PLAIT_CHECK(plait_neg_init(&c->neg, c->size, c->cfg, &c->cache));
  c->neg.psets = c->e->psets;
  c->neg.device_solo = !PLAIT_TRANSPORT_HAS(c->t, batch_copy); /* nothing else fills the buffer */
  if (!(c->pfd = calloc((size_t)c->size + 1, sizeof *c->pfd)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  PLAIT_CHECK(plait_silence_init(&c->silence, c->rank, c->size, c->cfg->timeout_s));
  plait_blame_init(&c->blame, c->ctrl, &c->live, c->rank, c->size, c->cfg->timeout_s, c->pfd);
  plait_announce_init(&c->ann);
  plait_epoch_init(&c->ep);
  /* PLAIT_CALLER_RUNS (turn.h); auto: where a wait can leave the agreement
   * at its timeout (the transport's vote), so a stopped peer holds no wait */
  int caller_runs = c->e->caller_runs < 0 ? PLAIT_TRANSPORT_HAS(c->t, vote) : c->e->caller_runs;
  if (caller_runs && c->size > 1 &&
      !(c->turn = c->table.turn = plait_turn_new(plait_coord_caller_round, plait_coord_wake, c)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  return plait_and_init(&c->tand, c->ctrl, &c->cache,
                        plait_and_hold_s(c->cfg->stall_warn_s, c->cfg->stall_abort_s,
                                         c->cfg->cycle_time_ms * 1e-3));
}

plait_result_t plait_coord_start(plait_engine_t *e, plait_coord_t **out) {
  plait_coord_t *c = calloc(1, sizeof *c);
  if (!c) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  pthread_mutex_init(&c->table.mu, NULL);
  c->e = e;
  c->cfg = &e->cfg;
  c->ctrl = &e->ctrl;
  c->rank = e->topo.rank;
  c->size = e->topo.size;
  c->t = e->plugin.table;
  c->ended_by = -1;
  c->table.wake_fd = -1;
  plait_waitset_init(&c->waitset);
  plait_spin_init(&c->spin, c->cfg->spin_us);
  plait_stats_clear(&e->stats);
  plait_exec_init(&c->exec, c->rank, c->size, e->plugin.table, e->plugin.state, &c->table,
                  &c->local);
  c->exec.stats = &e->stats;
  c->exec.tl = e->timeline;
  c->exec.psets = e->psets;
  c->exec.hier = e->hier;
  plait_ls_init(&c->lists, c->cfg, c->rank);
  plait_result_t rc = apply_tuning(c); /* a tuner that cannot start fails plait_init */
  if (rc == PLAIT_SUCCESS) rc = coord_alloc(c);
  if (rc == PLAIT_SUCCESS && c->size > 1) /* heartbeats while away (liveness.h) */
    rc = plait_live_start(&c->live, c->ctrl, plait_blame_live_period_s(c->cfg->timeout_s));
  if (rc == PLAIT_SUCCESS) /* on PLAIT_THREAD_AFFINITY's CPU, when it gives one */
    rc = plait_thread_start(&c->thread, coordinator_main, c, "plait-coord", e->coord_cpu);
  if (rc) {
    plait_live_stop(&c->live);
    plait_coord_free(c);
    return rc;
  }
  c->started = 1;
  *out = c;
  return PLAIT_SUCCESS;
}

void plait_coord_stop(plait_coord_t *c) {
  if (!c || !c->started) return;
  atomic_store(&c->stop, 1);
  uint64_t one = 1;
  if (write(c->table.wake_fd, &one, sizeof one) < 0) { /* already awake */
  }
  pthread_join(c->thread, NULL);
  plait_live_stop(&c->live);
  c->started = 0;
  plait_table_close(&c->table, PLAIT_ERR_NOT_INITIALIZED,
                    "plait is not initialized (it was shut down)");
  plait_exec_fail_all(&c->exec, PLAIT_ERR_SHUTDOWN, "plait was shut down", c->ended_by);
  plait_exec_free(&c->exec); /* transport memory: before the transport goes */
}

void plait_coord_free(plait_coord_t *c) {
  if (!c) return;
  plait_coord_stop(c);
  if (c->rank == 0) plait_neg_free(&c->neg);
  plait_ls_free(&c->lists);
  plait_namemap_free(&c->local);
  plait_cache_free(&c->cache);
  plait_announce_free(&c->ann);
  plait_and_free(&c->tand);
  plait_epoch_free(&c->ep);
  plait_turn_unref(c->turn); /* handles may still hold it */
  plait_table_destroy(&c->table);
  pthread_mutex_destroy(&c->table.mu);
  free(c->pfd);
  plait_silence_free(&c->silence);
  plait_waitset_free(&c->waitset);
  free(c);
}
