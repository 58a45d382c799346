/* The coordinator thread: drain, announce, (rank 0) decide, execute. One
 * per process, owning the control plane and the transport after init. */
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

#include "engine/cache.h"
#include "util/error.h"
#include "engine/execute.h"
#include "engine/handle.h"
#include "util/log.h"
#include "util/waitset.h"
#include "control/messages.h"
#include "engine/negotiate.h"
#include "control/net.h"
#include "engine/stats.h"
#include "engine/table.h"
#include "engine/timeline.h"

typedef struct coord {
  pthread_t thread;
  int started;
  plait_table_t table;
  const plait_config_t *cfg;
  plait_control_t *ctrl;
  int rank, size;
  const plait_transport_t *t;
  plait_cache_t cache;
  plait_negotiator_t neg; /* rank 0 */
  plait_namemap_t local;  /* name -> entry announced, waiting for its response */
  plait_exec_t exec;
  atomic_int stop;
  int sent_shutdown;
  double shutdown_sent_at;
  double last_cycle;
  struct pollfd *pfd;
  plait_waitset_t waitset; /* rank 0: one socket per rank, waited on with epoll */
  /* liveness: when this rank last sent, and last heard from each rank */
  double last_sent;
  double *last_heard; /* rank 0: per rank; others: [0] is rank 0 */
  uint64_t lists_run;    /* response lists run so far (peers send it as acked) */
  int transport_failed; /* the failure came from running a collective */
  int failed_reporter;  /* rank 0: a peer that reported its transport failed */
  double cycle_time_ms; /* PLAIT_CYCLE_TIME_MS, changeable while running */
  int ended_by;         /* the rank whose plait_shutdown ended coordination, -1 */
} coord_t;


static coord_t C = {.table.mu = PTHREAD_MUTEX_INITIALIZER};

/* Settings changed while running (plait_config_set), applied by the
 * coordinator thread at the start of its next cycle. */
static atomic_int tune_pending;
static _Atomic uint64_t tune_threshold;
static _Atomic uint64_t tune_max_tensor;
static _Atomic double tune_cycle_time_ms;

void plait_coord_tune(uint64_t fusion_threshold, uint64_t fusion_max_tensor,
                      double cycle_time_ms) {
  atomic_store(&tune_threshold, fusion_threshold);
  atomic_store(&tune_max_tensor, fusion_max_tensor);
  atomic_store(&tune_cycle_time_ms, cycle_time_ms);
  atomic_store(&tune_pending, 1);
}

static void apply_tuning(void) {
  if (!atomic_exchange(&tune_pending, 0)) return;
  uint64_t threshold = atomic_load(&tune_threshold);
  C.cycle_time_ms = atomic_load(&tune_cycle_time_ms);
  C.exec.threshold = threshold;
  if (C.rank == 0) {
    C.neg.threshold = threshold;
    C.neg.max_tensor = atomic_load(&tune_max_tensor);
  }
}
static atomic_int running_size;
static atomic_ullong running_caps;

int plait_coord_size(void) { return atomic_load(&running_size); }
uint64_t plait_coord_caps(void) { return atomic_load(&running_caps); }

plait_result_t plait_coord_submit(plait_entry_t **entries, int n) {
  if (!atomic_load(&running_size))
    return plait_error(PLAIT_ERR_NOT_INITIALIZED, "plait is not initialized (call plait_init first)");
  return plait_table_submit(&C.table, entries, n);
}

static void count_sent(const plait_writer_t *w, int copies) {
  C.last_sent = plait_now();
  plait_stats_t *s = plait_stats_lock();
  s->control_messages += (uint64_t)copies;
  s->control_bytes += (uint64_t)copies * w->len;
  plait_stats_unlock();
}

typedef struct {
  plait_entry_t **out;
  size_t *k;
} collect_t;

static void collect_entry(const char *key, void *value, void *arg) {
  (void)key;
  collect_t *c = arg;
  c->out[(*c->k)++] = value;
}

/* What an operation still pending when coordination ended says: the rank
 * whose plait_shutdown ended it, when known, else msg. */
static void pending_message(char *out, size_t len, const char *name, const char *msg) {
  if (C.ended_by >= 0)
    snprintf(out, len, "'%s' was pending: rank %d shut down (plait_shutdown) before every rank "
             "submitted it", name, C.ended_by);
  else
    snprintf(out, len, "%s", msg);
}

/* Every entry still waiting fails with rc; later submissions too. */
static void fail_everything(plait_result_t rc, const char *msg) {
  plait_table_close(&C.table, rc, msg);
  for (plait_entry_t *e = plait_table_drain(&C.table); e;) {
    plait_entry_t *next = e->next;
    plait_namemap_put(&C.local, e->name, e);
    e = next;
  }
  size_t n = C.local.count, k = 0;
  plait_entry_t **all = n ? malloc(sizeof *all * n) : NULL;
  if (all) plait_namemap_each(&C.local, collect_entry, &(collect_t){all, &k});
  char why[PLAIT_WIRE_MAX_STRING + 256];
  for (size_t i = 0; i < k; i++) {
    pending_message(why, sizeof why, all[i]->name, msg);
    plait_exec_finish(&C.exec, all[i], rc, why);
  }
  free(all);
  while (C.local.count) { /* only if the snapshot could not be allocated */
    plait_entry_t *first = NULL;
    for (size_t b = 0; b < C.local.nbuckets && !first; b++)
      if (C.local.buckets[b]) first = C.local.buckets[b]->value;
    pending_message(why, sizeof why, first->name, msg);
    plait_exec_finish(&C.exec, first, rc, why);
  }
}

/* Resolves a request by cache id into name and metadata. */
static plait_result_t resolve(int rank, const plait_request_t *q, const char **name,
                              const plait_meta_t **meta) {
  if (q->cache_id < 0) {
    *name = q->name;
    *meta = &q->meta;
    return PLAIT_SUCCESS;
  }
  const plait_cache_slot_t *s = plait_cache_get(&C.cache, q->cache_id);
  if (!s)
    return plait_error(PLAIT_ERR_PROTOCOL, "rank %d announced response cache id %d, which was "
                       "never assigned", rank, q->cache_id);
  *name = s->name;
  *meta = &s->meta;
  return PLAIT_SUCCESS;
}

/* Drains new submissions into the local map and the request list. */
static plait_result_t take_new(plait_request_list_t *req) {
  memset(req, 0, sizeof *req);
  plait_table_clear_wake(&C.table);
  plait_entry_t *list = plait_table_drain(&C.table);
  int n = 0;
  for (plait_entry_t *e = list; e; e = e->next) n++;
  if (n && !(req->r = calloc((size_t)n, sizeof *req->r)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory announcing operations");
  uint64_t hits = 0, misses = 0;
  for (plait_entry_t *e = list; e;) {
    plait_entry_t *next = e->next;
    plait_request_t *q = &req->r[req->n++];
    if (plait_namemap_put(&C.local, e->name, e))
      return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory announcing '%s'", e->name);
    if (e->meta.coll == PLAIT_COLL_JOIN) C.exec.joined = 1;
    q->cache_id = plait_cache_lookup(&C.cache, e->name, &e->meta);
    if (q->cache_id >= 0) {
      hits++;
    } else {
      misses++;
      q->name = e->name;  /* borrowed: the entry outlives the message */
      q->meta = e->meta;  /* shallow: encoded before anything is freed */
    }
    e = next;
  }
  plait_stats_t *s = plait_stats_lock();
  s->cache_hits += hits;
  s->cache_misses += misses;
  plait_stats_unlock();
  return PLAIT_SUCCESS;
}

/* Timeline: agreed, now queued to run. */
static void mark_queued(const plait_response_list_t *l) {
  if (!plait_tl_active()) return;
  for (uint32_t i = 0; i < l->n; i++)
    for (uint32_t j = 0; j < l->r[i].n; j++)
      if (plait_namemap_get(&C.local, l->r[i].e[j].name)) {
        plait_tl_end(l->r[i].e[j].name, "NEGOTIATE");
        plait_tl_begin(l->r[i].e[j].name, "QUEUE");
      }
}

/* Runs a response list (every rank, same order). */
static plait_result_t run_list(const plait_response_list_t *l) {
  mark_queued(l);
  if (l->flags & PLAIT_RESP_SHUTDOWN) { /* refuse new work before any handle completes */
    char why[128];
    C.ended_by = l->shutdown_rank;
    snprintf(why, sizeof why, "plait was shut down: rank %d called plait_shutdown", l->shutdown_rank);
    plait_table_close(&C.table, PLAIT_ERR_SHUTDOWN, why);
  }
  for (uint32_t i = 0; i < l->n; i++) {
    plait_result_t rc = plait_exec_run(&C.exec, &l->r[i]);
    if (rc) {
      C.transport_failed = rc != PLAIT_ERR_PROTOCOL && rc != PLAIT_ERR_NO_MEMORY;
      return rc;
    }
  }
  return PLAIT_SUCCESS;
}


#define CYCLE_DONE ((plait_result_t)-1) /* coordination ended normally */

static void sleep_until(double t) {
  double left = t - plait_now();
  if (left <= 0) return;
  struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
  nanosleep(&ts, NULL);
}

static void add_negotiation_time(double s) {
  plait_stats_t *st = plait_stats_lock();
  st->negotiate_s += s;
  plait_stats_unlock();
}

/* A rank that has sent nothing for a quarter of PLAIT_TIMEOUT_S sends an
 * empty message, so silence longer than the timeout means a lost rank. The
 * rate is one small message per PLAIT_TIMEOUT_S / 4 (15 s by default). */
static int heartbeat_due(void) {
  return C.size > 1 && plait_now() - C.last_sent >= C.cfg->timeout_s / 4;
}

/* Rank 0: a rank silent past PLAIT_TIMEOUT_S is lost. Others: rank 0 silent
 * past 2 x PLAIT_TIMEOUT_S + 1 (it names silent ranks first). */
static plait_result_t check_silence(void) {
  double now = plait_now();
  if (C.rank == 0) {
    for (int r = 1; r < C.size; r++)
      if (now - C.last_heard[r] > C.cfg->timeout_s)
        return plait_error(PLAIT_ERR_PEER_LOST, "rank %d was lost: silent for %.1f s "
                           "(PLAIT_TIMEOUT_S=%g)", r, now - C.last_heard[r], C.cfg->timeout_s);
  } else if (C.size > 1 && now - C.last_heard[0] > 2 * C.cfg->timeout_s + 1) {
    return plait_error(PLAIT_ERR_PEER_LOST, "rank 0 was lost: silent for %.1f s "
                       "(PLAIT_TIMEOUT_S=%g)", now - C.last_heard[0], C.cfg->timeout_s);
  }
  return PLAIT_SUCCESS;
}

/* A peer records the cache ids rank 0 assigned and names entries sent by id. */
static plait_result_t peer_resolve(plait_response_list_t *l) {
  for (uint32_t i = 0; i < l->n; i++)
    for (uint32_t j = 0; j < l->r[i].n; j++) {
      plait_resp_entry_t *e = &l->r[i].e[j];
      if (e->cache_id >= 0) {
        const plait_cache_slot_t *s = plait_cache_get(&C.cache, e->cache_id);
        if (!s) return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 used response cache id %d, which "
                                   "was never assigned", e->cache_id);
        if (!(e->name = strdup(s->name))) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
      }
      if (e->assign_id >= 0) {
        plait_entry_t *mine = plait_namemap_get(&C.local, e->name);
        const plait_meta_t *m = mine ? &mine->meta : e->has_meta ? &e->meta : NULL;
        if (!m) return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 cached '%s' without metadata", e->name);
        PLAIT_CHECK(plait_cache_put(&C.cache, e->assign_id, e->name, m));
      }
    }
  return PLAIT_SUCCESS;
}

/* Rank > 0: announce what is new, run what rank 0 decided. */
static plait_result_t peer_cycle(int woke, int readable, int *busy) {
  double t0 = plait_now();
  /* read before draining: what was submitted before plait_shutdown on this
   * rank is then announced before the shutdown is */
  int stopping = atomic_load(&C.stop);
  if (woke || (stopping && !C.sent_shutdown) || heartbeat_due()) {
    plait_request_list_t req;
    plait_result_t rc = take_new(&req);
    if (rc == PLAIT_SUCCESS && stopping && !C.sent_shutdown) {
      req.flags |= PLAIT_REQ_SHUTDOWN;
      C.sent_shutdown = 1;
      C.shutdown_sent_at = plait_now();
    }
    req.acked = C.lists_run;
    if (rc == PLAIT_SUCCESS && (req.n || req.flags || heartbeat_due())) {
      plait_writer_t w = {0};
      rc = plait_requests_encode(&w, &req);
      if (rc == PLAIT_SUCCESS) rc = plait_control_send(C.ctrl, 0, &w);
      if (rc == PLAIT_SUCCESS) count_sent(&w, 1);
      plait_wr_free(&w);
      *busy = 1;
    }
    free(req.r);
    PLAIT_CHECK(rc);
  }
  while (readable) {
    plait_frame_t f;
    PLAIT_CHECK(plait_control_recv(C.ctrl, 0, PLAIT_MSG_RESPONSES, &f));
    C.last_heard[0] = plait_now();
    plait_response_list_t l;
    plait_result_t rc = plait_responses_decode(f.payload, f.length, &l);
    plait_frame_free(&f);
    if (rc) return plait_error_context(rc, "from rank 0");
    rc = peer_resolve(&l);
    *busy = 1;
    add_negotiation_time(plait_now() - t0);
    if (rc == PLAIT_SUCCESS) rc = run_list(&l);
    C.lists_run++;
    C.last_heard[0] = t0 = plait_now(); /* rank 0 was in those collectives too */
    int done = (l.flags & PLAIT_RESP_SHUTDOWN) != 0;
    if (done) PLAIT_DEBUG("coord", "rank %d ended coordination", l.shutdown_rank);
    plait_responses_free(&l);
    PLAIT_CHECK(rc);
    if (done) return CYCLE_DONE;
    struct pollfd p = {C.ctrl->fds[0], POLLIN, 0};
    readable = poll(&p, 1, 0) > 0;
  }
  add_negotiation_time(plait_now() - t0);
  return PLAIT_SUCCESS;
}

/* Rank 0 records one rank's requests. */
static plait_result_t root_take(int rank, const plait_request_list_t *req) {
  for (uint32_t i = 0; i < req->n; i++) {
    const char *name = NULL;
    const plait_meta_t *meta = NULL;
    PLAIT_CHECK(resolve(rank, &req->r[i], &name, &meta));
    PLAIT_CHECK(plait_neg_add(&C.neg, rank, name, meta, req->r[i].cache_id,
                              rank == 0 ? UINT64_MAX : req->acked));
  }
  if ((req->flags & PLAIT_REQ_SHUTDOWN) && C.neg.shutdown_rank < 0) C.neg.shutdown_rank = rank;
  if (req->flags & PLAIT_REQ_FAILED) { /* a collective failed there but not here */
    C.transport_failed = 1;
    C.failed_reporter = rank;
    return plait_error(PLAIT_ERR_PEER_LOST, "rank %d reported that a collective failed in its "
                       "transport", rank);
  }
  return PLAIT_SUCCESS;
}

static plait_result_t root_receive(int rank, int *busy) {
  for (;;) {
    plait_frame_t f;
    PLAIT_CHECK(plait_control_recv(C.ctrl, rank, PLAIT_MSG_REQUESTS, &f));
    C.last_heard[rank] = plait_now();
    plait_request_list_t req;
    plait_result_t rc = plait_requests_decode(f.payload, f.length, &req);
    plait_frame_free(&f);
    if (rc) return plait_error_context(rc, "from rank %d", rank);
    rc = root_take(rank, &req);
    plait_requests_free(&req);
    PLAIT_CHECK(rc);
    *busy = 1;
    struct pollfd p = {C.ctrl->fds[rank], POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return PLAIT_SUCCESS;
  }
}

/* Rank 0: take everyone's announcements, decide, tell everyone, run. */
static plait_result_t root_cycle(int woke, int *busy) {
  double t0 = plait_now();
  int stopping = atomic_load(&C.stop); /* before draining: see peer_cycle */
  if (woke || stopping) {
    plait_request_list_t req;
    plait_result_t rc = take_new(&req);
    if (rc == PLAIT_SUCCESS) rc = root_take(0, &req);
    free(req.r);
    PLAIT_CHECK(rc);
    if (stopping && C.neg.shutdown_rank < 0) C.neg.shutdown_rank = 0;
    *busy |= req.n > 0;
  }
  for (int r = 1; r < C.size; r++)
    if (C.pfd[r].revents) PLAIT_CHECK(root_receive(r, busy));
  plait_response_list_t l;
  int any = 0, done = C.neg.shutdown_rank >= 0;
  if (done) {
    char why[128];
    snprintf(why, sizeof why, "rank %d shut down (plait_shutdown) before every rank submitted it",
             C.neg.shutdown_rank);
    PLAIT_CHECK(plait_neg_fail_all(&C.neg, PLAIT_ERR_SHUTDOWN, why, &l));
    l.flags |= PLAIT_RESP_SHUTDOWN;
    l.shutdown_rank = C.neg.shutdown_rank;
  } else {
    PLAIT_CHECK(plait_neg_plan(&C.neg, plait_now(), &l, &any));
  }
  plait_result_t rc = PLAIT_SUCCESS;
  if (any || done || heartbeat_due()) { /* an empty list is a heartbeat */
    plait_writer_t w = {0};
    rc = plait_responses_encode(&w, &l);
    for (int r = 1; r < C.size && rc == PLAIT_SUCCESS; r++) rc = plait_control_send(C.ctrl, r, &w);
    if (rc == PLAIT_SUCCESS) count_sent(&w, C.size - 1);
    C.neg.lists_sent++;
    plait_wr_free(&w);
    *busy = 1;
  }
  add_negotiation_time(plait_now() - t0);
  if (rc == PLAIT_SUCCESS && (any || done)) {
    rc = run_list(&l);
    /* everyone was busy in those collectives: silence meanwhile is not loss */
    for (int r = 1; r < C.size; r++)
      if (C.last_heard[r] < plait_now()) C.last_heard[r] = plait_now();
  }
  plait_responses_free(&l);
  PLAIT_CHECK(rc);
  return done ? CYCLE_DONE : PLAIT_SUCCESS;
}

static int poll_timeout_ms(void) {
  int ms = 1000;
  if (C.rank == 0 && (C.neg.records.count || C.neg.nready)) ms = 100; /* stall checks */
  if (C.sent_shutdown) ms = 100;
  int beat = (int)(C.cfg->timeout_s * 1000 / 8); /* wake twice per heartbeat period */
  return beat < ms ? (beat > 1 ? beat : 1) : ms;
}

/* One wait and one cycle; CYCLE_DONE when coordination ended. */
static plait_result_t cycle(void) {
  int n = 1;
  C.pfd[0] = (struct pollfd){C.table.wake_fd, POLLIN, 0};
  if (C.size > 1) {
    if (C.rank == 0)
      for (int r = 1; r < C.size; r++) C.pfd[n++] = (struct pollfd){C.ctrl->fds[r], POLLIN, 0};
    else
      C.pfd[n++] = (struct pollfd){C.ctrl->fds[0], POLLIN, 0};
  }
  int ready = plait_waitset_poll(&C.waitset, C.pfd, n, poll_timeout_ms());
  apply_tuning();
  if (ready < 0 && errno != EINTR)
    return plait_error(PLAIT_ERR_SYSTEM, "coordinator poll failed: %s", strerror(errno));
  int woke = ready > 0 && C.pfd[0].revents;
  if (woke) sleep_until(C.last_cycle + C.cycle_time_ms * 1e-3); /* let a batch gather */
  C.last_cycle = plait_now();
  int busy = 0;
  plait_result_t rc;
  if (C.rank == 0)
    rc = root_cycle(woke, &busy);
  else
    rc = peer_cycle(woke, C.size > 1 && ready > 0 && C.pfd[1].revents, &busy);
  plait_stats_t *s = plait_stats_lock();
  s->cycles++;
  s->busy_cycles += busy != 0;
  plait_stats_unlock();
  if (busy) plait_tl_mark_cycle();
  if (rc == PLAIT_SUCCESS) rc = check_silence();
  if (rc == PLAIT_SUCCESS && C.sent_shutdown &&
      plait_now() - C.shutdown_sent_at > 2 * C.cfg->timeout_s + 1)
    rc = plait_error(PLAIT_ERR_PEER_LOST, "rank 0 was lost: it did not end coordination within "
                     "%g s of this rank's shutdown", 2 * C.cfg->timeout_s + 1);
  return rc;
}

/* After a collective failed, the transport's message often cannot say which
 * rank is gone (a timeout, or a survivor that was not that rank's neighbour).
 * Every rank > 0 reports the failure to rank 0; rank 0 waits a moment for
 * those reports: ranks whose connection closed, or that stay silent, are the
 * lost ones. Rank 0's verdict (ABORT) then reaches every survivor, so all of
 * them name the same rank. */
static double grace_s(void) { return C.cfg->timeout_s < 3 ? C.cfg->timeout_s : 3; }

static plait_result_t root_blame(plait_result_t rc) {
  char orig[1600];
  snprintf(orig, sizeof orig, "%s", plait_last_error());
  int n = C.size;
  uint8_t *state = calloc((size_t)n, 1); /* 0 unknown, 1 here, 2 closed */
  if (!state) return rc;
  if (C.failed_reporter > 0) state[C.failed_reporter] = 1;
  double deadline = plait_now() + grace_s();
  for (int left = n - 1 - (C.failed_reporter > 0); left > 0 && plait_now() < deadline;) {
    int k = 0;
    for (int r = 1; r < n; r++)
      if (!state[r]) C.pfd[k++] = (struct pollfd){C.ctrl->fds[r], POLLIN, 0};
    if (poll(C.pfd, (nfds_t)k, (int)((deadline - plait_now()) * 1000) + 1) <= 0) continue;
    for (int i = 0, r = 1; i < k; r++) {
      if (state[r]) continue;
      if (!C.pfd[i++].revents) continue;
      plait_frame_t f;
      state[r] = plait_control_read_frame(C.ctrl->fds[r], PLAIT_WIRE_MAX_PAYLOAD, deadline, "peer",
                                          &f) ? 2 : 1;
      if (state[r] == 1) plait_frame_free(&f);
      left--;
    }
  }
  uint8_t *closed = calloc((size_t)n, 1), *silent = calloc((size_t)n, 1);
  int nclosed = 0, nsilent = 0;
  for (int r = 1; closed && silent && r < n; r++) {
    closed[r] = state[r] == 2, nclosed += closed[r];
    silent[r] = state[r] == 0, nsilent += silent[r];
  }
  char who[512] = "";
  if (nclosed || nsilent) {
    plait_format_ranks(who, sizeof who, n, nclosed ? closed : silent);
    rc = plait_error(PLAIT_ERR_PEER_LOST, "%s %s lost: %s after a collective failed (the "
                     "transport said: %s)", who, (nclosed ? nclosed : nsilent) == 1 ? "was" : "were",
                     nclosed ? "connection closed" : "silent", orig);
  } else {
    plait_error(rc, "%s", orig);
  }
  free(state);
  free(closed);
  free(silent);
  return rc;
}

/* Rank > 0: report the failure and learn rank 0's verdict. */
static plait_result_t peer_learn_verdict(plait_result_t rc) {
  char orig[1600];
  snprintf(orig, sizeof orig, "%s", plait_last_error());
  plait_request_list_t req = {PLAIT_REQ_FAILED, 0, NULL, C.lists_run};
  plait_writer_t w = {0};
  if (plait_requests_encode(&w, &req) == PLAIT_SUCCESS)
    plait_net_write_full(C.ctrl->fds[0], w.data, w.len, plait_now() + 1.0);
  plait_wr_free(&w);
  /* rank 0 may itself wait up to PLAIT_TIMEOUT_S in the transport first */
  double deadline = plait_now() + C.cfg->timeout_s + grace_s() + 1;
  for (;;) {
    plait_frame_t f;
    plait_result_t r = plait_control_read_frame(C.ctrl->fds[0], PLAIT_WIRE_MAX_PAYLOAD, deadline,
                                                "rank 0", &f);
    if (r == PLAIT_ERR_PEER_LOST && plait_now() >= deadline) return plait_error(rc, "%s", orig);
    if (r) return r; /* rank 0 itself is gone: that is the verdict */
    if (f.type == PLAIT_MSG_ABORT) {
      plait_msg_text_t m;
      int ok = plait_msg_decode_text(f.payload, f.length, 1, &m) == PLAIT_SUCCESS && m.code &&
               m.code < PLAIT_RESULT_COUNT_;
      plait_frame_free(&f);
      return ok ? plait_error((plait_result_t)m.code, "%s", m.text) : plait_error(rc, "%s", orig);
    }
    plait_frame_free(&f); /* responses or heartbeats sent before rank 0 knew */
  }
}

static void *coordinator_main(void *arg) {
  (void)arg;
  plait_handle_mark_coordinator_thread();
  for (;;) {
    plait_result_t rc = cycle();
    if (rc == CYCLE_DONE) break;
    if (rc != PLAIT_SUCCESS) {
      if (C.transport_failed && C.size > 1)
        rc = C.rank == 0 ? root_blame(rc) : peer_learn_verdict(rc);
      char msg[2048];
      snprintf(msg, sizeof msg, "%s", plait_last_error());
      plait_table_close(&C.table, rc, msg); /* refuse new work before completing any */
      plait_control_fail(C.ctrl, plait_error(rc, "%s", msg)); /* rank 0 tells the others */
      PLAIT_ERROR("coord", "the job failed: %s", msg);
      fail_everything(rc, msg);
      return NULL;
    }
  }
  fail_everything(PLAIT_ERR_SHUTDOWN, "plait was shut down (plait_shutdown) on this or another rank");
  return NULL;
}

plait_result_t plait_coord_start(const plait_coord_args_t *a) {
  pthread_mutex_t mu = C.table.mu;
  memset(&C, 0, sizeof C);
  C.table.mu = mu;
  C.cfg = a->cfg;
  C.ctrl = a->ctrl;
  C.rank = a->rank;
  C.size = a->size;
  C.t = a->transport;
  C.ended_by = -1;
  plait_waitset_init(&C.waitset);
  plait_stats_clear();
  PLAIT_CHECK(plait_table_open(&C.table));
  plait_result_t rc = plait_cache_init(&C.cache, (int)(a->cfg->cache_capacity > 1 << 24
                                                           ? 1 << 24 : a->cfg->cache_capacity));
  if (rc == PLAIT_SUCCESS && plait_namemap_init(&C.local))
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  if (rc == PLAIT_SUCCESS && a->rank == 0) rc = plait_neg_init(&C.neg, a->size, a->cfg, &C.cache);
  if (rc == PLAIT_SUCCESS && !(C.last_heard = calloc((size_t)a->size, sizeof *C.last_heard)))
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  for (int r = 0; rc == PLAIT_SUCCESS && r < a->size; r++) C.last_heard[r] = plait_now();
  C.last_sent = plait_now();
  if (rc == PLAIT_SUCCESS && !(C.pfd = calloc((size_t)a->size + 1, sizeof *C.pfd)))
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  plait_exec_init(&C.exec, a->rank, a->size, a->transport, a->transport_state, &C.table, &C.local);
  C.exec.threshold = a->cfg->fusion_threshold;
  C.cycle_time_ms = a->cfg->cycle_time_ms;
  atomic_store(&tune_pending, 0);
  if (rc == PLAIT_SUCCESS && pthread_create(&C.thread, NULL, coordinator_main, NULL))
    rc = plait_error(PLAIT_ERR_SYSTEM, "cannot start the coordinator thread");
  if (rc) {
    free(C.pfd);
    free(C.last_heard);
    plait_cache_free(&C.cache);
    plait_table_destroy(&C.table);
    return rc;
  }
  C.started = 1;
  atomic_store(&running_caps, a->transport->caps);
  atomic_store(&running_size, a->size);
  return PLAIT_SUCCESS;
}

void plait_coord_stop(void) {
  if (!C.started) return;
  atomic_store(&C.stop, 1);
  uint64_t one = 1;
  if (write(C.table.wake_fd, &one, sizeof one) < 0) { /* already awake */
  }
  pthread_join(C.thread, NULL);
  plait_table_close(&C.table, PLAIT_ERR_NOT_INITIALIZED, "plait is not initialized (it was shut down)");
  atomic_store(&running_size, 0);
  atomic_store(&running_caps, 0);
  fail_everything(PLAIT_ERR_SHUTDOWN, "plait was shut down");
  plait_exec_free(&C.exec);
  if (C.rank == 0) plait_neg_free(&C.neg);
  plait_namemap_free(&C.local);
  plait_cache_free(&C.cache);
  plait_table_destroy(&C.table);
  free(C.pfd);
  free(C.last_heard);
  plait_waitset_free(&C.waitset);
  C.started = 0;
}
