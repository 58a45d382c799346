/*
 * Internal: silence on the control plane, the coordinator's sign of a lost
 * rank.
 *
 * A rank that has sent nothing for a quarter of PLAIT_TIMEOUT_S sends an
 * empty message (a heartbeat), so silence longer than the timeout means a
 * lost rank: rank 0 watches every rank, the others rank 0. A live rank is
 * never silent that long: its coordinator thread sends every
 * PLAIT_TIMEOUT_S / 4, and while it is away from its loop (collectives,
 * callbacks, blame rounds) the liveness thread sends for it (liveness.h).
 * The rate is one small message per PLAIT_TIMEOUT_S / 4 (15 s by default).
 *
 * Called by the coordinator thread only.
 */
#ifndef PLAIT_ENGINE_SILENCE_H
#define PLAIT_ENGINE_SILENCE_H

#include "plait/plait.h"
#include "util/clock.h"

typedef struct plait_silence {
  int rank, size;
  double timeout_s;   /* PLAIT_TIMEOUT_S */
  double last_sent;   /* when this rank last sent on the control plane */
  double *last_heard; /* rank 0: per rank; others: [0] is rank 0 */
  double last_check;  /* the last plait_silence_check */
} plait_silence_t;

/* Everyone heard from and this rank sent just now. PLAIT_ERR_NO_MEMORY,
 * its message set, when out of memory. */
plait_result_t plait_silence_init(plait_silence_t *s, int rank, int size, double timeout_s);
void plait_silence_free(plait_silence_t *s);

/* This rank sent a control message / heard from rank (its index in
 * last_heard) at t. */
static inline void plait_silence_sent(plait_silence_t *s) { s->last_sent = plait_now(); }
static inline void plait_silence_heard(plait_silence_t *s, int rank, double t) {
  s->last_heard[rank] = t;
}
/* Rank 0: heard at t from every rank of root's subtree in the control tree
 * of fan-out k (root alone for k 0): an AND item (tree_and.h). */
void plait_silence_heard_subtree(plait_silence_t *s, int root, int k, double t);
/* Rank 0: every rank was in the collectives just run: silence meanwhile is
 * not loss. */
void plait_silence_all_busy(plait_silence_t *s);

/* Whether this rank must send something (a heartbeat when it has nothing
 * else): it has been quiet for PLAIT_TIMEOUT_S / 4, in a job of 2 or more. */
int plait_silence_beat_due(const plait_silence_t *s);
/* PLAIT_ERR_PEER_LOST, naming the rank and how long it was silent, when a
 * rank it watches was silent past PLAIT_TIMEOUT_S; PLAIT_SUCCESS otherwise.
 * Silence is counted only while this rank watched: the coordinator checks
 * at least every PLAIT_TIMEOUT_S / 8 while in its loop, so a longer time
 * since the last check (this rank descheduled, or the whole host stalled;
 * a collective it ran) is not the peers' silence, beyond a heartbeat period:
 * it moves every last_heard forward by that much. Otherwise the first rank
 * to run again after a stall they all shared named the others lost before
 * they could send. */
plait_result_t plait_silence_check(plait_silence_t *s);

#endif
