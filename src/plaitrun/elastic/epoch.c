/*
 * plaitrun's elastic driver: JOINs and epochs (driver_internal.h).
 *
 * Forming a new epoch starts when the current one is broken (a failure, or a
 * JOIN from one of its workers: it saw the job fail or the hosts change), or
 * at the start. It ends when every running worker of the current epoch has
 * JOINed, or after PLAIT_ELASTIC_JOIN_GRACE_S from the first such JOIN (the
 * stragglers are then killed, as failures); workers its JOINs name lost are
 * killed at once. Then, with at least --min-np candidates (every worker with
 * a JOIN waiting, new ones included), ranks are assigned (assign.h) and the
 * epoch number goes up; below --min-np the JOINs wait, up to
 * --elastic-timeout, for workers to come.
 */
#include "driver_internal.h"

#include "assign.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOINS_MAX PLAITRUN_MAX_RANKS /* workers running at once: at most --max-np */

static worker_t *find_running(driver_t *d, const char *name) {
  for (int i = 0; i < d->n_workers; i++)
    if (d->w[i].running && !strcmp(d->w[i].name, name)) return &d->w[i];
  return NULL;
}

static void mark_broken(driver_t *d, double now) {
  if (d->broken) return;
  d->broken = 1;
  d->broken_at = now;
}

/* The JOIN of a worker of the current epoch names the ranks its job lost. */
static void kill_named_lost(driver_t *d, const plaitrun_rdv_join_t *j) {
  for (int k = 0; k < j->n_lost; k++)
    for (int i = 0; i < d->n_workers; i++) {
      worker_t *w = &d->w[i];
      if (!w->running || w->stopped || w->joined || w->epoch != d->epoch ||
          w->rank != j->lost[k])
        continue;
      char why[PLAITRUN_WORKER_NAME_MAX + 48];
      snprintf(why, sizeof why, "was named lost by %.127s: killed", j->worker);
      plaitrun_workers_kill_failed(d, w, why);
    }
}

/* Why a waiting worker has no seat in the next epoch; NULL: it has one. */
static const char *no_seat(const driver_t *d, const worker_t *w) {
  const plaitrun_host_state_t *h = &d->hosts->hosts[w->host];
  if (h->slots == 0) return "its host left the host list";
  if (w->slot >= h->slots) return "its host has fewer slots now";
  return NULL;
}

static void take_join(driver_t *d, const plaitrun_rdv_join_t *j, double now) {
  worker_t *w = find_running(d, j->worker);
  if (!w || w->stopped) {
    plaitrun_rdv_stop(d->rdv, j->worker, w ? "plaitrun stopped this worker"
                                           : "plaitrun started no running worker of this name");
    return;
  }
  if (d->phase != D_RUNNING) {
    plaitrun_rdv_stop(d->rdv, j->worker, "training already ended");
    plaitrun_workers_stop(d, w, 0);
    return;
  }
  const char *why = no_seat(d, w);
  if (why && w->epoch != d->epoch) { /* not in the job: no need to wait for a forming */
    fprintf(stderr, "plaitrun elastic: worker %s stopped: %s\n", w->name, why);
    plaitrun_rdv_stop(d->rdv, w->name, why);
    plaitrun_workers_stop(d, w, 0);
    return;
  }
  w->joined = 1;
  w->join_epoch = j->last_epoch;
  snprintf(w->rendezvous, sizeof w->rendezvous, "%s", j->rendezvous);
  if (d->epoch == 0 || j->last_epoch != d->epoch || w->epoch != d->epoch) return;
  mark_broken(d, now);
  if (d->grace_at == 0) d->grace_at = now + d->join_grace_s;
}

void plaitrun_epoch_take_joins(driver_t *d, double now) {
  static plaitrun_rdv_join_t joins[JOINS_MAX];
  int n = plaitrun_rdv_pending(d->rdv, joins, JOINS_MAX);
  for (int i = 0; i < d->n_workers; i++) d->w[i].joined = 0;
  for (int k = 0; k < n; k++) take_join(d, &joins[k], now);
  /* then the ranks they name lost (a worker that JOINed is not lost) */
  for (int k = 0; k < n && d->phase == D_RUNNING; k++)
    if (d->epoch > 0 && joins[k].last_epoch == d->epoch) kill_named_lost(d, &joins[k]);
}

void plaitrun_epoch_stop_all_joins(driver_t *d, const char *reason) {
  static plaitrun_rdv_join_t joins[JOINS_MAX];
  int n = plaitrun_rdv_pending(d->rdv, joins, JOINS_MAX);
  for (int k = 0; k < n; k++) {
    plaitrun_rdv_stop(d->rdv, joins[k].worker, reason);
    worker_t *w = find_running(d, joins[k].worker);
    if (w) {
      w->joined = 0;
      plaitrun_workers_stop(d, w, 0);
    }
  }
}

/* 1 when the forming may end now: every running worker of the current epoch
 * has JOINed (at the start: every running worker), or the grace (at the
 * start: --elastic-timeout) is over and the stragglers were killed. */
static int forming_done(driver_t *d, double now) {
  int waiting = 0;
  for (int i = 0; i < d->n_workers; i++) {
    worker_t *w = &d->w[i];
    if (w->running && !w->stopped && !w->joined && (d->epoch == 0 || w->epoch == d->epoch))
      waiting++;
  }
  if (waiting == 0) return 1;
  /* the first epoch: workers may take long to start, up to --elastic-timeout */
  double deadline = d->epoch == 0 ? d->start_time + d->opts->elastic_timeout_s : d->grace_at;
  if (deadline == 0 || now < deadline) return 0;
  for (int i = 0; i < d->n_workers; i++) {
    worker_t *w = &d->w[i];
    if (w->running && !w->stopped && !w->joined && (d->epoch == 0 || w->epoch == d->epoch)) {
      char why[128];
      if (d->epoch == 0)
        snprintf(why, sizeof why, "did not ask for its place within %d s (--elastic-timeout): "
                 "killed", d->opts->elastic_timeout_s);
      else
        snprintf(why, sizeof why, "did not come to re-form within %.1f s "
                 "(PLAIT_ELASTIC_JOIN_GRACE_S): killed", d->join_grace_s);
      plaitrun_workers_kill_failed(d, w, why);
    }
  }
  return 1;
}

/* Candidates: workers with a JOIN waiting and a seat; the others get STOP. */
static int candidates(driver_t *d, int *cand, plaitrun_seat_t *seats) {
  int order_of[PLAITRUN_HOSTS_TABLE_MAX], ordered[PLAITRUN_HOSTS_TABLE_MAX];
  int n_ordered = plaitrun_hosts_ordered(d->hosts, 1, ordered, PLAITRUN_HOSTS_TABLE_MAX);
  for (int k = 0; k < n_ordered; k++) order_of[ordered[k]] = k;
  int n = 0;
  for (int i = 0; i < d->n_workers && n < JOINS_MAX; i++) {
    worker_t *w = &d->w[i];
    if (!w->running || !w->joined) continue;
    const char *why = no_seat(d, w);
    if (why) {
      fprintf(stderr, "plaitrun elastic: worker %s stopped: %s\n", w->name, why);
      plaitrun_rdv_stop(d->rdv, w->name, why);
      w->joined = 0;
      plaitrun_workers_stop(d, w, 0);
      continue;
    }
    cand[n] = i;
    seats[n++] = (plaitrun_seat_t){order_of[w->host], w->slot};
  }
  return n;
}

/* "epoch 3 formed: 4 workers on 2 hosts (h1:2 h2:2) in 1.2 s" */
static void say_formed(driver_t *d, const int *cand, const plaitrun_place_t *place, int n,
                       double since) {
  char text[1024];
  int hosts = 0, len = 0;
  for (int r = 0; r < d->size; r++)
    for (int k = 0; k < n; k++) {
      if (place[k].rank != r || place[k].local_rank != 0) continue;
      hosts++;
      len += snprintf(text + len, len < (int)sizeof text ? sizeof text - (size_t)len : 0,
                      "%s%s:%d", hosts > 1 ? " " : "", d->hosts->hosts[d->w[cand[k]].host].name,
                      place[k].local_size);
      if (len >= (int)sizeof text) len = (int)sizeof text - 1;
    }
  fprintf(stderr, "plaitrun elastic: epoch %llu formed: %d worker%s on %d host%s (%s) in %.1f s\n",
          (unsigned long long)d->epoch, d->size, d->size == 1 ? "" : "s", hosts,
          hosts == 1 ? "" : "s", text, plaitrun_elastic_now() - since);
}

static void answer(driver_t *d, const int *cand, const plaitrun_place_t *place, int n) {
  const char *rendezvous = "";
  for (int k = 0; k < n; k++)
    if (place[k].rank == 0) rendezvous = d->w[cand[k]].rendezvous;
  for (int k = 0; k < n; k++) {
    worker_t *w = &d->w[cand[k]];
    w->joined = 0;
    if (place[k].rank < 0) {
      char why[96];
      snprintf(why, sizeof why, "the job is at --max-np %d", d->opts->max_np);
      fprintf(stderr, "plaitrun elastic: worker %s stopped: %s\n", w->name, why);
      plaitrun_rdv_stop(d->rdv, w->name, why);
      plaitrun_workers_stop(d, w, 0);
      continue;
    }
    plaitrun_rdv_assign_t a = {d->epoch, place[k].rank, place[k].size, place[k].local_rank,
                               place[k].local_size, place[k].cross_rank, place[k].cross_size,
                               ""};
    snprintf(a.rendezvous, sizeof a.rendezvous, "%s", rendezvous);
    if (plaitrun_rdv_assign(d->rdv, w->name, &a) != 0) {
      plaitrun_workers_kill_failed(d, w, "left before its place was given: killed");
      continue;
    }
    w->epoch = d->epoch;
    w->rank = place[k].rank;
    char label[16];
    snprintf(label, sizeof label, "%d", w->rank);
    plaitrun_linebuf_set_label(&w->lines[0], label);
    plaitrun_linebuf_set_label(&w->lines[1], label);
  }
}

/* 1 when the reset limit forbids the new epoch (then the job ends). */
static int reset_limit_reached(driver_t *d) {
  int limit = d->opts->reset_limit;
  if (limit < 0 || d->epoch == 0 || d->epoch - 1 < (uint64_t)limit) return 0;
  char why[160];
  snprintf(why, sizeof why, "the job was reset %d time%s: --reset-limit %d reached", limit,
           limit == 1 ? "" : "s", limit);
  fprintf(stderr, "plaitrun elastic: %s; stopping\n", why);
  plaitrun_driver_end(d, 1, SIGTERM, why);
  return 1;
}

/* Below --min-np: wait, up to --elastic-timeout. 1 when the job ended. */
static int below_min(driver_t *d, int n, double now) {
  if (d->waiting_since == 0) {
    d->waiting_since = now;
    fprintf(stderr, "plaitrun elastic: %d worker%s ready, below --min-np %d: waiting up to %d s "
            "for more\n", n, n == 1 ? "" : "s", d->opts->min_np, d->opts->elastic_timeout_s);
  }
  if (now - d->waiting_since < d->opts->elastic_timeout_s) return 0;
  char why[160];
  snprintf(why, sizeof why, "fewer than --min-np %d slots for %d seconds (--elastic-timeout)",
           d->opts->min_np, d->opts->elastic_timeout_s);
  fprintf(stderr, "plaitrun elastic: %s; stopping\n", why);
  plaitrun_driver_end(d, 1, SIGTERM, why);
  return 1;
}

static void form(driver_t *d, double now) {
  static int cand[JOINS_MAX];
  static plaitrun_seat_t seats[JOINS_MAX];
  static plaitrun_place_t place[JOINS_MAX];
  int n = candidates(d, cand, seats);
  if (n < d->opts->min_np) {
    below_min(d, n, now);
    return;
  }
  if (reset_limit_reached(d)) return;
  int size = plaitrun_assign(seats, n, d->opts->max_np, place);
  if (size < 0) {
    plaitrun_driver_end(d, 1, SIGTERM, "plaitrun ran out of memory");
    return;
  }
  double since = d->epoch == 0 ? d->start_time : d->broken_at;
  d->epoch++;
  d->size = size;
  d->broken = 0;
  d->grace_at = 0;
  d->waiting_since = 0;
  answer(d, cand, place, n);
  say_formed(d, cand, place, n, since);
  d->update_bits = 0;
  plaitrun_rdv_set_updates(d->rdv, d->epoch, d->update_ts, 0);
}

void plaitrun_epoch_step(driver_t *d, double now) {
  if (d->phase != D_RUNNING || !d->started) return;
  int any_joined = 0;
  for (int i = 0; i < d->n_workers && !any_joined; i++) any_joined = d->w[i].joined;
  if (!any_joined && d->broken && now - d->broken_at >= d->opts->elastic_timeout_s) {
    char why[160];
    snprintf(why, sizeof why, "no worker came to re-form epoch %llu within %d s "
             "(--elastic-timeout)", (unsigned long long)d->epoch + 1, d->opts->elastic_timeout_s);
    fprintf(stderr, "plaitrun elastic: %s; stopping\n", why);
    plaitrun_driver_end(d, 1, SIGTERM, why);
    return;
  }
  if (!any_joined) return;
  if (d->epoch > 0 && !d->broken) return; /* new workers wait for the running ones */
  if (!forming_done(d, now)) return;
  form(d, now);
}

/* What POLL answers: ADDED when new workers wait and the job is below
 * --max-np; REMOVED when a worker of the job lost its seat. */
void plaitrun_epoch_updates(driver_t *d) {
  if (d->epoch == 0) return;
  unsigned bits = 0;
  for (int i = 0; i < d->n_workers; i++) {
    worker_t *w = &d->w[i];
    if (!w->running || w->stopped) continue;
    if (w->epoch == d->epoch && no_seat(d, w)) bits |= PLAITRUN_HOSTS_REMOVED;
    if (w->joined && w->epoch != d->epoch && (!d->opts->max_np || d->size < d->opts->max_np))
      bits |= PLAITRUN_HOSTS_ADDED;
  }
  if (bits == d->update_bits) return;
  d->update_bits = bits;
  d->update_ts++;
  plaitrun_rdv_set_updates(d->rdv, d->epoch, d->update_ts, bits);
}
