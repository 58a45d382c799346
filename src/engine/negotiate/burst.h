/*
 * Internal: what ran together last time. Rank 0 records, for every cached
 * allreduce (by response-cache id), the response list it last ran in: its
 * "burst". When operations that every rank has announced are ready, rank 0
 * asks whether any of them is still missing a companion from its last burst
 * (a cached operation that ran in the same list last time and is not ready
 * yet): only then is waiting worth it, because that companion is expected
 * and would fuse with them. A lone operation, one never seen before, and one
 * whose companions are all here go at once.
 *
 * Bursts are numbered from a pool as large as the number of ids recorded
 * (each live burst has at least one member), so memory grows with the
 * response cache and nothing is ever searched. Not thread-safe: the
 * coordinator thread of rank 0 owns it.
 */
#ifndef PLAIT_BURST_H
#define PLAIT_BURST_H

#include <stdint.h>

#include "plait/plait.h"
#include "engine/negotiate/messages.h"

typedef struct plait_bursts {
  int cap;          /* cache ids (and burst numbers) with room in the arrays */
  int *of;          /* per cache id: its burst, -1 none */
  int *count;       /* per burst: members */
  int *free_list;   /* burst numbers with no member */
  int nfree;
  uint64_t *stamp;  /* per burst: the query that last counted it */
  int *ready;       /* per burst: members ready in the query of stamp */
  uint64_t queries;
  int *list_ids;    /* plait_bursts_record_list's scratch */
  int list_cap;
} plait_bursts_t;

void plait_bursts_init(plait_bursts_t *b);
void plait_bursts_free(plait_bursts_t *b);

/* The cache ids in ids[0..n) just ran in one response list: each leaves its
 * old burst and together they form a new one (n == 0: nothing). Ids must be
 * distinct and >= 0. PLAIT_ERR_NO_MEMORY leaves the old bursts as they were
 * for the ids not yet moved (only a hint is lost). */
plait_result_t plait_bursts_record(plait_bursts_t *b, const int *ids, int n);

/* The response list l ran: its cached allreduces (by the id they were sent
 * by, or the one assigned to them) that did not fail form one burst. What
 * every rank records from the same lists is the same. Out of memory: a
 * hint lost, nothing else. */
void plait_bursts_record_list(plait_bursts_t *b, const plait_response_list_t *l);

/* 1 when some id in ready[0..n) (cache ids of ready operations; -1 entries
 * are skipped) has a member of its last burst that is not among them. */
int plait_bursts_incomplete(plait_bursts_t *b, const int *ready, int n);

/* How many members of the last bursts of the ids in ready[0..n) are not
 * among them (0: every burst they touch is whole). */
int plait_bursts_missing(plait_bursts_t *b, const int *ready, int n);

#endif
