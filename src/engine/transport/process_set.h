/*
 * Internal: the process sets of this process (plait_process_set_add).
 *
 * A process set is a sorted list of ranks of the job with an id; the global
 * set (id 0, every rank) always exists. Every rank knows every set, member
 * or not, because sets are added and removed by responses that every rank
 * runs in the same order (PLAIT_COLL_PSET_ADD / _REMOVE): so ids agree
 * everywhere (the lowest free id, as Horovod reuses freed ids) and rank 0's
 * negotiation reads membership from the same table. A member also holds the
 * transport's sub-state for the set (transport.h, subset) and the set's own
 * fusion buffer.
 *
 * One table per engine (engine.h: e->psets). Threads: the coordinator
 * thread is the only writer (add, remove, the fusion buffer); other threads
 * read through the plait_psets_* queries, which take the table's lock and
 * copy what they return.
 */
#ifndef PLAIT_PROCESS_SET_H
#define PLAIT_PROCESS_SET_H

#include <stdint.h>

#include "plait/transport.h"

typedef struct plait_pset {
  int32_t id;
  int n;      /* members */
  int *ranks; /* the members' ranks in the job, increasing */
  int index;  /* this rank's position in ranks, -1 when not a member */
  void *ts;   /* members: the transport state of the set (the job's for id 0) */
  void *fusion; /* members: the set's fusion buffer (transport memory) */
  size_t fusion_cap;
  uint64_t barriers; /* barriers submitted on this set by this rank: names them */
} plait_pset_t;

typedef struct plait_psets plait_psets_t;

/* At engine start, after the transport started: the global set only.
 * dynamic: whether plait_process_set_add/remove may be called (besides the
 * sets of PLAIT_PROCESS_SETS, added by plait_init itself). NULL when out of
 * memory (the error is set). */
plait_psets_t *plait_psets_create(int rank, int size, const plait_transport_t *t, void *ts,
                                  int dynamic);
/* At engine stop, after the coordinator stopped and before the transport
 * goes: releases every sub-state and fusion buffer (the global set's buffer
 * belongs to the executor), then the table. NULL is harmless. */
void plait_psets_destroy(plait_psets_t *P);
/* Numbers this engine's add/remove calls (their internal names). */
uint64_t plait_psets_next_call(plait_psets_t *P);

/* ---- Any thread ---- */

/* The transport the sets run on (NULL when not running). */
const plait_transport_t *plait_psets_transport(plait_psets_t *P);
/* Whether dynamic process sets were asked for at init. */
int plait_psets_dynamic(plait_psets_t *P);
/* Checks that id names a set this rank may run operations on; *n (may be
 * NULL) its size. Errors name fn, the id and, for a set this rank is not in,
 * the set's ranks: PLAIT_ERR_INVALID_ARGUMENT, PLAIT_ERR_NOT_INITIALIZED. */
plait_result_t plait_psets_check_member(plait_psets_t *P, const char *fn, int32_t id, int *n);
/* Whether global rank `rank` is a member of set id (0/1); -1 for an unknown id. */
int plait_psets_contains(plait_psets_t *P, int32_t id, int rank);
/* Copies what a query needs: size, this rank's index (-1), the ranks (up to
 * cap of them into ranks, which may be NULL with cap 0). PLAIT_ERR_INVALID_
 * ARGUMENT naming fn for an unknown id. */
plait_result_t plait_psets_query(plait_psets_t *P, const char *fn, int32_t id, int *n, int *index,
                                 int *ranks, int cap);
/* The id of the set of exactly these ranks (increasing), or -1. */
int32_t plait_psets_find(plait_psets_t *P, const int64_t *ranks, int n);
/* The ids in use, increasing (up to cap into ids); *count: how many. */
void plait_psets_ids(plait_psets_t *P, int32_t *ids, int cap, int *count);

/* The next barrier number of set id on this rank (for its internal name). */
uint64_t plait_psets_next_barrier(plait_psets_t *P, int32_t id);

/* ---- Coordinator thread ---- */

/* The set, or NULL when id is unknown. Valid until the set is removed. */
plait_pset_t *plait_psets_get(plait_psets_t *P, int32_t id);
/* Runs a PSET_ADD response: makes the transport's sub-state (a collective
 * over the job: every rank calls it, in response order) and registers the
 * set under the lowest free id (*id). */
plait_result_t plait_psets_apply_add(plait_psets_t *P, const int64_t *ranks, int n, int32_t *id);
/* Runs a PSET_REMOVE response: releases the set's sub-state and buffer. */
plait_result_t plait_psets_apply_remove(plait_psets_t *P, int32_t id);

#endif
