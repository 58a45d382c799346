/* The turn word: idle, the coordinator's or a caller's (turn.h). */
#include "engine/submit/turn.h"

#include <stdlib.h>

#include "util/futex.h"

plait_turn_t *plait_turn_new(void (*run)(void *, plait_handle_t *, double), void (*wake)(void *),
                             void *ctx) {
  plait_turn_t *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  atomic_init(&t->word, PLAIT_TURN_IDLE);
  atomic_init(&t->refs, 1);
  t->run = run;
  t->wake = wake;
  t->ctx = ctx;
  return t;
}

void plait_turn_ref(plait_turn_t *t) { atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); }

void plait_turn_unref(plait_turn_t *t) {
  if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) free(t);
}

int plait_turn_coord_claim(plait_turn_t *t, int *knocked) {
  *knocked = 0;
  unsigned v = atomic_load_explicit(&t->word, memory_order_acquire);
  for (;;) {
    unsigned holder = v & PLAIT_TURN_HOLDER;
    if (holder == PLAIT_TURN_DEAD) return 0;
    if (holder == PLAIT_TURN_IDLE) { /* the knock is taken with it */
      if (atomic_compare_exchange_weak_explicit(&t->word, &v, PLAIT_TURN_COORD,
                                                memory_order_acq_rel, memory_order_acquire)) {
        *knocked = (v & PLAIT_TURN_KNOCK) != 0;
        return 1;
      }
      continue;
    }
    if (holder == PLAIT_TURN_COORD) { /* handed over by a caller's release */
      *knocked = (v & PLAIT_TURN_KNOCK) != 0;
      if (*knocked)
        atomic_fetch_and_explicit(&t->word, ~PLAIT_TURN_KNOCK, memory_order_acq_rel);
      return 1;
    }
    /* a caller's round: sleep until it gives the turn back */
    if (!(v & PLAIT_TURN_WAITER) &&
        !atomic_compare_exchange_weak_explicit(&t->word, &v, v | PLAIT_TURN_WAITER,
                                               memory_order_acq_rel, memory_order_acquire))
      continue;
    plait_futex_wait(&t->word, v | PLAIT_TURN_WAITER, NULL);
    v = atomic_load_explicit(&t->word, memory_order_acquire);
  }
}

int plait_turn_coord_release(plait_turn_t *t) {
  unsigned v = atomic_exchange_explicit(&t->word, PLAIT_TURN_IDLE, memory_order_acq_rel);
  return (v & PLAIT_TURN_KNOCK) != 0;
}

int plait_turn_caller_try(plait_turn_t *t) {
  unsigned v = atomic_load_explicit(&t->word, memory_order_acquire);
  for (;;) {
    unsigned holder = v & PLAIT_TURN_HOLDER;
    if (holder == PLAIT_TURN_DEAD) return 0;
    if (holder == PLAIT_TURN_IDLE) {
      if (atomic_compare_exchange_weak_explicit(&t->word, &v, (v & PLAIT_TURN_KNOCK) |
                                                PLAIT_TURN_CALLER, memory_order_acq_rel,
                                                memory_order_acquire))
        return 1;
      continue;
    }
    if (v & PLAIT_TURN_KNOCK) return 0;
    if (atomic_compare_exchange_weak_explicit(&t->word, &v, v | PLAIT_TURN_KNOCK,
                                              memory_order_acq_rel, memory_order_acquire))
      return 0;
  }
}

void plait_turn_caller_release(plait_turn_t *t) {
  unsigned v = atomic_load_explicit(&t->word, memory_order_acquire);
  for (;;) {
    if (v & PLAIT_TURN_KNOCK) { /* passed on while the coordinator is surely there */
      if (t->wake) t->wake(t->ctx);
      if (!atomic_compare_exchange_weak_explicit(&t->word, &v, v & ~PLAIT_TURN_KNOCK,
                                                 memory_order_acq_rel, memory_order_acquire))
        continue;
      v &= ~PLAIT_TURN_KNOCK;
    }
    /* a waiting coordinator gets the turn straight from this caller: left
     * idle, the next submission's caller would claim it first every time,
     * and the coordinator would spin in its claim (futex EAGAIN) for as long
     * as the callers run back to back */
    unsigned next = (v & PLAIT_TURN_WAITER) ? PLAIT_TURN_COORD : PLAIT_TURN_IDLE;
    if (atomic_compare_exchange_weak_explicit(&t->word, &v, next, memory_order_acq_rel,
                                              memory_order_acquire))
      break;
  }
  if (v & PLAIT_TURN_WAITER) plait_futex_wake_all(&t->word);
}

void plait_turn_kill(plait_turn_t *t) {
  atomic_store_explicit(&t->word, PLAIT_TURN_DEAD, memory_order_release);
}
