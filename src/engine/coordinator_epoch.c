/* The hall's cached epoch (epoch.h, PLAIT_CACHED_EPOCH): when rank 0 may
 * open one, its opening, and a rank's turn in it (hold, vote, the AND, the
 * round or the close). Moved out of coordinator.c, which drives it. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/coordinator_internal.h"
#include "engine/submit/handle.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

/* Rank 0 or a peer with l just run: the epoch opens on its burst when rank
 * 0 marked it so (every rank at the same list). */
plait_result_t plait_coord_maybe_open_epoch(plait_coord_t *c, const plait_response_list_t *l) {
  if (!(l->flags & PLAIT_RESP_EPOCH)) return PLAIT_SUCCESS;
  PLAIT_DEBUG("coord", "cached epoch opened at list %llu", (unsigned long long)c->lists_run);
  c->ep_tune = c->tune;
  return plait_epoch_open(&c->ep, l, c->lists_run);
}

/* Every rank was in the collectives just run (the AND, a round): silence
 * meanwhile is not loss. */
static void all_were_here(plait_coord_t *c) {
  if (c->rank == 0)
    plait_silence_all_busy(&c->silence);
  else
    plait_silence_heard(&c->silence, 0, plait_now());
}

/* Whether this rank's fusion settings (plait_config_set) or autotuning
 * changed since the epoch opened: it leaves, and what follows is planned
 * with them. */
static int settings_changed(const plait_coord_t *c) {
  const plait_tuning_t *a = &c->ep_tune, *b = &c->tune;
  return a->fusion_threshold != b->fusion_threshold ||
         a->fusion_max_tensor != b->fusion_max_tensor || a->cycle_time_ms != b->cycle_time_ms ||
         a->autotune != b->autotune;
}

/* The vote is 0 somewhere: the epoch closes on every rank, and what this
 * rank holds is announced to rank 0 as usual. */
static plait_result_t close_epoch(plait_coord_t *c) {
  plait_request_list_t held;
  plait_epoch_take_held(&c->ep, &held);
  PLAIT_DEBUG("coord", "cached epoch closed after %llu rounds", (unsigned long long)c->ep.rounds);
  plait_epoch_close(&c->ep);
  held.acked = c->lists_run;
  plait_result_t rc = PLAIT_SUCCESS;
  if (c->rank == 0) rc = plait_coord_root_take(c, 0, &held, 0, NULL);
  else if (held.n) rc = plait_coord_send_requests(c, &held);
  free(held.r);
  return rc;
}

/* The cache's metadata of the epoch's burst when its round carries the vote
 * in its allreduce (one small tensor: plait_exec_carries), else NULL. The
 * same on every rank: the burst, the cache and the transport are. */
static const plait_meta_t *carried_meta(plait_coord_t *c) {
  if (c->ep.n != 1 || c->ep.nresp != 1) return NULL;
  const plait_cache_slot_t *slot = plait_cache_get(&c->cache, c->ep.ids[0]);
  return slot && plait_exec_carries(&c->exec, &slot->meta) ? &slot->meta : NULL;
}

/* The AND carried with the round's one allreduce (performance.md, step 3):
 * one collective where there were two. A rank holding the burst runs it with
 * its vote of 1 (its tensor reduced only if every rank's is 1); a rank that
 * votes 0 takes part with no tensor. Agreed: the round ran. Not: the epoch
 * closes on every rank, no tensor touched, and what is held goes to rank 0
 * as after a vote of 0. Left unfinished by a waiting caller (wait_s): the
 * coordinator goes on with it, as with the AND. */
static plait_result_t carried_round(plait_coord_t *c, uint8_t mine, double wait_s) {
  plait_exec_carry_t k = {mine, wait_s, 0, 0};
  plait_response_list_t l = {0};
  plait_result_t rc = PLAIT_SUCCESS;
  int resumed = c->ep.and_pending;
  if (mine) rc = plait_epoch_round_list(&c->ep, &c->cache, &l);
  if (rc) return rc;
  if (mine && !resumed) plait_coord_mark_queued(c, &l);
  c->exec.carry = &k;
  plait_live_away(&c->live); /* a transport call: heartbeats go on */
  double t0 = plait_now();
  if (mine) {
    rc = plait_exec_run(&c->exec, &l.r[0]);
  } else {
    const plait_meta_t *m = carried_meta(c);
    rc = m ? plait_exec_carry_absent(&c->exec, m)
           : plait_error(PLAIT_ERR_PROTOCOL, "cached epoch: its burst left the cache");
  }
  double t1 = plait_now();
  plait_live_back(&c->live);
  c->exec.carry = NULL;
  c->ep.and_pending = k.pending;
  c->ep.carrying = k.pending;
  c->ep.carry_mine = mine;
  if (rc == PLAIT_SUCCESS && k.agreed) { /* the settings it ran with, as for any list */
    plait_ls_before_run(&c->lists, &c->tune, &c->e->stats);
    plait_spin_ran(&c->spin, t1 - t0, t1);
  }
  plait_responses_free(&l);
  if (rc) {
    c->transport_failed = rc != PLAIT_ERR_PROTOCOL && rc != PLAIT_ERR_NO_MEMORY;
    return rc;
  }
  if (k.pending) return PLAIT_SUCCESS; /* the coordinator goes on with it */
  all_were_here(c);
  if (!k.agreed) return close_epoch(c);
  plait_epoch_ran(&c->ep);
  c->ep.since = plait_now();
  return PLAIT_SUCCESS;
}

/* The cached epoch is open: hold what is drained; when this rank votes,
 * the AND, then the burst runs again on every rank, or the epoch closes on
 * every rank and what is held is announced to rank 0 as usual. */
plait_result_t plait_coord_epoch_turn(plait_coord_t *c, int *busy, double wait_s) {
  uint8_t stay = 0;
  plait_result_t rc;
  if (c->ep.and_pending) { /* a caller left the AND unfinished: on with it */
    *busy = 1;
    goto agree;
  }
  plait_request_list_t req;
  rc = plait_coord_take_new(c, &req);
  if (rc == PLAIT_SUCCESS && c->rank > 0) /* held back before the epoch opened */
    plait_announce_merge(&c->ann, &req, 0, &c->cache, c->tune.fusion_threshold, 0, plait_now());
  if (rc == PLAIT_SUCCESS) rc = plait_epoch_hold(&c->ep, &req);
  free(req.r);
  PLAIT_CHECK(rc);
  /* leave for anything but the burst: a stop, a join, work announced before
   * the epoch opened (still in the local map, not held) or at rank 0 */
  int other = atomic_load(&c->stop) || c->exec.joined || c->local.count > c->ep.held.n ||
              settings_changed(c) ||
              (c->rank == 0 && (c->neg.records.count || c->neg.shutdown_rank >= 0));
  if (!plait_epoch_due(&c->ep, plait_now(), other, &stay)) {
    int64_t left = (int64_t)c->ep.n - (int64_t)c->ep.held.n;
    plait_table_await(&c->table, left > 0 ? left : 0);
    return PLAIT_SUCCESS;
  }
  plait_table_await(&c->table, 0);
  *busy = 1;
agree:;
  if (c->ep.and_pending ? c->ep.carrying : carried_meta(c) != NULL)
    return carried_round(c, c->ep.and_pending ? c->ep.carry_mine : stay, wait_s);
  double t0 = plait_coord_neg_start(c);
  plait_live_away(&c->live);
  rc = plait_epoch_and(c->t, c->exec.ts, &stay, wait_s);
  plait_live_back(&c->live);
  plait_coord_add_negotiation_time(c, plait_now() - t0); /* the agreement; the round is the transport's */
  c->ep.and_pending = rc == PLAIT_ERR_TIMEOUT && wait_s >= 0;
  if (c->ep.and_pending) return PLAIT_SUCCESS; /* the coordinator goes on with it */
  if (rc) {
    c->transport_failed = 1;
    return rc;
  }
  all_were_here(c);
  if (stay) {
    plait_response_list_t l;
    PLAIT_CHECK(plait_epoch_round(&c->ep, &c->cache, &l));
    rc = plait_coord_run_list(c, &l);
    all_were_here(c);
    plait_responses_free(&l);
    c->ep.since = plait_now();
    return rc;
  }
  return close_epoch(c);
}

/* Rank > 0 in the cached epoch: its turn, and a heartbeat when one is due
 * (it announces nothing meanwhile). */
plait_result_t plait_coord_peer_epoch(plait_coord_t *c, int *busy) {
  PLAIT_CHECK(plait_coord_epoch_turn(c, busy, -1));
  if (!c->ep.open || !plait_coord_heartbeat_due(c)) return PLAIT_SUCCESS;
  plait_request_list_t beat = {0, 0, NULL, c->lists_run};
  return plait_coord_send_requests(c, &beat);
}

/* Rank 0, a list just planned: whether nothing else is going on, so that
 * the list may open a cached epoch (PLAIT_CACHED_EPOCH): nothing else
 * pending or held, no join, no shutdown, no autotuning, host memory only
 * (what a rank still has in flight makes it leave at its first vote). */
int plait_coord_epoch_may_open(plait_coord_t *c) {
  return c->cfg->cached_epoch && c->size > 1 && !atomic_load(&c->stop) &&
         c->neg.records.count == 0 && c->neg.nready == 0 && !c->neg.holding &&
         c->neg.njoined == 0 && !c->exec.joined && c->neg.shutdown_rank < 0 && !c->lists.at &&
         !c->lists.now.active && !c->tune.autotune &&
         !(c->t->caps & PLAIT_CAP_DEVICE_MEMORY);
}

/* A waiting thread holds the turn (turn.h) for h, a lone cached allreduce,
 * and may wait wait_s seconds more (< 0: no limit): it runs the epoch's turn
 * as the coordinator would. A vote of 0 (the epoch closed: rank 0 plans what
 * was held), a failure (kept for the coordinator's failure path: blame, rank
 * 0 told, later operations fail fast), an AND not done within wait_s (the
 * transport's vote, left pending for the coordinator) or h not finished
 * hand the rest to the coordinator. */
void plait_coord_caller_round(void *arg, plait_handle_t *h, double wait_s) {
  plait_coord_t *c = arg;
  int busy = 0;
  plait_result_t rc = PLAIT_SUCCESS;
  if (c->ep.open && !c->caller_rc) rc = plait_coord_epoch_turn(c, &busy, wait_s);
  if (rc) {
    snprintf(c->caller_msg, sizeof c->caller_msg, "%s", plait_last_error());
    c->caller_rc = rc;
  }
  if (rc || !c->ep.open || atomic_load_explicit(&h->wake, memory_order_acquire) != 1)
    plait_table_wake(&c->table);
}

void plait_coord_wake(void *arg) { plait_table_wake(&((plait_coord_t *)arg)->table); }
