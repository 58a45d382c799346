/*
 * The turn word (src/engine/submit/turn.c, PLAIT_CALLER_RUNS): who may call
 * the transport now, the coordinator or one caller, never both; a caller
 * that cannot claim leaves a knock that reaches the coordinator; a dead word
 * is never claimed again. No timing: every wait here waits for a state.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "engine/submit/turn.h"

static atomic_int wakes;
static void count_wake(void *ctx) {
  (void)ctx;
  atomic_fetch_add(&wakes, 1);
}

static plait_turn_t *fresh(void) {
  atomic_store(&wakes, 0);
  plait_turn_t *t = plait_turn_new(NULL, count_wake, NULL);
  cr_assert_not_null(t);
  return t;
}

Test(turn, caller_claims_idle_word_and_gives_it_back, .timeout = 120) {
  plait_turn_t *t = fresh();
  cr_assert_eq(plait_turn_caller_try(t), 1);
  cr_assert_eq(atomic_load(&t->word) & PLAIT_TURN_HOLDER, PLAIT_TURN_CALLER);
  cr_assert_eq(plait_turn_caller_try(t), 0, "a second caller must not claim a held turn");
  plait_turn_caller_release(t);
  cr_assert_eq(atomic_load(&wakes), 1, "the second caller's knock reaches the coordinator");
  cr_assert_eq(atomic_load(&t->word), PLAIT_TURN_IDLE);
  plait_turn_unref(t);
}

Test(turn, knock_while_coordinator_holds_is_reported_once, .timeout = 120) {
  plait_turn_t *t = fresh();
  int knocked = -1;
  cr_assert_eq(plait_turn_coord_claim(t, &knocked), 1);
  cr_assert_eq(knocked, 0);
  cr_assert_eq(plait_turn_caller_try(t), 0, "the coordinator holds the turn");
  cr_assert_eq(plait_turn_coord_release(t), 1, "the knock must make it cycle again");
  cr_assert_eq(plait_turn_coord_claim(t, &knocked), 1);
  cr_assert_eq(knocked, 0);
  cr_assert_eq(plait_turn_coord_release(t), 0);
  cr_assert_eq(atomic_load(&wakes), 0, "the coordinator itself was not woken: it holds the turn");
  plait_turn_unref(t);
}

typedef struct {
  plait_turn_t *t;
  atomic_int got;
  int claimed, knocked;
} coord_arg_t;

static void *coord_claims(void *arg) {
  coord_arg_t *a = arg;
  a->claimed = plait_turn_coord_claim(a->t, &a->knocked);
  atomic_store(&a->got, 1);
  return NULL;
}

Test(turn, coordinator_waits_for_the_callers_turn, .timeout = 120) {
  plait_turn_t *t = fresh();
  cr_assert_eq(plait_turn_caller_try(t), 1);
  coord_arg_t a = {t, 0, -1, -1};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, coord_claims, &a), 0);
  while (!(atomic_load(&t->word) & PLAIT_TURN_WAITER)) sched_yield(); /* it is waiting */
  cr_assert_eq(atomic_load(&a.got), 0, "the coordinator took a turn a caller holds");
  plait_turn_caller_release(t);
  pthread_join(th, NULL);
  cr_assert_eq(a.claimed, 1);
  cr_assert_eq(atomic_load(&t->word), PLAIT_TURN_COORD);
  cr_assert_eq(plait_turn_coord_release(t), 0);
  plait_turn_unref(t);
}

/* A waiting coordinator gets the turn from the caller's release: the next
 * caller, say the same thread submitting its next operation at once, cannot
 * claim it first (it knocks), so the coordinator is not left spinning in its
 * claim while callers run back to back. One thread plays both parts, the
 * coordinator's wait being the bit its claim sets before it sleeps. */
Test(turn, a_callers_release_hands_the_turn_to_a_waiting_coordinator, .timeout = 120) {
  plait_turn_t *t = fresh();
  cr_assert_eq(plait_turn_caller_try(t), 1);
  atomic_fetch_or(&t->word, PLAIT_TURN_WAITER); /* the coordinator sleeps in its claim */
  plait_turn_caller_release(t);
  cr_assert_eq(atomic_load(&t->word), PLAIT_TURN_COORD, "the turn was left idle, not handed over");
  cr_assert_eq(plait_turn_caller_try(t), 0, "a caller took the turn from a waiting coordinator");
  int knocked = -1;
  cr_assert_eq(plait_turn_coord_claim(t, &knocked), 1); /* it wakes: the turn is its own */
  cr_assert_eq(knocked, 1, "the caller's knock was not reported");
  cr_assert_eq(atomic_load(&t->word), PLAIT_TURN_COORD, "the knock was reported but left set");
  cr_assert_eq(plait_turn_coord_release(t), 0);
  cr_assert_eq(plait_turn_caller_try(t), 1, "the turn was not idle after the coordinator's");
  plait_turn_caller_release(t);
  cr_assert_eq(atomic_load(&t->word), PLAIT_TURN_IDLE, "no coordinator waited: idle");
  plait_turn_unref(t);
}

Test(turn, a_dead_word_is_never_claimed, .timeout = 120) {
  plait_turn_t *t = fresh();
  plait_turn_kill(t);
  int knocked;
  cr_assert_eq(plait_turn_caller_try(t), 0);
  cr_assert_eq(plait_turn_coord_claim(t, &knocked), 0);
  cr_assert_eq(atomic_load(&t->word), PLAIT_TURN_DEAD, "no knock on a dead word");
  plait_turn_unref(t);
}

typedef struct {
  plait_turn_t *t;
  atomic_int *inside;
  long *counter;
  atomic_int *overlaps;
  int coordinator;
} racer_t;

#define ROUNDS 20000

static void *race(void *arg) {
  racer_t *r = arg;
  for (int i = 0; i < ROUNDS;) {
    int knocked;
    int held = r->coordinator ? plait_turn_coord_claim(r->t, &knocked) : plait_turn_caller_try(r->t);
    if (!held) {
      sched_yield();
      continue;
    }
    if (atomic_fetch_add(r->inside, 1) != 0) atomic_fetch_add(r->overlaps, 1);
    (*r->counter)++; /* not atomic: the turn is the only guard */
    atomic_fetch_sub(r->inside, 1);
    if (r->coordinator) plait_turn_coord_release(r->t);
    else plait_turn_caller_release(r->t);
    i++;
  }
  return NULL;
}

Test(turn, one_holder_at_a_time_under_contention, .timeout = 120) {
  plait_turn_t *t = fresh();
  atomic_int inside = 0, overlaps = 0;
  long counter = 0;
  racer_t r[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    r[i] = (racer_t){t, &inside, &counter, &overlaps, i == 0};
    cr_assert_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  cr_assert_eq(atomic_load(&overlaps), 0, "two holders at once");
  cr_assert_eq(counter, 4L * ROUNDS);
  plait_turn_kill(t);
  plait_turn_unref(t);
}
