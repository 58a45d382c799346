/*
 * Internal: where framework threads hand operations to the coordinator.
 * Submissions are appended under one mutex; the coordinator drains them. The
 * set of names in flight (submitted, not yet finished) lives here too, so a
 * duplicate name is refused at once on the submitting thread. Closing the
 * table (failure or shutdown) makes later submissions fail with its reason.
 */
#ifndef PLAIT_TABLE_H
#define PLAIT_TABLE_H

#include <pthread.h>
#include <stdint.h>

#include "engine/submit/entry.h"
#include "engine/submit/namemap.h"
#include "engine/submit/turn.h"
#include "engine/observe/timeline.h"

typedef struct plait_table {
  pthread_mutex_t mu;
  plait_entry_t *head, *tail; /* submitted, not yet drained */
  plait_namemap_t inflight;   /* name -> entry, until finished */
  int wake_fd;                /* eventfd: written on submission (unless lazy) */
  int woken;                  /* wake_fd written since the coordinator last cleared it */
  int lazy;                   /* see plait_table_set_lazy */
  int64_t awaiting;           /* see plait_table_await */
  int lone;                   /* see plait_table_set_lone */
  plait_turn_t *turn;         /* PLAIT_CALLER_RUNS: the coordinator's turn word */
  int open;
  plait_result_t closed_rc;
  char closed_msg[1024];
  uint64_t barriers, joins; /* numbers the internal names of barrier and join */
  plait_timeline_t *tl;     /* the engine's timeline: NEGOTIATE begins at submission */
} plait_table_t;

plait_result_t plait_table_open(plait_table_t *t);
/* Frees what is left (the coordinator has finished every entry). */
void plait_table_destroy(plait_table_t *t);

/* Appends all n entries, or none: fails on a name already in flight (or
 * repeated within the n), or when the table is closed. For barrier and join
 * entries (name NULL) it assigns the next internal name. */
plait_result_t plait_table_submit(plait_table_t *t, plait_entry_t **entries, int n);

/* Takes every submitted entry (a list in submission order). */
plait_entry_t *plait_table_drain(plait_table_t *t);

/* The entry with this key (plait_op_key: its name within its process set)
 * has finished: the name may be used again there. */
void plait_table_forget(plait_table_t *t, const char *key);

/* Later submissions fail with rc and msg. */
void plait_table_close(plait_table_t *t, plait_result_t rc, const char *msg);

/* A joined rank took part in the others' barrier: it counts it as its own, so
 * the next barrier every rank submits gets the same internal name on all. */
void plait_table_count_barrier(plait_table_t *t);

/* Clears the wake-up signal (the coordinator calls it before draining).
 * Only the first submission after a clear writes the eventfd: the ones after
 * it, before the coordinator has drained, would only repeat the wake-up (a
 * burst of 200 allreduces makes one write, not 200). */
void plait_table_clear_wake(plait_table_t *t);

/* The coordinator, before it sleeps, says whether it will drain the table at
 * its next wake-up whatever wakes it (lazy = 1): rank 0 when nothing is
 * pending, since no operation of the global process set can then become
 * ready before another rank's announcement wakes it. While lazy, a
 * submission of such operations only (process set 0, no join) does not
 * write the eventfd: that saves a wake-up and a cycle of rank 0 per
 * operation. Returns 1, and leaves lazy 0, when entries are waiting (then
 * the coordinator must drain before it sleeps); else 0. */
int plait_table_set_lazy(plait_table_t *t, int lazy);

/* PLAIT_CALLER_RUNS: the coordinator, before it sleeps, says whether the
 * open cached epoch's burst is one allreduce (lone = 1; t->turn set). While
 * it is, a lone submission of one allreduce of the global process set, in
 * host memory, without a callback and with the timeline off, does not
 * write the eventfd: its handle gets the turn (plait_handle_set_turn), and
 * its wait runs the round (or the coordinator's epoch timer does). Returns
 * 1 when entries are waiting (then the coordinator drains before it sleeps,
 * so that nothing submitted quietly is left when lone ends); else 0. */
int plait_table_set_lone(plait_table_t *t, int lone);

/* Writes the eventfd (unless already written since the last clear). */
void plait_table_wake(plait_table_t *t);

/* A rank > 0 holding back cached allreduces for k companions not submitted
 * yet (announce.h): the next submissions of allreduces of the global
 * process set do not write the eventfd until k of them have come; any other
 * submission does. The coordinator wakes for the hold's end by itself.
 * Cleared by plait_table_clear_wake. Global allreduces submitted since the
 * last drain count as come: fewer than k, and the wake-up they wrote is
 * taken back (while a framework submits a step's gradients, the coordinator
 * would otherwise wake for every few of them, each time merging all it
 * holds); k or more, or anything else waiting, and it stands. k 0: off. */
void plait_table_await(plait_table_t *t, int64_t k);

#endif
