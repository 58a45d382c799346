/*
 * Tests of the submission table (src/engine/submit/table.c) directly
 * (plait_table_*): order, all-or-nothing submission, names in flight, the
 * internal names of barrier and join, closing, the wake-up eventfd, and
 * several threads submitting at once.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plait/plait.h"
#include "engine/submit/table.h"

static plait_table_t T = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void start(void) { cr_assert_eq(plait_table_open(&T), PLAIT_SUCCESS); }

static void free_list(plait_entry_t *e) {
  while (e) {
    plait_entry_t *next = e->next;
    plait_entry_free(e);
    e = next;
  }
}

static void stop(void) {
  free_list(plait_table_drain(&T));
  plait_table_destroy(&T);
}

static plait_entry_t *entry(const char *name, plait_coll_t coll) {
  plait_entry_t *e = calloc(1, sizeof *e);
  e->name = name ? strdup(name) : NULL;
  e->meta.coll = (uint8_t)coll;
  return e;
}

static int readable(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

Test(table, submissions_drain_in_order) {
  start();
  cr_assert_null(plait_table_drain(&T));
  plait_entry_t *g[3] = {entry("a", PLAIT_COLL_ALLREDUCE), entry("b", PLAIT_COLL_ALLREDUCE),
                         entry("c", PLAIT_COLL_BROADCAST)};
  cr_assert_eq(plait_table_submit(&T, g, 2), PLAIT_SUCCESS);
  cr_assert_eq(plait_table_submit(&T, g + 2, 1), PLAIT_SUCCESS);
  plait_entry_t *l = plait_table_drain(&T);
  cr_assert_eq(l, g[0]);
  cr_assert_eq(l->next, g[1]);
  cr_assert_eq(l->next->next, g[2]);
  cr_assert_null(g[2]->next);
  cr_assert_null(plait_table_drain(&T), "drained once");
  free_list(l);
  stop();
}

Test(table, a_name_in_flight_is_refused_until_forgotten) {
  start();
  plait_entry_t *a = entry("w", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &a, 1), PLAIT_SUCCESS);
  free_list(plait_table_drain(&T)); /* drained: still in flight */
  plait_entry_t *b = entry("w", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &b, 1), PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_str_eq(plait_last_error(), "a tensor named 'w' is already in flight on this rank: "
                   "wait for it before submitting the name again");
  plait_table_forget(&T, "w");
  cr_assert_eq(plait_table_submit(&T, &b, 1), PLAIT_SUCCESS, "free again once finished");
  stop();
}

Test(table, a_group_is_queued_whole_or_not_at_all) {
  start();
  plait_entry_t *w = entry("w", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &w, 1), PLAIT_SUCCESS);
  free_list(plait_table_drain(&T));
  plait_entry_t *g[3] = {entry("x", PLAIT_COLL_ALLREDUCE), entry("y", PLAIT_COLL_ALLREDUCE),
                         entry("w", PLAIT_COLL_ALLREDUCE)};
  cr_assert_eq(plait_table_submit(&T, g, 3), PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_null(plait_table_drain(&T), "nothing of the group is queued");
  cr_assert_null(plait_namemap_get(&T.inflight, "x"), "nor marked in flight");
  plait_entry_t *d[2] = {g[0], entry("x", PLAIT_COLL_ALLREDUCE)};
  cr_assert_eq(plait_table_submit(&T, d, 2), PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_str_eq(plait_last_error(), "the name 'x' appears twice in one group");
  cr_assert_eq(plait_table_submit(&T, g, 2), PLAIT_SUCCESS);
  free_list(plait_table_drain(&T));
  plait_entry_free(g[2]);
  plait_entry_free(d[1]);
  stop();
}

Test(table, barriers_and_joins_get_numbered_internal_names) {
  start();
  plait_entry_t *e[4] = {entry(NULL, PLAIT_COLL_BARRIER), entry(NULL, PLAIT_COLL_JOIN),
                         entry(NULL, PLAIT_COLL_BARRIER), NULL};
  for (int i = 0; i < 3; i++) cr_assert_eq(plait_table_submit(&T, &e[i], 1), PLAIT_SUCCESS);
  cr_assert_str_eq(e[0]->name, "plait:barrier.0");
  cr_assert_str_eq(e[1]->name, "plait:join.0");
  cr_assert_str_eq(e[2]->name, "plait:barrier.1");
  /* a joined rank took part in the others' barrier: its next one is .3 */
  plait_table_count_barrier(&T);
  e[3] = entry(NULL, PLAIT_COLL_BARRIER);
  cr_assert_eq(plait_table_submit(&T, &e[3], 1), PLAIT_SUCCESS);
  cr_assert_str_eq(e[3]->name, "plait:barrier.3");
  stop();
}

Test(table, a_closed_table_refuses_with_its_first_reason) {
  start();
  plait_table_close(&T, PLAIT_ERR_PEER_LOST, "rank 2 was lost");
  plait_table_close(&T, PLAIT_ERR_SHUTDOWN, "shutting down");
  plait_entry_t *a = entry("a", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &a, 1), PLAIT_ERR_PEER_LOST);
  cr_assert_str_eq(plait_last_error(), "rank 2 was lost");
  cr_assert_null(plait_table_drain(&T));
  plait_entry_free(a);
  stop();
}

Test(table, a_submission_wakes_the_coordinator) {
  start();
  cr_assert_not(readable(T.wake_fd));
  plait_entry_t *a = entry("a", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &a, 1), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd), "the eventfd is readable after a submission");
  plait_table_clear_wake(&T);
  cr_assert_not(readable(T.wake_fd), "and quiet once cleared");
  stop();
}

/* A burst writes the eventfd once until the coordinator clears it: the
 * counter holds 1 after three submissions; after the clear the next one
 * writes again. */
Test(table, a_burst_wakes_the_coordinator_once_until_it_clears) {
  start();
  const char *names[] = {"a", "b", "c"};
  for (int i = 0; i < 3; i++) {
    plait_entry_t *e = entry(names[i], PLAIT_COLL_ALLREDUCE);
    cr_assert_eq(plait_table_submit(&T, &e, 1), PLAIT_SUCCESS);
  }
  uint64_t v = 0;
  cr_assert_eq(read(T.wake_fd, &v, sizeof v), (ssize_t)sizeof v);
  cr_assert_eq(v, 1, "three submissions before a clear wrote the eventfd %llu times",
               (unsigned long long)v);
  cr_assert_eq(T.woken, 1, "the table still counts itself woken until the coordinator clears");
  plait_table_clear_wake(&T);
  cr_assert_eq(T.woken, 0);
  plait_entry_t *d = entry("d", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &d, 1), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd), "the first submission after a clear wakes it again");
  stop();
}

/* Lazy (rank 0 with nothing pending): a global operation does not wake the
 * coordinator, since it drains at its next wake-up anyway; one in another
 * process set, or a join, still does (it may be ready without any other
 * rank's message). set_lazy reports entries that came while lazy, so the
 * coordinator drains them before it sleeps again. */
Test(table, a_lazy_coordinator_is_woken_only_by_what_cannot_wait) {
  start();
  cr_assert_eq(plait_table_set_lazy(&T, 1), 0, "nothing waiting");
  plait_entry_t *a = entry("a", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &a, 1), PLAIT_SUCCESS);
  cr_assert_not(readable(T.wake_fd), "a global allreduce does not wake a lazy coordinator");
  cr_assert_eq(plait_table_set_lazy(&T, 1), 1, "but set_lazy says it is waiting");
  cr_assert_eq(T.lazy, 0, "and the table is not lazy while it waits");
  plait_entry_t *b = entry("b", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &b, 1), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd), "so the next submission wakes it");
  plait_table_clear_wake(&T);
  free_list(plait_table_drain(&T));
  plait_entry_t *other[3] = {entry("c", PLAIT_COLL_ALLREDUCE), entry(NULL, PLAIT_COLL_JOIN),
                             entry("d", PLAIT_COLL_BROADCAST)};
  other[2]->meta.pset = 3;
  for (int i = 1; i < 3; i++) {
    cr_assert_eq(plait_table_set_lazy(&T, 1), 0);
    plait_entry_t *pair[2] = {other[0], other[i]};
    cr_assert_eq(plait_table_submit(&T, pair, 2), PLAIT_SUCCESS);
    cr_assert(readable(T.wake_fd), "entry %d cannot wait for another rank: it wakes", i);
    plait_table_clear_wake(&T);
    plait_entry_t *l = plait_table_drain(&T);
    cr_assert_eq(l, other[0]);
    plait_table_forget(&T, "c"); /* c is submitted again in the next round */
    l->next = NULL;
  }
  free_list(other[0]);
  free_list(other[1]);
  free_list(other[2]);
  cr_assert_eq(plait_table_set_lazy(&T, 0), 0);
  plait_entry_t *e = entry("e", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &e, 1), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd), "not lazy: every submission wakes");
  stop();
}

Test(table, an_awaiting_coordinator_is_woken_when_the_companions_have_come) {
  start();
  plait_table_await(&T, 3);
  plait_entry_t *a[3] = {entry("a", PLAIT_COLL_ALLREDUCE), entry("b", PLAIT_COLL_ALLREDUCE),
                         entry("c", PLAIT_COLL_ALLREDUCE)};
  cr_assert_eq(plait_table_submit(&T, a, 1), PLAIT_SUCCESS);
  cr_assert_eq(plait_table_submit(&T, a + 1, 1), PLAIT_SUCCESS);
  cr_assert_not(readable(T.wake_fd), "two of the three awaited: no wake-up yet");
  cr_assert_eq(plait_table_submit(&T, a + 2, 1), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd), "the third wakes it");
  plait_table_clear_wake(&T);
  cr_assert_eq(T.awaiting, 0, "clearing the wake-up ends the wait");
  free_list(plait_table_drain(&T));
  /* submitted between a drain and the await: they count as come, and the
   * wake-up the first of them wrote is taken back until the rest come */
  plait_table_clear_wake(&T);
  plait_entry_t *early[3] = {entry("h", PLAIT_COLL_ALLREDUCE), entry("i", PLAIT_COLL_ALLREDUCE),
                             entry("j", PLAIT_COLL_ALLREDUCE)};
  cr_assert_eq(plait_table_submit(&T, early, 1), PLAIT_SUCCESS);
  cr_assert_eq(plait_table_submit(&T, early + 1, 1), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd), "nothing awaited yet: the first wrote");
  plait_table_await(&T, 3);
  cr_assert_eq(T.awaiting, 1, "two of the three came before the await");
  cr_assert_not(readable(T.wake_fd), "their wake-up is taken back");
  cr_assert_eq(plait_table_submit(&T, early + 2, 1), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd), "the third wakes it");
  plait_table_clear_wake(&T);
  plait_entry_t *l = plait_table_drain(&T);
  cr_assert(l == early[0] && l->next == early[1] && l->next->next == early[2], "all three wait");
  free_list(l);
  plait_entry_t *m = entry("m", PLAIT_COLL_ALLREDUCE);
  cr_assert_eq(plait_table_submit(&T, &m, 1), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd));
  plait_table_await(&T, 1);
  cr_assert_eq(T.awaiting, 0, "as many waiting as awaited: nothing is awaited");
  cr_assert(readable(T.wake_fd), "and their wake-up stands");
  free_list(plait_table_drain(&T));
  plait_table_clear_wake(&T);
  plait_entry_t *b = entry("k", PLAIT_COLL_BROADCAST);
  cr_assert_eq(plait_table_submit(&T, &b, 1), PLAIT_SUCCESS);
  plait_table_await(&T, 5);
  cr_assert_eq(T.awaiting, 0, "a broadcast waiting: nothing is awaited");
  cr_assert(readable(T.wake_fd), "and its wake-up stands");
  plait_table_clear_wake(&T);
  free_list(plait_table_drain(&T));
  /* anything but a global allreduce wakes at once */
  plait_entry_t *other[3] = {entry("d", PLAIT_COLL_BROADCAST), entry(NULL, PLAIT_COLL_BARRIER),
                             entry("e", PLAIT_COLL_ALLREDUCE)};
  other[2]->meta.pset = 2;
  for (int i = 0; i < 3; i++) {
    plait_table_await(&T, 5);
    cr_assert_eq(plait_table_submit(&T, &other[i], 1), PLAIT_SUCCESS);
    cr_assert(readable(T.wake_fd), "entry %d is not a global allreduce: it wakes", i);
    plait_table_clear_wake(&T);
    free_list(plait_table_drain(&T));
  }
  plait_table_await(&T, 2); /* a group of two counts as two */
  plait_entry_t *g[2] = {entry("f", PLAIT_COLL_ALLREDUCE), entry("g", PLAIT_COLL_ALLREDUCE)};
  cr_assert_eq(plait_table_submit(&T, g, 2), PLAIT_SUCCESS);
  cr_assert(readable(T.wake_fd), "both awaited came at once");
  stop();
}

enum { THREADS = 4, EACH = 500 };

static void *submitter(void *arg) {
  int id = (int)(intptr_t)arg;
  for (int i = 0; i < EACH; i++) {
    char name[32];
    snprintf(name, sizeof name, "t%d.%d", id, i);
    plait_entry_t *e = entry(name, PLAIT_COLL_ALLREDUCE);
    if (plait_table_submit(&T, &e, 1) != PLAIT_SUCCESS) return (void *)1;
  }
  return NULL;
}

/* Every submission from several threads comes out exactly once, and each
 * thread's in its own order. */
Test(table, concurrent_submissions_each_drain_once_in_order) {
  start();
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_create(&th[i], NULL, submitter, (void *)(intptr_t)i), 0);
  int next[THREADS] = {0}, total = 0;
  /* as the coordinator does: wait on the eventfd, clear it, drain */
  while (total < THREADS * EACH) {
    struct pollfd p = {T.wake_fd, POLLIN, 0};
    cr_assert_eq(poll(&p, 1, 30000), 1, "no wake-up within 30 s after %d entries", total);
    plait_table_clear_wake(&T);
    plait_entry_t *l = plait_table_drain(&T);
    for (plait_entry_t *e = l; e; e = e->next, total++) {
      int id, i;
      cr_assert_eq(sscanf(e->name, "t%d.%d", &id, &i), 2);
      cr_assert_eq(i, next[id]++, "thread %d's entries out of order", id);
    }
    free_list(l);
  }
  for (int i = 0; i < THREADS; i++) {
    void *rc;
    pthread_join(th[i], &rc);
    cr_assert_null(rc, "thread %d failed to submit: %s", i, plait_last_error());
  }
  cr_assert_eq(total, THREADS * EACH);
  stop();
}
