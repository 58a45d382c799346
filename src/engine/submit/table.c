/* The submission table: a locked list, the in-flight name set, an eventfd. */
#include "engine/submit/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/error.h"
#include "engine/observe/timeline.h"
#include "engine/submit/handle.h"

plait_result_t plait_table_open(plait_table_t *t) {
  pthread_mutex_t mu = t->mu; /* initialized by the owner (the coordinator) */
  memset(t, 0, sizeof *t);
  t->mu = mu;
  if (plait_namemap_init(&t->inflight))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory creating the tensor table");
  t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (t->wake_fd < 0) {
    plait_namemap_free(&t->inflight);
    return plait_error(PLAIT_ERR_SYSTEM, "eventfd failed");
  }
  t->open = 1;
  return PLAIT_SUCCESS;
}

void plait_table_destroy(plait_table_t *t) {
  /* The mutex stays usable: a submission racing shutdown finds the table
   * closed rather than a destroyed lock. */
  pthread_mutex_lock(&t->mu);
  t->open = 0;
  plait_namemap_free(&t->inflight);
  if (t->wake_fd >= 0) close(t->wake_fd);
  t->wake_fd = -1;
  pthread_mutex_unlock(&t->mu);
}

static void internal_name(plait_table_t *t, plait_entry_t *e) {
  char buf[64];
  if (e->meta.coll == PLAIT_COLL_BARRIER)
    snprintf(buf, sizeof buf, "plait:barrier.%llu", (unsigned long long)t->barriers);
  else
    snprintf(buf, sizeof buf, "plait:join.%llu", (unsigned long long)t->joins);
  e->name = strdup(buf);
}

/* Checks every name is free; the lock is held. */
static plait_result_t check_names_locked(plait_table_t *t, plait_entry_t **entries, int n) {
  for (int i = 0; i < n; i++) {
    char key[PLAIT_OP_KEY_MAX];
    if (plait_namemap_get(&t->inflight, plait_op_key(key, entries[i]->meta.pset,
                                                     entries[i]->name)))
      return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "a tensor named '%s' is already in flight on "
                         "this rank%s: wait for it before submitting the name again",
                         entries[i]->name, entries[i]->meta.pset ? " in this process set" : "");
    for (int j = 0; j < i; j++)
      if (!strcmp(entries[i]->name, entries[j]->name))
        return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "the name '%s' appears twice in one group",
                           entries[i]->name);
  }
  return PLAIT_SUCCESS;
}

/* Operations that need another rank's announcement before they can run. */
static int global_only(plait_entry_t **entries, int n) {
  for (int i = 0; i < n; i++)
    if (entries[i]->meta.pset != 0 || entries[i]->meta.coll == PLAIT_COLL_JOIN) return 0;
  return 1;
}

/* Allreduces of the global process set, and nothing else. */
static int global_allreduces(plait_entry_t **entries, int n) {
  for (int i = 0; i < n; i++)
    if (entries[i]->meta.pset != 0 || entries[i]->meta.coll != PLAIT_COLL_ALLREDUCE) return 0;
  return 1;
}

/* PLAIT_CALLER_RUNS: the one entry may run in its wait (plait_table_set_lone). */
static int claimable(plait_table_t *t, plait_entry_t **entries, int n) {
  const plait_entry_t *e = entries[0];
  return t->lone && t->turn && n == 1 && e->meta.pset == 0 &&
         e->meta.coll == PLAIT_COLL_ALLREDUCE && e->input.device == PLAIT_DEVICE_HOST &&
         e->output.device == PLAIT_DEVICE_HOST && e->handle && !e->handle->callback &&
         !plait_tl_active(t->tl);
}

plait_result_t plait_table_submit(plait_table_t *t, plait_entry_t **entries, int n) {
  pthread_mutex_lock(&t->mu);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!t->open) {
    rc = plait_error(t->closed_rc, "%s", t->closed_msg);
    goto out;
  }
  for (int i = 0; i < n; i++) {
    if (entries[i]->name) continue;
    internal_name(t, entries[i]);
    if (!entries[i]->name) {
      rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory naming an operation");
      goto out;
    }
  }
  PLAIT_CHECK_GOTO(rc, check_names_locked(t, entries, n), out);
  for (int i = 0; i < n; i++) {
    char key[PLAIT_OP_KEY_MAX];
    if (plait_namemap_put(&t->inflight, plait_op_key(key, entries[i]->meta.pset, entries[i]->name),
                          entries[i])) {
      for (int j = 0; j < i; j++)
        plait_namemap_remove(&t->inflight, plait_op_key(key, entries[j]->meta.pset,
                                                         entries[j]->name));
      rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory queueing '%s'", entries[i]->name);
      goto out;
    }
  }
  for (int i = 0; i < n; i++) {
    entries[i]->next = NULL;
    if (t->tail)
      t->tail->next = entries[i];
    else
      t->head = entries[i];
    t->tail = entries[i];
    if (entries[i]->meta.coll == PLAIT_COLL_BARRIER && !entries[i]->meta.pset) t->barriers++;
    if (entries[i]->meta.coll == PLAIT_COLL_JOIN) t->joins++;
    /* before the coordinator can take it */
    plait_tl_begin(t->tl, entries[i]->name, plait_tl_name(PLAIT_TL_NEGOTIATE));
  }
  int quiet = t->lazy && global_only(entries, n);
  if (claimable(t, entries, n)) { /* before the coordinator can drain it */
    plait_handle_set_turn(entries[0]->handle, t->turn);
    quiet = 1;
  }
  if (!quiet && t->awaiting > 0 && global_allreduces(entries, n)) /* plait_table_await */
    quiet = (t->awaiting -= n) > 0;
  uint64_t one = 1;
  if (!t->woken && !quiet) {
    if (write(t->wake_fd, &one, sizeof one) < 0) { /* full counter: already awake */
    }
    t->woken = 1;
  }
out:
  pthread_mutex_unlock(&t->mu);
  return rc;
}

plait_entry_t *plait_table_drain(plait_table_t *t) {
  pthread_mutex_lock(&t->mu);
  plait_entry_t *list = t->head;
  t->head = t->tail = NULL;
  pthread_mutex_unlock(&t->mu);
  return list;
}

void plait_table_forget(plait_table_t *t, const char *name) {
  pthread_mutex_lock(&t->mu);
  plait_namemap_remove(&t->inflight, name);
  pthread_mutex_unlock(&t->mu);
}

void plait_table_close(plait_table_t *t, plait_result_t rc, const char *msg) {
  pthread_mutex_lock(&t->mu);
  if (t->open) {
    t->open = 0;
    t->closed_rc = rc;
    snprintf(t->closed_msg, sizeof t->closed_msg, "%s", msg);
  }
  pthread_mutex_unlock(&t->mu);
}

void plait_table_clear_wake(plait_table_t *t) {
  if (t->wake_fd < 0) return;
  uint64_t v;
  /* under the lock: a submission either wrote before the read (and its
   * entry is drained after this), or sees woken 0 and writes again */
  pthread_mutex_lock(&t->mu);
  if (read(t->wake_fd, &v, sizeof v) < 0) { /* nothing pending */
  }
  t->woken = 0;
  t->awaiting = 0;
  pthread_mutex_unlock(&t->mu);
}

void plait_table_count_barrier(plait_table_t *t) {
  pthread_mutex_lock(&t->mu);
  t->barriers++;
  pthread_mutex_unlock(&t->mu);
}

int plait_table_set_lazy(plait_table_t *t, int lazy) {
  pthread_mutex_lock(&t->mu);
  int waiting = t->head != NULL;
  t->lazy = lazy && !waiting;
  pthread_mutex_unlock(&t->mu);
  return waiting;
}

int plait_table_set_lone(plait_table_t *t, int lone) {
  pthread_mutex_lock(&t->mu);
  int waiting = t->lone && !lone && t->head != NULL;
  t->lone = lone;
  pthread_mutex_unlock(&t->mu);
  return waiting;
}

void plait_table_wake(plait_table_t *t) {
  pthread_mutex_lock(&t->mu);
  uint64_t one = 1;
  if (!t->woken && t->wake_fd >= 0) {
    if (write(t->wake_fd, &one, sizeof one) < 0) { /* full counter: already awake */
    }
    t->woken = 1;
  }
  pthread_mutex_unlock(&t->mu);
}

void plait_table_await(plait_table_t *t, int64_t k) {
  pthread_mutex_lock(&t->mu);
  /* Submitted since the drain (the first of them wrote the eventfd): they
   * count against k when they are all global allreduces. */
  int64_t queued = 0;
  int other = 0;
  for (plait_entry_t *e = t->head; e && !other; e = e->next)
    if (e->meta.pset != 0 || e->meta.coll != PLAIT_COLL_ALLREDUCE) other = 1;
    else queued++;
  if (k <= 0 || other || queued >= k) {
    t->awaiting = 0; /* their wake-up stands, or none is awaited */
  } else {
    t->awaiting = k - queued;
    if (queued && t->woken && t->wake_fd >= 0) { /* not yet: taken back */
      uint64_t v;
      if (read(t->wake_fd, &v, sizeof v) < 0) { /* nothing pending */
      }
      t->woken = 0;
    }
  }
  pthread_mutex_unlock(&t->mu);
}
