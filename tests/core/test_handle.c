/*
 * Operation handles (src/engine/submit/handle.c): completion, waiting, the
 * callback and the two references (the caller's and the coordinator's).
 *
 * The first test pins down the hand-off cut of issue 37 goal 1: once the
 * last entry finishes, the coordinator drops its reference without taking
 * the handle's lock again, so a waiter that woke and holds the lock never
 * makes it wait (nor itself block on the lock once more); the waiter sleeps
 * on a word (util/futex.h), not a condition variable. A callback here
 * takes the lock and keeps it, as such a waiter would; plait_handle_finish
 * must return all the same (it hung in pthread_mutex_lock before). The
 * others check that the behaviour around it is unchanged.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "engine/submit/handle.h"

typedef struct {
  plait_handle_t *h;
  atomic_int finished;
} finisher_t;

static void *finish_thread(void *arg) {
  finisher_t *f = arg;
  plait_handle_finish(f->h, PLAIT_SUCCESS, NULL);
  atomic_store(&f->finished, 1);
  return NULL;
}

/* The callback keeps the handle's lock, as a woken waiter holding it would. */
static void lock_and_keep(plait_handle_t *h, plait_result_t rc, void *user) {
  (void)rc;
  (void)user;
  pthread_mutex_lock(&h->mu);
}

/* Joins t within s seconds; 0 when it did. */
static int join_within(pthread_t t, double s) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)s;
  return pthread_timedjoin_np(t, NULL, &until);
}

Test(handle, finish_takes_no_lock_after_the_wake_up) {
  plait_op_options_t opts = {.struct_size = sizeof opts, .callback = lock_and_keep};
  plait_handle_t *h = plait_handle_new(PLAIT_COLL_ALLREDUCE, 1, &opts);
  cr_assert_not_null(h);
  finisher_t f = {h, 0};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, finish_thread, &f), 0);
  int joined = join_within(t, 5);
  int done = atomic_load(&f.finished);
  pthread_mutex_unlock(&h->mu); /* the callback's; lets a blocked finisher go */
  if (joined) pthread_join(t, NULL);
  cr_expect_eq(joined, 0, "plait_handle_finish waited for the handle's lock after completing "
               "it (a woken waiter holding the lock would block the coordinator)");
  cr_expect(done);
  int d = 0;
  cr_expect_eq(plait_poll(h, &d), PLAIT_SUCCESS);
  cr_expect_eq(d, 1);
  cr_expect_eq(plait_wait(h, 0), PLAIT_SUCCESS);
  plait_release(h);
}

typedef struct {
  plait_handle_t *h;
  plait_result_t rc;
} waiter_t;

static void *wait_thread(void *arg) {
  waiter_t *w = arg;
  w->rc = plait_wait(w->h, 30);
  return NULL;
}

/* A handle of two entries: done at the second finish, with the first failure. */
Test(handle, completes_at_the_last_entry_with_the_first_failure) {
  plait_handle_t *h = plait_handle_new(PLAIT_COLL_ALLREDUCE, 2, NULL);
  cr_assert_not_null(h);
  waiter_t w = {h, PLAIT_SUCCESS};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
  plait_handle_finish(h, PLAIT_ERR_MISMATCH, "shape [2] against [3]");
  int d = 1;
  cr_expect_eq(plait_poll(h, &d), PLAIT_SUCCESS);
  cr_expect_eq(d, 0, "done after one of two entries");
  plait_handle_finish(h, PLAIT_SUCCESS, NULL);
  cr_assert_eq(join_within(t, 30), 0, "the waiter did not wake");
  cr_expect_eq(w.rc, PLAIT_ERR_MISMATCH);
  cr_expect_eq(plait_wait(h, 0), PLAIT_ERR_MISMATCH);
  cr_expect(strstr(plait_last_error(), "shape [2] against [3]") != NULL, "%s",
            plait_last_error());
  plait_release(h);
}

static atomic_int callbacks;

static void release_in_callback(plait_handle_t *h, plait_result_t rc, void *user) {
  (void)user;
  cr_expect_eq(rc, PLAIT_SUCCESS);
  atomic_fetch_add(&callbacks, 1);
  plait_release(h); /* the caller's reference: the coordinator's keeps h alive */
}

/* The callback may release the handle: finishing goes on safely. */
Test(handle, callback_may_release) {
  atomic_store(&callbacks, 0);
  for (int i = 0; i < 100; i++) {
    plait_op_options_t opts = {.struct_size = sizeof opts, .callback = release_in_callback};
    plait_handle_t *h = plait_handle_new(PLAIT_COLL_ALLREDUCE, 1, &opts);
    cr_assert_not_null(h);
    plait_handle_finish(h, PLAIT_SUCCESS, NULL);
  }
  cr_expect_eq(atomic_load(&callbacks), 100);
}

/* Released before it finishes, or abandoned: the other reference frees it. */
Test(handle, either_reference_may_go_first) {
  for (int i = 0; i < 100; i++) {
    plait_handle_t *h = plait_handle_new(PLAIT_COLL_ALLREDUCE, 1, NULL);
    cr_assert_not_null(h);
    if (i % 2) {
      plait_release(h);
      plait_handle_finish(h, PLAIT_SUCCESS, NULL);
    } else {
      plait_handle_abandon(h);
      cr_expect_eq(plait_wait(h, 0), PLAIT_ERR_TIMEOUT);
      plait_release(h);
    }
  }
}

typedef struct {
  plait_handle_t *h;
  atomic_int *go;
} racer_t;

static void *racing_finish(void *arg) {
  racer_t *r = arg;
  while (!atomic_load(r->go)) {
  }
  plait_handle_finish(r->h, PLAIT_SUCCESS, NULL);
  return NULL;
}

/* A waiter and the finisher race many times; every wait sees it done. */
Test(handle, wait_and_finish_race) {
  for (int i = 0; i < 2000; i++) {
    plait_handle_t *h = plait_handle_new(PLAIT_COLL_ALLREDUCE, 1, NULL);
    cr_assert_not_null(h);
    atomic_int go = 0;
    racer_t r = {h, &go};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, racing_finish, &r), 0);
    atomic_store(&go, 1);
    cr_assert_eq(plait_wait(h, 30), PLAIT_SUCCESS);
    int released = 0;
    cr_assert_eq(plait_wait_release(h, 0, &released), PLAIT_SUCCESS);
    cr_assert_eq(released, 1);
    pthread_join(t, NULL);
  }
}

/* A timed wait on a handle nobody finishes ends with PLAIT_ERR_TIMEOUT (no
 * duration is asserted); the handle still completes afterwards. */
Test(handle, timed_wait_times_out) {
  plait_handle_t *h = plait_handle_new(PLAIT_COLL_ALLREDUCE, 1, NULL);
  cr_assert_not_null(h);
  cr_expect_eq(plait_wait(h, 0.05), PLAIT_ERR_TIMEOUT);
  cr_expect(strstr(plait_last_error(), "still running") != NULL, "%s", plait_last_error());
  cr_expect_eq(plait_wait(h, 0), PLAIT_ERR_TIMEOUT);
  plait_handle_finish(h, PLAIT_SUCCESS, NULL);
  cr_expect_eq(plait_wait(h, 0.05), PLAIT_SUCCESS);
  plait_release(h);
}

/* Several threads asleep on one handle all wake at its completion. */
Test(handle, every_waiter_wakes) {
  plait_handle_t *h = plait_handle_new(PLAIT_COLL_ALLREDUCE, 1, NULL);
  cr_assert_not_null(h);
  enum { N = 4 };
  waiter_t w[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    w[i] = (waiter_t){h, PLAIT_ERR_INTERNAL};
    cr_assert_eq(pthread_create(&t[i], NULL, wait_thread, &w[i]), 0);
  }
  while (atomic_load(&h->wake) != 2) { /* at least one is asleep, or about to be */
  }
  plait_handle_finish(h, PLAIT_SUCCESS, NULL);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(join_within(t[i], 30), 0, "waiter %d did not wake", i);
    cr_expect_eq(w[i].rc, PLAIT_SUCCESS);
  }
  plait_release(h);
}
