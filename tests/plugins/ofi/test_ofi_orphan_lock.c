/*
 * A mutex that a rescued thread left held (plugins/ofi/robustness/
 * orphan_lock.c): the close of its endpoint at a later init blocked on it
 * for ever (reset_cycles_ofi-shm_in_lock, 1 run in 6 under load). Released
 * only where the waiter is blocked on it in a futex wait, it is a normal
 * glibc mutex, and its owner is a thread of this process that has exited;
 * every other case is left alone.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "robustness/orphan_lock.h"

typedef struct {
  pthread_mutex_t *m;
  atomic_int tid;
  atomic_int got; /* the waiter took the lock */
  atomic_int hold; /* the owner keeps running until this reads 0 */
} shared_t;

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Locks and exits (or, with hold, waits) without unlocking. */
static void *owner(void *arg) {
  shared_t *s = arg;
  pthread_mutex_lock(s->m);
  atomic_store(&s->tid, ofi_gettid());
  while (atomic_load(&s->hold)) nap_ms(1);
  return NULL;
}

static void *waiter(void *arg) {
  shared_t *s = arg;
  atomic_store(&s->tid, ofi_gettid());
  pthread_mutex_lock(s->m);
  atomic_store(&s->got, 1);
  pthread_mutex_unlock(s->m);
  return NULL;
}

/* Starts the owner (exited unless hold) and a waiter blocked on m; returns
 * their tids once the waiter sits in its futex wait. */
static void start(pthread_mutex_t *m, int hold, shared_t *o, shared_t *w, pthread_t *ot,
                  pthread_t *wt) {
  *o = (shared_t){.m = m};
  *w = (shared_t){.m = m};
  atomic_store(&o->hold, hold);
  cr_assert_eq(pthread_create(ot, NULL, owner, o), 0);
  while (!atomic_load(&o->tid)) nap_ms(1);
  if (!hold) {
    pthread_join(*ot, NULL);
    cr_assert(ofi_thread_gone(atomic_load(&o->tid)));
  }
  cr_assert_eq(pthread_create(wt, NULL, waiter, w), 0);
  while (!atomic_load(&w->tid) || !ofi_futex_waited_on(atomic_load(&w->tid))) nap_ms(1);
  cr_assert_eq(ofi_futex_waited_on(atomic_load(&w->tid)), (void *)m,
               "the waiter waits on the mutex's word");
}

Test(orphan_lock, a_mutex_left_held_by_an_exited_thread_is_released_for_its_waiter) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  shared_t o, w;
  pthread_t ot, wt;
  start(&m, 0, &o, &w, &ot, &wt);
  cr_assert_eq(ofi_release_orphan_lock(atomic_load(&w.tid), atomic_load(&o.tid)), 1);
  pthread_join(wt, NULL);
  cr_assert(atomic_load(&w.got), "the waiter took the lock once it was released");
  cr_assert_eq(pthread_mutex_trylock(&m), 0, "and left it free");
  pthread_mutex_unlock(&m);
}

Test(orphan_lock, a_live_owner_is_never_robbed) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  shared_t o, w;
  pthread_t ot, wt;
  start(&m, 1, &o, &w, &ot, &wt);
  cr_assert_not(ofi_thread_gone(atomic_load(&o.tid)));
  cr_assert_eq(ofi_release_orphan_lock(atomic_load(&w.tid), atomic_load(&o.tid)), 0);
  nap_ms(20);
  cr_assert_not(atomic_load(&w.got), "still waiting: the owner lives");
  atomic_store(&o.hold, 0);
  pthread_join(ot, NULL);
  /* owned by the thread that has just exited: now it is an orphan */
  cr_assert_eq(ofi_release_orphan_lock(atomic_load(&w.tid), atomic_load(&o.tid)), 1);
  pthread_join(wt, NULL);
  cr_assert(atomic_load(&w.got));
}

Test(orphan_lock, another_owner_or_another_kind_is_left_alone) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  shared_t o, w;
  pthread_t ot, wt;
  start(&m, 0, &o, &w, &ot, &wt);
  int dead = atomic_load(&o.tid), waiting = atomic_load(&w.tid);
  /* the owner named is another live thread (here: the waiter itself) */
  cr_assert_eq(ofi_release_orphan_lock(waiting, waiting), 0);
  /* a thread not in a futex wait: this one, running */
  cr_assert_eq(ofi_release_orphan_lock(ofi_gettid(), dead), 0);
  cr_assert_null(ofi_futex_waited_on(ofi_gettid()));
  nap_ms(20);
  cr_assert_not(atomic_load(&w.got));
  cr_assert_eq(ofi_release_orphan_lock(waiting, dead), 1);
  pthread_join(wt, NULL);

  /* an error-checking mutex: its unlock checks the owner; never touched */
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_t e;
  pthread_mutex_init(&e, &a);
  start(&e, 0, &o, &w, &ot, &wt);
  cr_assert_eq(ofi_release_orphan_lock(atomic_load(&w.tid), atomic_load(&o.tid)), 0);
  nap_ms(20);
  cr_assert_not(atomic_load(&w.got));
  /* the waiter stays blocked: this test's process (Criterion's own) ends */
  pthread_detach(wt);
}

/* Its owner is the thread that asks: out of libfabric, it can never unlock
 * what a jump left held (a rescue on plait_shutdown's thread). */
Test(orphan_lock, a_mutex_the_asking_thread_owns_is_released_for_its_waiter) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  shared_t w = {.m = &m};
  pthread_t wt;
  pthread_mutex_lock(&m);
  cr_assert_eq(pthread_create(&wt, NULL, waiter, &w), 0);
  while (!atomic_load(&w.tid) || !ofi_futex_waited_on(atomic_load(&w.tid))) nap_ms(1);
  cr_assert_eq(ofi_release_orphan_lock(atomic_load(&w.tid), ofi_gettid()), 1);
  pthread_join(wt, NULL);
  cr_assert(atomic_load(&w.got));
}

Test(orphan_lock, a_thread_that_never_was_is_not_gone_and_zero_is_nobody) {
  cr_assert_not(ofi_thread_gone(0));
  cr_assert_not(ofi_thread_gone(ofi_gettid()));
  cr_assert_eq(ofi_release_orphan_lock(0, 0), 0);
}
