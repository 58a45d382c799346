/* Operation handles: completion, waiting, callbacks, release. Each handle
 * has its own lock and wake word (util/futex.h), so a handle needs no engine (it
 * may outlive the engine that completed it) and engines share nothing. */
#include "engine/submit/handle.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/futex.h"

static _Thread_local int on_coordinator;

void plait_handle_mark_coordinator_thread(void) { on_coordinator = 1; }

plait_handle_t *plait_handle_new(plait_coll_t coll, int n, const plait_op_options_t *opts) {
  plait_handle_t *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  if (pthread_mutex_init(&h->mu, NULL)) {
    free(h);
    return NULL;
  }
  atomic_init(&h->refs, 2);
  atomic_init(&h->wake, 0);
  atomic_init(&h->turn, NULL);
  atomic_init(&h->looked, 0);
  h->pending = n;
  h->coll = coll;
  h->join_rank = -1;
  if (opts) {
    h->callback = opts->callback;
    h->user_data = opts->user_data;
  }
  return h;
}

/* Releases h's library-owned output. */
static void drop_owned(plait_handle_t *h) {
  if (h->owned && h->owned_free) h->owned_free(h->owned_ctx, h->owned);
  else free(h->owned);
  h->owned = NULL;
  h->owned_free = NULL;
  h->owned_ctx = NULL;
}

/* Drops n references to h (no lock held); frees h when none is left. */
static void unref(plait_handle_t *h, int n) {
  if (atomic_fetch_sub_explicit(&h->refs, n, memory_order_acq_rel) != n) return;
  pthread_mutex_destroy(&h->mu);
  plait_turn_unref(atomic_load_explicit(&h->turn, memory_order_acquire));
  free(h->message);
  drop_owned(h);
  free(h->splits);
  free(h);
}

void plait_handle_set_output(plait_handle_t *h, const plait_tensor_t *out, void *owned,
                             int64_t *splits, int nsplits) {
  plait_handle_set_output_freed_by(h, out, owned, NULL, NULL, splits, nsplits);
}

void plait_handle_set_output_freed_by(plait_handle_t *h, const plait_tensor_t *out, void *owned,
                                      void (*owned_free)(void *ctx, void *owned), void *ctx,
                                      int64_t *splits, int nsplits) {
  pthread_mutex_lock(&h->mu);
  if (out) h->output = *out;
  drop_owned(h);
  h->owned = owned;
  h->owned_free = owned_free;
  h->owned_ctx = ctx;
  free(h->splits);
  h->splits = splits;
  h->nsplits = nsplits;
  pthread_mutex_unlock(&h->mu);
}

void plait_handle_finish(plait_handle_t *h, plait_result_t rc, const char *message) {
  pthread_mutex_lock(&h->mu);
  if (rc != PLAIT_SUCCESS && h->result == PLAIT_SUCCESS) { /* the first failure wins */
    h->result = rc;
    h->message = strdup(message ? message : plait_strerror(rc));
  }
  int last = --h->pending == 0;
  if (last) h->done = 1;
  plait_callback_fn cb = last ? h->callback : NULL;
  plait_result_t result = h->result;
  void *user = h->user_data;
  pthread_mutex_unlock(&h->mu);
  if (!last) return;
  /* after unlocking: a waiter woken while the lock is still held would only
   * block again on it (one more context switch per operation). The
   * coordinator's reference keeps h alive through the wake-up and the
   * callback (which may release the caller's), and it drops without the
   * lock, so the waiter finds mu free when it wakes. A system call only
   * when someone sleeps. */
  if (atomic_exchange_explicit(&h->wake, 1, memory_order_acq_rel) == 2)
    plait_futex_wake_all(&h->wake);
  if (cb) cb(h, result, user);
  unref(h, 1);
}

void plait_handle_abandon(plait_handle_t *h) { unref(h, 1); }

void plait_handle_set_turn(plait_handle_t *h, plait_turn_t *t) {
  plait_turn_ref(t);
  plait_turn_unref(atomic_exchange_explicit(&h->turn, t, memory_order_acq_rel));
}

/* PLAIT_CALLER_RUNS: the first wait on a handle whose submission did not
 * wake the coordinator. run: it may run the operation on this thread, when
 * it claims the turn (turn.h); otherwise (the turn is held, or a poll or
 * timeout 0 looks a second time) the knock hands the operation to the
 * coordinator, as if the submission had woken it. The first look leaves
 * the turn for a wait that blocks (plait.torch looks with timeout 0, then
 * waits). Once per handle. */
static void take_turn(plait_handle_t *h, int run, double wait_s) {
  if (!atomic_load_explicit(&h->turn, memory_order_acquire)) return;
  if (!run && !atomic_exchange_explicit(&h->looked, 1, memory_order_acq_rel)) return;
  plait_turn_t *t = atomic_exchange_explicit(&h->turn, NULL, memory_order_acq_rel);
  if (!t) return;
  if (atomic_load_explicit(&h->wake, memory_order_acquire) != 1) {
    if (run && plait_turn_caller_try(t)) {
      if (t->run) t->run(t->ctx, h, wait_s);
      plait_turn_caller_release(t);
    } else if (!run && plait_turn_caller_try(t)) { /* idle: knock by hand */
      if (t->wake) t->wake(t->ctx);
      plait_turn_caller_release(t);
    }
  }
  plait_turn_unref(t);
}

#define REQUIRE_HANDLE(h)                                                      \
  do {                                                                         \
    if (!(h))                                                                  \
      return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: handle is NULL",     \
                         __func__);                                            \
  } while (0)

PLAIT_API plait_result_t plait_poll(plait_handle_t *handle, int *done) {
  REQUIRE_HANDLE(handle);
  if (!done) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_poll: done is NULL");
  take_turn(handle, 0, 0); /* a poll never runs it: the coordinator does (turn.h) */
  pthread_mutex_lock(&handle->mu);
  *done = handle->done;
  pthread_mutex_unlock(&handle->mu);
  return PLAIT_SUCCESS;
}

/* How long from now until `until` (CLOCK_MONOTONIC) in *rel; 0 once reached. */
static int time_left(const struct timespec *until, struct timespec *rel) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long long ns = (long long)(until->tv_sec - now.tv_sec) * 1000000000LL +
                 (until->tv_nsec - now.tv_nsec);
  if (ns <= 0) return 0;
  rel->tv_sec = (time_t)(ns / 1000000000LL);
  rel->tv_nsec = (long)(ns % 1000000000LL);
  return 1;
}

/* Sleeps until h is done (wake 1) or CLOCK_MONOTONIC reaches *until (NULL:
 * no limit). Each sleep is relative to the time left, so a clock shifted in
 * user space cannot stretch it; a wake-up before the end is checked again. */
static void sleep_until_done(plait_handle_t *h, const struct timespec *until) {
  for (;;) {
    unsigned v = atomic_load_explicit(&h->wake, memory_order_acquire);
    if (v == 1) return;
    if (v == 0 && !atomic_compare_exchange_weak_explicit(&h->wake, &v, 2, memory_order_acq_rel,
                                                         memory_order_acquire))
      continue; /* finished, or another waiter marked it, meanwhile */
    struct timespec rel;
    if (until && !time_left(until, &rel)) return;
    plait_futex_wait(&h->wake, 2, until ? &rel : NULL);
  }
}

PLAIT_API plait_result_t plait_wait(plait_handle_t *handle, double timeout_s) {
  REQUIRE_HANDLE(handle);
  if (isnan(timeout_s))
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_wait: timeout_s is NaN");
  if (on_coordinator && timeout_s != 0) {
    pthread_mutex_lock(&handle->mu);
    int done = handle->done;
    pthread_mutex_unlock(&handle->mu);
    if (!done)
      return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_wait: called from a completion "
                         "callback on an unfinished operation; it would wait forever, since only "
                         "the thread running the callback can finish it (use plait_poll there)");
  }
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  if (timeout_s > 0) {
    double whole = floor(timeout_s > 1e9 ? 1e9 : timeout_s);
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
  }
  /* a round it runs leaves the agreement when the wait's time is up (where
   * the transport's vote allows: plait_transport_v2_t.vote) */
  take_turn(handle, timeout_s != 0 && !on_coordinator, timeout_s < 0 ? -1 : timeout_s);
  if (timeout_s != 0) sleep_until_done(handle, timeout_s < 0 ? NULL : &until);
  pthread_mutex_lock(&handle->mu);
  plait_result_t result = handle->done ? handle->result : PLAIT_ERR_TIMEOUT;
  char msg[2048];
  if (handle->done && handle->message) {
    strncpy(msg, handle->message, sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
  }
  pthread_mutex_unlock(&handle->mu);
  if (result == PLAIT_ERR_TIMEOUT)
    return plait_error(result, "plait_wait: the operation is still running after %g s",
                       timeout_s);
  if (result != PLAIT_SUCCESS) return plait_error(result, "%s", msg);
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_release(plait_handle_t *handle) {
  if (!handle) return PLAIT_SUCCESS;
  unref(handle, 1);
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_wait_release(plait_handle_t *handle, double timeout_s,
                                            int *released) {
  if (!released)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_wait_release: released is NULL");
  *released = 0;
  REQUIRE_HANDLE(handle);
  plait_result_t rc = plait_wait(handle, timeout_s);
  if (rc == PLAIT_ERR_INVALID_ARGUMENT && isnan(timeout_s)) return rc; /* nothing waited */
  if (rc == PLAIT_ERR_TIMEOUT || rc == PLAIT_ERR_INVALID_ARGUMENT) {
    /* still running, or the operation itself failed so: the handle says */
    pthread_mutex_lock(&handle->mu);
    int done = handle->done;
    pthread_mutex_unlock(&handle->mu);
    if (!done) return rc;
    /* finished, maybe only since plait_wait looked: its own result and
     * message (done never goes back to 0) */
    rc = plait_wait(handle, 0);
  }
  plait_release(handle); /* leaves plait_last_error as plait_wait set it */
  *released = 1;
  return rc;
}

/* Checks h is finished; its lock is held. */
static plait_result_t require_done_locked(plait_handle_t *h, const char *fn) {
  if (!h->done)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: the operation has not finished", fn);
  if (h->result != PLAIT_SUCCESS)
    return plait_error(h->result, "%s: the operation failed: %s", fn,
                       h->message ? h->message : plait_strerror(h->result));
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_handle_output(plait_handle_t *handle, plait_tensor_t *out) {
  REQUIRE_HANDLE(handle);
  if (!out) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_handle_output: out is NULL");
  pthread_mutex_lock(&handle->mu);
  plait_result_t rc = require_done_locked(handle, "plait_handle_output");
  if (rc == PLAIT_SUCCESS && (handle->coll == PLAIT_COLL_BARRIER || handle->coll == PLAIT_COLL_JOIN))
    rc = plait_error(PLAIT_ERR_INVALID_ARGUMENT,
                     "plait_handle_output: a %s has no output", plait_coll_name(handle->coll));
  if (rc == PLAIT_SUCCESS) { /* the first layout only: out may be an older, smaller struct */
    memcpy(out, &handle->output, PLAIT_TENSOR_SIZE_V1);
    out->struct_size = PLAIT_TENSOR_SIZE_V1;
  }
  pthread_mutex_unlock(&handle->mu);
  return rc;
}

PLAIT_API plait_result_t plait_handle_splits(plait_handle_t *handle, int64_t *splits,
                                             size_t capacity) {
  REQUIRE_HANDLE(handle);
  if (!splits) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_handle_splits: splits is NULL");
  pthread_mutex_lock(&handle->mu);
  plait_result_t rc = require_done_locked(handle, "plait_handle_splits");
  if (rc == PLAIT_SUCCESS && handle->coll != PLAIT_COLL_ALLTOALL)
    rc = plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_handle_splits: the handle is a %s, not an "
                     "alltoall", plait_coll_name(handle->coll));
  if (rc == PLAIT_SUCCESS && capacity < (size_t)handle->nsplits)
    rc = plait_error(PLAIT_ERR_BUFFER_TOO_SMALL, "plait_handle_splits: capacity %zu, %d needed",
                     capacity, handle->nsplits);
  if (rc == PLAIT_SUCCESS)
    memcpy(splits, handle->splits, sizeof *splits * (size_t)handle->nsplits);
  pthread_mutex_unlock(&handle->mu);
  return rc;
}

PLAIT_API plait_result_t plait_handle_join_rank(plait_handle_t *handle, int *rank) {
  REQUIRE_HANDLE(handle);
  if (!rank) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_handle_join_rank: rank is NULL");
  pthread_mutex_lock(&handle->mu);
  plait_result_t rc = require_done_locked(handle, "plait_handle_join_rank");
  if (rc == PLAIT_SUCCESS && handle->coll != PLAIT_COLL_JOIN)
    rc = plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_handle_join_rank: the handle is a %s, "
                     "not a join", plait_coll_name(handle->coll));
  if (rc == PLAIT_SUCCESS) *rank = handle->join_rank;
  pthread_mutex_unlock(&handle->mu);
  return rc;
}

void plait_handle_set_join_rank(plait_handle_t *h, int rank) {
  pthread_mutex_lock(&h->mu);
  h->join_rank = rank;
  pthread_mutex_unlock(&h->mu);
}
