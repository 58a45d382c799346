/*
 * Internal: when a rank > 0 announces what was submitted to it.
 *
 * A rank > 0 announces each batch of submissions its coordinator drains as
 * one REQUESTS frame to rank 0. When a framework submits a step's gradients
 * one at a time, microseconds apart (plait.torch's DistributedOptimizer,
 * 200 tensors a step), that was one frame per few tensors: 17-25 frames a
 * step, each a send here and a wake-up, a read and a tick on rank 0, on
 * CPUs the framework's threads need.
 *
 * So a rank > 0 keeps the same record of bursts rank 0 keeps (burst.h: the
 * cached allreduces that ran in one response list), from the lists it runs,
 * which are rank 0's. Cached allreduces of the global process set that were
 * drained while some companion of their last burst has not been submitted
 * here yet are held back, at most hold_s (PLAIT_CYCLE_TIME_MS) from the
 * first of them, and go in one frame with the companions: rank 0 would hold
 * them for those companions anyway (negotiate.h), for the same time. A
 * lone operation, one never seen before, one whose burst is complete, and
 * anything that is not a cached allreduce (which also sends what is held)
 * go at once, as does everything once the fusion threshold's worth is held.
 * While it holds, the coordinator is not woken by each submission, only once
 * as many allreduces as companions are missing have come (plait_table_await).
 *
 * Not thread-safe: the coordinator thread of a rank > 0 owns it.
 */
#ifndef PLAIT_ANNOUNCE_H
#define PLAIT_ANNOUNCE_H

#include <stdint.h>

#include "engine/negotiate/burst.h"
#include "engine/negotiate/cache.h"
#include "engine/negotiate/messages.h"

typedef struct plait_announce {
  plait_bursts_t bursts;
  plait_request_list_t held; /* requests not sent yet (held.flags unused) */
  uint32_t cap;              /* room in held.r */
  double since;              /* when the first of them was held; -1: none */
  int missing;               /* their companions not submitted yet (0 when none held) */
  int *ids;                  /* scratch: their cache ids */
} plait_announce_t;

void plait_announce_init(plait_announce_t *a);
void plait_announce_free(plait_announce_t *a);

/* The response list l just ran: its cached allreduces are a burst. */
void plait_announce_ran(plait_announce_t *a, const plait_response_list_t *l);

/* req holds what was just drained (req->r allocated with malloc, or NULL
 * when empty). What is held goes in front of it; then, when may_hold and
 * everything in it is a cached allreduce of the global set whose burst is
 * incomplete, within threshold bytes and within hold_s of the first held,
 * it is all kept and req->n becomes 0; otherwise req carries all of it and
 * nothing stays held (out of memory: req as drained, the held stay held). */
void plait_announce_merge(plait_announce_t *a, plait_request_list_t *req, int may_hold,
                          const plait_cache_t *cache, uint64_t threshold, double hold_s,
                          double now);

/* When what is held must go at the latest (0: nothing held). */
double plait_announce_until(const plait_announce_t *a, double hold_s);

#endif
