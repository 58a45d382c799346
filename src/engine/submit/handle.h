/* Internal: operation handles, shared by the caller and the coordinator. */
#ifndef PLAIT_HANDLE_H
#define PLAIT_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/submit/entry.h"
#include "engine/submit/turn.h"
#include "plait/plait.h"

struct plait_handle {
  /* caller + coordinator; freed at 0. Atomic, outside the lock: the
   * coordinator drops its reference after the wake-up without taking the
   * lock again, so a woken waiter never finds it held */
  atomic_int refs;
  /* what a waiter sleeps on (util/futex.h): 0 running, 2 running and
   * someone sleeps, 1 done (set after done, so once it reads 1 the lock
   * shows done). Not a condition variable: waking from one costs the
   * waiter a third system call per operation (futex.h) */
  atomic_uint wake;
  /* PLAIT_CALLER_RUNS: set when the submission did not wake the coordinator
   * (plait_table_submit): the first wait tries to run the operation on its
   * own thread under this turn (turn.h), and takes it (NULL) either way */
  _Atomic(plait_turn_t *) turn;
  atomic_int looked; /* a poll or a wait with timeout 0 saw it unfinished */
  pthread_mutex_t mu; /* guards every field below */
  int done;
  int pending;       /* entries not yet finished */
  plait_result_t result;
  char *message;     /* the failure's message, NULL on success */
  plait_callback_fn callback;
  void *user_data;
  plait_coll_t coll;
  plait_tensor_t output; /* valid once done */
  void *owned;           /* library-owned output memory */
  /* how owned is freed (device memory: the transport's mem_free); NULL: free() */
  void (*owned_free)(void *ctx, void *owned);
  void *owned_ctx;
  int64_t *splits;       /* alltoall: rows received from each rank */
  int nsplits;
  int join_rank;
};

/* A new handle for n entries, refs = 2 (caller and coordinator). */
plait_handle_t *plait_handle_new(plait_coll_t coll, int n, const plait_op_options_t *opts);

/* The coordinator finished one entry of h with rc (message when rc != 0).
 * When the last entry finishes, h completes: waiters wake, the callback runs
 * (on this thread, without the lock) and the coordinator's reference drops. */
void plait_handle_finish(plait_handle_t *h, plait_result_t rc, const char *message);

/* Gives h the output it will report (called by the coordinator before the
 * last finish). Takes ownership of owned and splits. */
void plait_handle_set_output(plait_handle_t *h, const plait_tensor_t *out, void *owned,
                             int64_t *splits, int nsplits);

/* The same for an output that owned_free(ctx, owned) releases (called once,
 * on the thread that drops the last reference, e.g. plait_release's). */
void plait_handle_set_output_freed_by(plait_handle_t *h, const plait_tensor_t *out, void *owned,
                                      void (*owned_free)(void *ctx, void *owned), void *ctx,
                                      int64_t *splits, int nsplits);

/* After a join: the last rank to join. */
void plait_handle_set_join_rank(plait_handle_t *h, int rank);

/* Marks the calling thread as the coordinator (plait_wait refuses to block
 * there: only that thread can complete handles). */
void plait_handle_mark_coordinator_thread(void);

/* The submission of h's lone entry did not wake the coordinator: a wait
 * may run it under t (the handle takes a reference to t). */
void plait_handle_set_turn(plait_handle_t *h, plait_turn_t *t);

/* Drops the coordinator's reference without completing (used when the
 * submission itself failed before anything was queued). */
void plait_handle_abandon(plait_handle_t *h);

#endif
