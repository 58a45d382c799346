/*
 * Internal: rank 0's deadlock detection, a part of the stall inspector.
 *
 * A stall is an operation that some ranks have not announced yet: they may
 * be busy, so it is only warned about (PLAIT_STALL_WARN_S). A deadlock is
 * when waiting cannot help: a set of ranks T, each with at least one
 * operation pending (announced to rank 0, not yet ready), where every
 * pending operation announced by a rank of T still misses a rank of T. No
 * rank outside T can complete any of them, and the ranks of T are waiting.
 * When, in addition, nothing moved for any rank of T (no announcement, no
 * operation of theirs became ready or failed) for PLAIT_STALL_WARN_S, every
 * pending operation announced by a rank of T fails on every rank with
 * PLAIT_ERR_STALLED and a message that names each rank's pending names:
 *
 *   deadlock: no operation can complete: rank 0 waits on 'alltoall.noname.110';
 *   rank 1 waits on 'alltoall.noname.111' (nothing moved for 60.0 s,
 *   PLAIT_STALL_WARN_S=60)
 *
 T is the largest such set (a fixed point: start from the ranks with
 * something pending and quiet for the stall time, drop every rank that has a
 * pending operation missing only ranks outside T, repeat). A rank with
 * nothing pending, or that moved lately, is free, never stuck, and the ranks
 * that only it could complete are not stuck either.
 * Joined ranks count as present where the readiness rule says so
 * (allreduce, allgather, barrier of the global set); an operation of a
 * process set needs that set's members only. A join is never failed (its
 * rank waits for the others to join, which after the verdict they can).
 *
 * Assumption, documented in docs/coordinator.md: a rank with an operation
 * pending is waiting for it. A rank that submits asynchronously, keeps
 * computing for longer than PLAIT_STALL_WARN_S and only then submits what
 * the others wait for is judged deadlocked; raise PLAIT_STALL_WARN_S or set
 * it to 0 (no stall inspector, no deadlock detection) for such a program.
 *
 * Rank 0's coordinator thread also runs the response lists: a tick that
 * comes long after the previous one (the thread was in a long collective)
 * counts as movement of every rank, so a collective longer than the stall
 * time is never followed by a verdict before the ranks' next announcements
 * arrive.
 *
 * Not thread-safe: the negotiator's (rank 0's coordinator thread).
 */
#ifndef PLAIT_DEADLOCK_H
#define PLAIT_DEADLOCK_H

#include <stdint.h>

#include "plait/plait.h"

typedef struct plait_deadlock {
  int size;
  double *moved;     /* per rank: when it last announced, or an operation of
                        its became ready or failed (the time of the tick that
                        saw it, so one clock: the tick's) */
  uint8_t *dirty;    /* per rank: moved since the last tick */
  int any_dirty;
  double last_tick;  /* the previous inspection's time (0: none yet) */
  double last_check; /* the previous full check (every 0.1 s at most) */
  uint64_t verdicts; /* deadlocks found so far */
} plait_deadlock_t;

/* -1 when out of memory. */
int plait_deadlock_init(plait_deadlock_t *d, int size);
void plait_deadlock_free(plait_deadlock_t *d);

/* rank moved (announced something); noted at the next tick. */
void plait_deadlock_moved(plait_deadlock_t *d, int rank);
/* Ranks lo to hi moved (a subtree's level: negotiate/cover.c). */
void plait_deadlock_moved_range(plait_deadlock_t *d, int lo, int hi);
/* Every rank marked in member (size entries) moved (an operation became
 * ready or failed); NULL: every rank. */
void plait_deadlock_moved_set(plait_deadlock_t *d, const uint8_t *member);

struct plait_negotiator;
/* The check, in the negotiator's tick (before the stall warnings): with
 * stall_warn_s > 0, a deadlock found at now fails its operations into the
 * negotiator's ready list (error responses and tombstones, as a stall abort
 * does). */
plait_result_t plait_deadlock_inspect(struct plait_negotiator *n, double now);

#endif
