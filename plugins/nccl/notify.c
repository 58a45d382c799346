#include "notify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "errors.h"
#include "wait.h"

nc_family_t *nc_family_new(nccl_state_t *st) {
  nc_family_t *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
  int bad = pthread_mutex_init(&f->comm_mu, &ma);
  pthread_mutexattr_destroy(&ma);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* timed waits against nc_now() */
  if (!bad) bad = pthread_mutex_init(&f->q_mu, NULL);
  if (!bad) bad = pthread_cond_init(&f->q_cv, &ca);
  pthread_condattr_destroy(&ca);
  if (bad) {
    free(f);
    return NULL;
  }
  f->device = st->device;
  f->stream = st->stream;
  f->timeout_s = st->timeout_s;
  f->root = st;
  return f;
}

void nc_family_join(nc_family_t *f, nccl_state_t *st) {
  pthread_mutex_lock(&f->comm_mu);
  st->next_member = f->members;
  f->members = st;
  pthread_mutex_unlock(&f->comm_mu);
}

void nc_family_leave(nc_family_t *f, nccl_state_t *st) {
  pthread_mutex_lock(&f->comm_mu);
  for (nccl_state_t **p = &f->members; *p; p = &(*p)->next_member)
    if (*p == st) {
      *p = st->next_member;
      break;
    }
  pthread_mutex_unlock(&f->comm_mu);
}

/* CUDA's host function: no CUDA calls here. */
static void CUDART_CB marker_ran(void *arg) {
  nc_family_t *f = arg;
  pthread_mutex_lock(&f->q_mu);
  f->completed++;
  pthread_cond_broadcast(&f->q_cv);
  pthread_mutex_unlock(&f->q_mu);
}

/* The first failure among the members' communicators and the stream, as a
 * break of the family. Waiter thread, q_mu not held. */
static void check_health(nc_family_t *f) {
  char msg[NC_MSG_LEN];
  plait_result_t code = PLAIT_SUCCESS;
  pthread_mutex_lock(&f->comm_mu);
  for (nccl_state_t *m = f->members; m && code == PLAIT_SUCCESS; m = m->next_member) {
    if (!m->comm) continue;
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(m->comm, &state);
    if (q == ncclSuccess && (state == ncclSuccess || state == ncclInProgress)) continue;
    ncclResult_t r = q != ncclSuccess ? q : state;
    nc_nccl_text(m, q != ncclSuccess ? "ncclCommGetAsyncError" : "work enqueued on the stream",
                 r, msg, sizeof msg);
    code = nc_code(r);
  }
  pthread_mutex_unlock(&f->comm_mu);
  if (code == PLAIT_SUCCESS) {
    cudaError_t e = cudaStreamQuery(f->stream);
    if (e != cudaSuccess && e != cudaErrorNotReady) {
      snprintf(msg, sizeof msg, "work enqueued on the stream failed: %s: %s on rank %d (CUDA "
               "device %d)", cudaGetErrorName(e), cudaGetErrorString(e), f->root->rank,
               f->device);
      code = PLAIT_ERR_TRANSPORT;
    }
    cudaGetLastError();
  }
  if (code != PLAIT_SUCCESS) {
    NC_WARN(f->root, "%s", msg);
    nc_family_break(f, code, msg);
  }
}

/* Calls done for the entries taken off the queue: called with q_mu held,
 * releases it meanwhile. */
static void deliver(nc_family_t *f, nc_pending_t *list, plait_result_t rc, const char *msg) {
  pthread_mutex_unlock(&f->q_mu);
  while (list) {
    nc_pending_t *next = list->next;
    list->done(list->ctx, rc, rc == PLAIT_SUCCESS ? NULL : msg);
    free(list);
    list = next;
  }
  pthread_mutex_lock(&f->q_mu);
  f->delivering = 0;
  pthread_cond_broadcast(&f->q_cv); /* for nc_family_drain */
}

/* Takes the entries with seq <= upto (all with upto UINT64_MAX) off the
 * queue; q_mu held. */
static nc_pending_t *take(nc_family_t *f, uint64_t upto) {
  nc_pending_t *first = f->head, *last = NULL;
  for (nc_pending_t *p = f->head; p && p->seq <= upto; p = p->next) last = p;
  if (!last) return NULL;
  f->head = last->next;
  if (!f->head) f->tail = NULL;
  last->next = NULL;
  f->delivering = 1; /* until their done calls returned (nc_family_drain) */
  return first;
}

static void sleep_until(nc_family_t *f, double t) {
  struct timespec ts;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  pthread_cond_timedwait(&f->q_cv, &f->q_mu, &ts);
}

static void *waiter_main(void *arg) {
  nc_family_t *f = arg;
  cudaSetDevice(f->device); /* for cudaStreamQuery */
  uint64_t seen = 0;
  double progress = nc_now();
  pthread_mutex_lock(&f->q_mu);
  for (;;) {
    plait_result_t failed = (plait_result_t)atomic_load(&f->broken);
    if (failed != PLAIT_SUCCESS || (f->stopping && f->head)) {
      nc_pending_t *all = take(f, UINT64_MAX);
      deliver(f, all, failed != PLAIT_SUCCESS ? failed : PLAIT_ERR_SHUTDOWN,
              failed != PLAIT_SUCCESS ? f->broken_msg
                                      : "finalize: the work was still outstanding");
      if (f->stopping) break;
      if (!f->head) pthread_cond_wait(&f->q_cv, &f->q_mu);
      continue;
    }
    if (f->stopping) break;
    if (!f->head) {
      pthread_cond_wait(&f->q_cv, &f->q_mu);
      continue;
    }
    uint64_t done = f->completed;
    if (done != seen) seen = done, progress = nc_now();
    if (f->head->seq <= done) {
      /* An NCCL failure is recorded before its kernels end and the marker
       * after them runs: checked now, it is not missed. */
      pthread_mutex_unlock(&f->q_mu);
      check_health(f);
      pthread_mutex_lock(&f->q_mu);
      if (atomic_load(&f->broken) != PLAIT_SUCCESS) continue;
      deliver(f, take(f, done), PLAIT_SUCCESS, NULL);
      continue;
    }
    double since = f->head->since > progress ? f->head->since : progress;
    double now = nc_now();
    if (now - since > f->timeout_s) {
      char msg[NC_MSG_LEN];
      snprintf(msg, sizeof msg, "work enqueued on the stream did not complete within %.3g s "
               "(PLAIT_TIMEOUT_S) on rank %d (CUDA device %d): a peer rank is gone, stopped "
               "or far behind; NCCL does not say which (the communicators were aborted)",
               f->timeout_s, f->root->rank, f->device);
      pthread_mutex_unlock(&f->q_mu);
      NC_WARN(f->root, "%s", msg);
      nc_family_break(f, PLAIT_ERR_PEER_LOST, msg);
      pthread_mutex_lock(&f->q_mu);
      continue;
    }
    double wake = since + f->timeout_s;
    sleep_until(f, wake < now + NC_POLL_S ? wake : now + NC_POLL_S);
    if (f->completed == done && !f->stopping) { /* no marker ran: look for failures */
      pthread_mutex_unlock(&f->q_mu);
      check_health(f);
      pthread_mutex_lock(&f->q_mu);
    }
  }
  pthread_mutex_unlock(&f->q_mu);
  return NULL;
}

plait_result_t nc_notify(nccl_state_t *st, plait_done_fn done, void *ctx) {
  nc_family_t *f = st->fam;
  nc_pending_t *p = calloc(1, sizeof *p);
  if (!p) return nc_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  pthread_mutex_lock(&f->q_mu);
  if (!f->has_waiter) {
    int e = pthread_create(&f->waiter, NULL, waiter_main, f);
    if (e != 0) {
      pthread_mutex_unlock(&f->q_mu);
      free(p);
      return nc_fail(st, PLAIT_ERR_NO_MEMORY, "pthread_create (the waiter thread): %s",
                     strerror(e));
    }
    f->has_waiter = 1;
  }
  pthread_mutex_unlock(&f->q_mu);
  f->async = 1;
  p->done = done;
  p->ctx = ctx;
  p->since = nc_now();
  /* A failed family calls done with its failure: no marker needed. */
  cudaError_t e = cudaSuccess;
  int launched = 0;
  if (atomic_load(&f->broken) == PLAIT_SUCCESS) {
    e = cudaLaunchHostFunc(f->stream, marker_ran, f);
    launched = e == cudaSuccess;
  }
  pthread_mutex_lock(&f->q_mu);
  /* Every marker enqueued is counted (finalize frees nothing a marker still
   * touches); an entry without one waits for the failure to deliver it. */
  p->seq = launched ? ++f->enqueued : UINT64_MAX;
  if (f->tail) f->tail->next = p;
  else f->head = p;
  f->tail = p;
  pthread_cond_broadcast(&f->q_cv);
  pthread_mutex_unlock(&f->q_mu);
  if (e != cudaSuccess) nc_cuda_break(st, PLAIT_ERR_TRANSPORT, "cudaLaunchHostFunc (notify)", e);
  return PLAIT_SUCCESS;
}

void nc_family_drain(nccl_state_t *st) {
  nc_family_t *f = st->fam;
  if (!f) return;
  pthread_mutex_lock(&f->q_mu);
  if (!f->has_waiter) {
    pthread_mutex_unlock(&f->q_mu);
    return;
  }
  double limit = nc_now() + st->timeout_s;
  while ((f->head || f->delivering) && atomic_load(&f->broken) == PLAIT_SUCCESS &&
         nc_now() < limit)
    sleep_until(f, limit);
  int stuck = f->head != NULL && atomic_load(&f->broken) == PLAIT_SUCCESS;
  pthread_mutex_unlock(&f->q_mu);
  if (stuck)
    nc_break(st, PLAIT_ERR_SHUTDOWN,
             "finalize: work enqueued before did not finish within %.3g s (PLAIT_TIMEOUT_S) "
             "on rank %d (CUDA device %d); the communicators were aborted",
             st->timeout_s, nc_job_rank(st, st->rank), st->device);
  pthread_mutex_lock(&f->q_mu);
  /* The waiter delivers at once; done calls return before finalize goes on. */
  while (f->head || f->delivering) pthread_cond_wait(&f->q_cv, &f->q_mu);
  pthread_mutex_unlock(&f->q_mu);
}

void nc_family_free(nc_family_t *f) {
  if (!f) return;
  pthread_mutex_lock(&f->q_mu);
  f->stopping = 1;
  pthread_cond_broadcast(&f->q_cv);
  int has = f->has_waiter;
  pthread_mutex_unlock(&f->q_mu);
  if (has) pthread_join(f->waiter, NULL);
  /* Markers still on the stream would touch f when they run. */
  double limit = nc_now() + (f->timeout_s < 10.0 ? f->timeout_s : 10.0);
  pthread_mutex_lock(&f->q_mu);
  while (f->completed < f->enqueued && nc_now() < limit) {
    double t = nc_now() + NC_POLL_S;
    sleep_until(f, t < limit ? t : limit);
  }
  int left = f->completed < f->enqueued;
  pthread_mutex_unlock(&f->q_mu);
  if (left) {
    NC_WARN(f->root, "finalize: %llu notify marker(s) never ran on the stream of CUDA device %d; "
            "their bookkeeping (a few KiB) is left allocated",
            (unsigned long long)(f->enqueued - f->completed), f->device);
    return;
  }
  nc_batch_release(f);
  pthread_cond_destroy(&f->q_cv);
  pthread_mutex_destroy(&f->q_mu);
  pthread_mutex_destroy(&f->comm_mu);
  free(f);
}
