/*
 * Internal: the cached epoch's pieces (issue 37 goal 1, step 1 of
 * docs/performance.md "A lone cached operation"), used by the coordinator
 * behind PLAIT_CACHED_EPOCH (docs/design.md, "The cached epoch").
 *
 * The idea: once rank 0 has sent a response list whose responses are all
 * successful cached allreduces of the global process set (a burst), and
 * nothing else is pending, it may mark that list PLAIT_RESP_EPOCH. Every
 * rank runs lists in the same order, so every rank opens the epoch at the
 * same list number. In the epoch, a rank does not announce to rank 0: once
 * it holds exactly the burst's ids again (or something that makes it
 * leave: a miss, another name, an uncached operation, a join, a shutdown)
 * it votes, and every rank's vote is reduced with one 1-byte MIN allreduce
 * over the transport (an AND). 1 on every rank: every rank runs the burst
 * again, the same responses in the same order as the opening list
 * (plait_epoch_round), with no round trip through rank 0. 0 anywhere: the
 * epoch closes on every rank at that same collective, nothing of the round
 * has run, and every rank announces what it holds to rank 0 as before, so a
 * mismatch gets rank 0's error word for word.
 *
 * A rank that holds none of the burst (its framework is computing, or has
 * stopped) votes to leave PLAIT_EPOCH_WAIT_S after the epoch opened or its
 * last round ran, so that a rank that is ready waits in the AND at most that
 * long (plus the other's scheduling), never PLAIT_TIMEOUT_S: after the leave
 * everything goes through rank 0 again, stall warnings included.
 *
 * Not thread-safe: a coordinator thread owns its epoch.
 */
#ifndef PLAIT_EPOCH_H
#define PLAIT_EPOCH_H

#include <stdint.h>

#include "plait/transport.h"
#include "engine/negotiate/cache.h"
#include "engine/negotiate/messages.h"

#define PLAIT_EPOCH_MAX_IDS 4096 /* a burst with more ids never opens an epoch */
#define PLAIT_EPOCH_WAIT_S 0.02   /* the longest wait for the burst before leaving */

typedef struct plait_epoch {
  int open;           /* the epoch is open on this rank */
  uint64_t opened_at; /* the list number that opened it */
  int n;              /* ids in the burst, in the opening list's order */
  int32_t *ids;
  uint32_t nresp;     /* responses of the opening list */
  uint32_t *per_resp; /* ids in each of them (its fusion) */
  uint64_t rounds;    /* rounds agreed and run since it opened */
  double since;       /* when it opened or its last round ran: the wait's start */
  plait_request_list_t held; /* drained since, not announced (held.flags unused) */
  uint32_t cap;              /* room in held.r */
  int32_t *scratch;          /* the held ids, for the vote */
  int and_pending; /* a waiting caller left the AND unfinished (the transport's
                    * vote): the next turn, the coordinator's, goes on with it */
  int carrying;       /* that AND is carried with the round's allreduce
                       * (coordinator_epoch.c: the transport's vote_allreduce) */
  uint8_t carry_mine; /* ... and this rank's vote in it */
} plait_epoch_t;

void plait_epoch_init(plait_epoch_t *ep);
void plait_epoch_free(plait_epoch_t *ep);

/* Rank 0: 1 when the list l it planned may open an epoch: it is not empty,
 * carries no shutdown and no settings (PLAIT_RESP_TUNING), and every
 * response is a successful allreduce of the global set whose entries all
 * have a cache id (sent by one or assigned one), each id once, at most
 * PLAIT_EPOCH_MAX_IDS; and quiet is 1: nothing else pending at rank 0
 * (no record by name, no rank joined, no process set but the global one
 * with work, no setting change coming). */
int plait_epoch_may_open(const plait_response_list_t *l, int quiet);

/* Every rank, running list number `number` (lists run so far) that carries
 * PLAIT_RESP_EPOCH: opens the epoch on l's burst (an open one is replaced).
 * PLAIT_ERR_PROTOCOL when l could not have opened one (rank 0 and this rank
 * disagree), PLAIT_ERR_NO_MEMORY; either leaves the epoch closed. */
plait_result_t plait_epoch_open(plait_epoch_t *ep, const plait_response_list_t *l,
                                uint64_t number);
void plait_epoch_close(plait_epoch_t *ep);

/* Moves req's requests (drained: by cache id, or by name with borrowed
 * name and metadata) behind the held ones; req->n becomes 0 (req->r stays
 * the caller's). PLAIT_ERR_NO_MEMORY leaves req as it was. */
plait_result_t plait_epoch_hold(plait_epoch_t *ep, plait_request_list_t *req);

/* Whether this rank votes now (plait_epoch_vote on what it holds), or
 * because it has waited PLAIT_EPOCH_WAIT_S since ep->since (then *stay 0
 * unless it holds the whole burst). */
int plait_epoch_due(plait_epoch_t *ep, double now, int other, uint8_t *stay);

/* When this rank votes at the latest, waiting (0: no epoch open). */
double plait_epoch_until(const plait_epoch_t *ep);

/* After the AND: a round ran (stay), or the epoch closed (leave) and *out
 * takes the held requests, to announce to rank 0 (free out->r). */
void plait_epoch_take_held(plait_epoch_t *ep, plait_request_list_t *out);

/* What this rank holds, drained and not yet announced: the cache id of each
 * operation (-1: not in the cache, a miss), n of them; other: something
 * that is no operation of the burst (a join, a shutdown). 1 when it must
 * vote now, 0 when it waits for more of the burst. *stay is then the vote:
 * 1 when it holds exactly the burst's ids, each once, and nothing else. */
int plait_epoch_vote(const plait_epoch_t *ep, const int32_t *held, int n, int other,
                     uint8_t *stay);

/* The AND: *vote becomes the minimum of every rank's vote (0 or 1), by the
 * transport's vote where it has one (every rank alike: one plugin per job),
 * otherwise by one allreduce (uint8 MIN where it takes it, otherwise int32
 * MIN). Every rank of the global set must call it at the same point of its
 * sequence of collectives; the transport's errors as they are. wait_s < 0:
 * until done. wait_s >= 0, with the transport's vote only: PLAIT_ERR_TIMEOUT
 * (no error recorded) when it is not done after wait_s seconds; it is still
 * pending in the transport, and the next call (whatever *vote) goes on with
 * it. */
plait_result_t plait_epoch_and(const plait_transport_t *t, void *ts, uint8_t *vote,
                               double wait_s);

/* An agreed round: *out becomes the opening list again, one response per
 * response of it with the same ids in the same order, names borrowed from
 * the cache and metadata copied from its slots (free it with
 * plait_responses_free). PLAIT_ERR_PROTOCOL for an id the cache lacks. */
plait_result_t plait_epoch_round(plait_epoch_t *ep, const plait_cache_t *cache,
                                 plait_response_list_t *out);

/* plait_epoch_round's list without counting the round as run (a round whose
 * allreduce carries the AND is known to be agreed only once it ran); then
 * plait_epoch_ran when it was. */
plait_result_t plait_epoch_round_list(const plait_epoch_t *ep, const plait_cache_t *cache,
                                      plait_response_list_t *out);
void plait_epoch_ran(plait_epoch_t *ep);

#endif
