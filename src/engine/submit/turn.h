/*
 * Internal: the turn word (PLAIT_CALLER_RUNS; docs/performance.md, "Step 2:
 * the caller runs a lone cached collective"). Who may touch the
 * coordinator's state and call the transport right now: nobody (idle), the
 * coordinator, or one framework thread waiting on its handle (a caller),
 * claimed with compare-and-swap. So the transport is still called by one
 * thread at a time on each rank.
 *
 * The coordinator claims the turn whenever it is not asleep in its poll
 * (plait_turn_coord_claim), and waits while a caller holds it; the caller's
 * release then hands the turn to it (not idle, which the next submission's
 * caller would claim first, again and again). A caller
 * only tries (plait_turn_caller_try): one that cannot claim leaves a knock
 * and sleeps on its handle; the holder passes the knock on to the
 * coordinator (it runs another cycle, or is woken by the caller's wake
 * function), so an operation whose submission did not wake the coordinator
 * is never left waiting for its timer. plait_turn_kill ends callers' turns
 * for good (the coordinator stops); the word outlives the coordinator while
 * handles refer to it. Any thread.
 */
#ifndef PLAIT_TURN_H
#define PLAIT_TURN_H

#include <stdatomic.h>

#include "plait/plait.h"

#define PLAIT_TURN_IDLE 0u
#define PLAIT_TURN_COORD 1u
#define PLAIT_TURN_CALLER 2u
#define PLAIT_TURN_DEAD 3u
#define PLAIT_TURN_HOLDER 3u  /* the holder's bits */
#define PLAIT_TURN_KNOCK 4u   /* a caller could not claim: the coordinator must look */
#define PLAIT_TURN_WAITER 8u  /* the coordinator sleeps until the caller gives it back */

typedef struct plait_turn {
  atomic_uint word;
  atomic_int refs;
  /* a caller's round (under the turn, the coordinator's state in reach),
   * which may wait wait_s seconds more (< 0: no limit) */
  void (*run)(void *ctx, plait_handle_t *h, double wait_s);
  void (*wake)(void *ctx); /* wakes the coordinator (called holding the turn) */
  void *ctx;
} plait_turn_t;

/* A new word, idle, one reference (the coordinator's). NULL: no memory. */
plait_turn_t *plait_turn_new(void (*run)(void *, plait_handle_t *, double), void (*wake)(void *),
                             void *ctx);
void plait_turn_ref(plait_turn_t *t);
void plait_turn_unref(plait_turn_t *t); /* frees it at 0; NULL: nothing */

/* The coordinator takes the turn, sleeping while a caller holds it. 1 when
 * it holds it now (*knocked: a caller knocked since the coordinator last
 * looked), 0 when the word is dead. */
int plait_turn_coord_claim(plait_turn_t *t, int *knocked);

/* The coordinator gives the turn back; 1 when a caller knocked meanwhile
 * (then it must drain its table before it sleeps). */
int plait_turn_coord_release(plait_turn_t *t);

/* A caller tries once: 1 when it holds the turn now; 0 when the coordinator
 * or another caller does (a knock is left) or the word is dead. */
int plait_turn_caller_try(plait_turn_t *t);

/* The caller gives the turn back: a knock left meanwhile is passed to the
 * coordinator (t->wake, while still holding), and a coordinator waiting for
 * the turn is handed it and woken. */
void plait_turn_caller_release(plait_turn_t *t);

/* The coordinator stops, holding the turn (or before any caller could
 * claim it): no caller claims it again. */
void plait_turn_kill(plait_turn_t *t);

#endif
