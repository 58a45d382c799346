/*
 * notify's waiter (plugins/nccl/notify.c, with errors.c and wait.c) without a
 * GPU: the CUDA and NCCL calls it makes are replaced here by a simulated
 * stream (a thread that runs the host functions enqueued on it, in order,
 * unless the test holds it back, as a kernel waiting for a lost peer would)
 * and a simulated communicator (an asynchronous error the test sets, an
 * abort that lets the stream go on, as ncclCommAbort ends NCCL's kernels).
 *
 * Checked: done is called exactly once per notify, in order, on a thread
 * that is not the caller's, only after the stream passed it; an NCCL
 * asynchronous error, a CUDA error on the stream, the timeout and a break
 * (interrupt) each fail every outstanding done with a message naming the
 * rank and device, abort the communicator, and make a later notify fail at
 * once; finalize's drain fails work that never finishes with
 * PLAIT_ERR_SHUTDOWN. What this cannot show: that real CUDA runs the host
 * function when the stream reaches it (the GPU tests must).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "notify.h"
#include "wait.h"

/* ---- the simulated stream and communicator ---- */

typedef struct hostfn {
  cudaHostFn_t fn;
  void *arg;
} hostfn_t;

static pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sim_cv = PTHREAD_COND_INITIALIZER;
static hostfn_t sim_q[4096];
static int sim_head, sim_tail, sim_held, sim_stop, sim_aborts;
static ncclResult_t sim_async = ncclSuccess;
static cudaError_t sim_stream_err = cudaSuccess;
static int sim_comm_obj;

static void *stream_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&sim_mu);
  while (!sim_stop) {
    if (sim_held || sim_head == sim_tail) {
      pthread_cond_wait(&sim_cv, &sim_mu);
      continue;
    }
    hostfn_t h = sim_q[sim_head++ % 4096];
    pthread_mutex_unlock(&sim_mu);
    h.fn(h.arg);
    pthread_mutex_lock(&sim_mu);
  }
  pthread_mutex_unlock(&sim_mu);
  return NULL;
}

static void hold(int on) {
  pthread_mutex_lock(&sim_mu);
  sim_held = on;
  pthread_cond_broadcast(&sim_cv);
  pthread_mutex_unlock(&sim_mu);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg) {
  (void)s;
  pthread_mutex_lock(&sim_mu);
  sim_q[sim_tail++ % 4096] = (hostfn_t){fn, arg};
  pthread_cond_broadcast(&sim_cv);
  pthread_mutex_unlock(&sim_mu);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  (void)s;
  pthread_mutex_lock(&sim_mu);
  cudaError_t e = sim_stream_err != cudaSuccess ? sim_stream_err
                  : sim_head != sim_tail        ? cudaErrorNotReady
                                                : cudaSuccess;
  pthread_mutex_unlock(&sim_mu);
  return e;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  (void)comm;
  pthread_mutex_lock(&sim_mu);
  *state = sim_async;
  pthread_mutex_unlock(&sim_mu);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  (void)comm;
  pthread_mutex_lock(&sim_mu);
  sim_aborts++;
  sim_held = 0; /* the kernels end: the stream goes on */
  pthread_cond_broadcast(&sim_cv);
  pthread_mutex_unlock(&sim_mu);
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  return r == ncclRemoteError ? "remote process exited or there was a network error" : "error";
}
const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return "NET/Socket : peer 10.0.0.2 closed the connection";
}
cudaError_t cudaSetDevice(int d) { (void)d; return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t e) {
  return e == cudaErrorIllegalAddress ? "cudaErrorIllegalAddress" : "cudaErrorOther";
}
const char *cudaGetErrorString(cudaError_t e) {
  (void)e;
  return "an illegal memory access was encountered";
}
/* wait.c's synchronous waits: not used by these paths. */
cudaError_t cudaEventQuery(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { (void)e, (void)s; return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f) {
  (void)s, (void)e, (void)f;
  return cudaSuccess;
}
void nc_batch_release(nc_family_t *f) { (void)f; }

/* ---- the test ---- */

static int checks, failed;
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      failed++;                                                                \
      printf("FAILED line %d: ", __LINE__);                                    \
      printf(__VA_ARGS__);                                                     \
      printf("\n");                                                            \
    }                                                                          \
  } while (0)

typedef struct call {
  int calls;
  int order; /* the how-many-th done of the test this was */
  plait_result_t rc;
  char msg[512];
  int other_thread;
} call_t;

static pthread_mutex_t calls_mu = PTHREAD_MUTEX_INITIALIZER;
static int order_seen;
static pthread_t main_thread;

static void done(void *ctx, plait_result_t rc, const char *msg) {
  call_t *c = ctx;
  pthread_mutex_lock(&calls_mu);
  c->calls++;
  c->order = ++order_seen;
  c->rc = rc;
  snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "(null)");
  c->other_thread = !pthread_equal(pthread_self(), main_thread);
  pthread_mutex_unlock(&calls_mu);
}

static int calls_of(call_t *c) {
  pthread_mutex_lock(&calls_mu);
  int n = c->calls;
  pthread_mutex_unlock(&calls_mu);
  return n;
}

static void nap(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* Sleeps in steps until c was called, for at most limit seconds. */
static int wait_called(call_t *c, double limit) {
  for (double t = 0; t < limit; t += 0.01) {
    if (calls_of(c)) return 1;
    nap(0.01);
  }
  return calls_of(c) > 0;
}

static nccl_state_t *new_state(double timeout_s) {
  nccl_state_t *st = calloc(1, sizeof *st);
  st->rank = 3;
  st->nranks = 4;
  st->device = 1;
  st->timeout_s = timeout_s;
  st->comm = (ncclComm_t)(void *)&sim_comm_obj;
  st->stream = (cudaStream_t)(void *)&sim_comm_obj;
  st->fam = nc_family_new(st);
  nc_family_join(st->fam, st);
  sim_async = ncclSuccess;
  sim_stream_err = cudaSuccess;
  sim_aborts = 0;
  hold(0);
  return st;
}

static void free_state(nccl_state_t *st) {
  nc_family_drain(st);
  nc_family_leave(st->fam, st);
  nc_family_free(st->fam);
  free(st);
}

static int names_rank(const char *m) { return strstr(m, "rank 3") && strstr(m, "device 1"); }

static void in_order(void) {
  nccl_state_t *st = new_state(30);
  call_t c[5];
  memset(c, 0, sizeof c);
  hold(1);
  for (int i = 0; i < 5; i++) CHECK(nc_notify(st, done, &c[i]) == PLAIT_SUCCESS, "notify %d", i);
  nap(0.2);
  CHECK(calls_of(&c[0]) == 0, "done was called before the stream reached its marker");
  int base = order_seen;
  hold(0);
  CHECK(wait_called(&c[4], 10), "the last done was never called");
  nap(0.1);
  for (int i = 0; i < 5; i++)
    CHECK(c[i].calls == 1 && c[i].rc == PLAIT_SUCCESS && c[i].order == base + i + 1 &&
              c[i].other_thread && !strcmp(c[i].msg, "(null)"),
          "done %d: %d call(s), rc %d, order %d (want %d), other thread %d, msg %s", i, c[i].calls,
          (int)c[i].rc, c[i].order, base + i + 1, c[i].other_thread, c[i].msg);
  CHECK(sim_aborts == 0, "a healthy run aborted the communicator");
  free_state(st);
}

static void async_error(void) {
  nccl_state_t *st = new_state(30);
  call_t c[2], later;
  memset(c, 0, sizeof c);
  memset(&later, 0, sizeof later);
  hold(1); /* a collective waits for a peer that is gone */
  nc_notify(st, done, &c[0]);
  nc_notify(st, done, &c[1]);
  pthread_mutex_lock(&sim_mu);
  sim_async = ncclRemoteError;
  pthread_mutex_unlock(&sim_mu);
  CHECK(wait_called(&c[1], 10), "an NCCL asynchronous error left done uncalled");
  for (int i = 0; i < 2; i++)
    CHECK(c[i].calls == 1 && c[i].rc == PLAIT_ERR_PEER_LOST && names_rank(c[i].msg) &&
              strstr(c[i].msg, "peer 10.0.0.2"),
          "done %d after ncclRemoteError: %d call(s), %s: %s", i, c[i].calls,
          plait_result_name_inline(c[i].rc), c[i].msg);
  CHECK(sim_aborts == 1, "the communicator was aborted %d times, want 1", sim_aborts);
  CHECK(nc_family_failed(st) == PLAIT_ERR_PEER_LOST, "the family is not marked failed");
  CHECK(nc_notify(st, done, &later) == PLAIT_SUCCESS && wait_called(&later, 10) &&
            later.rc == PLAIT_ERR_PEER_LOST,
        "a notify after the failure: %d call(s), %s", later.calls,
        plait_result_name_inline(later.rc));
  nap(0.1); /* the markers the abort released run now: nothing more is called */
  CHECK(c[0].calls == 1 && c[1].calls == 1, "a done was called twice");
  free_state(st);
}

static void stream_error(void) {
  nccl_state_t *st = new_state(30);
  call_t c;
  memset(&c, 0, sizeof c);
  hold(1);
  nc_notify(st, done, &c);
  pthread_mutex_lock(&sim_mu);
  sim_stream_err = cudaErrorIllegalAddress;
  pthread_mutex_unlock(&sim_mu);
  CHECK(wait_called(&c, 10) && c.rc == PLAIT_ERR_TRANSPORT &&
            strstr(c.msg, "cudaErrorIllegalAddress") && names_rank(c.msg),
        "a CUDA error on the stream: %d call(s), %s: %s", c.calls,
        plait_result_name_inline(c.rc), c.msg);
  sim_stream_err = cudaSuccess;
  free_state(st);
}

static void timeout(void) {
  nccl_state_t *st = new_state(0.3);
  call_t c;
  memset(&c, 0, sizeof c);
  hold(1);
  nc_notify(st, done, &c);
  CHECK(wait_called(&c, 20) && c.rc == PLAIT_ERR_PEER_LOST &&
            strstr(c.msg, "PLAIT_TIMEOUT_S") && names_rank(c.msg),
        "work that never finishes: %d call(s), %s: %s", c.calls, plait_result_name_inline(c.rc),
        c.msg);
  CHECK(sim_aborts == 1, "the timeout aborted the communicator %d times, want 1", sim_aborts);
  free_state(st);
}

static void interrupted(void) {
  nccl_state_t *st = new_state(30);
  call_t c;
  memset(&c, 0, sizeof c);
  hold(1);
  nc_notify(st, done, &c);
  st->op = "interrupt";
  nc_break(st, PLAIT_ERR_PEER_LOST, "the job failed: rank 1 was lost");
  CHECK(wait_called(&c, 10) && c.rc == PLAIT_ERR_PEER_LOST && strstr(c.msg, "rank 1 was lost"),
        "a break with work outstanding: %d call(s), %s: %s", c.calls,
        plait_result_name_inline(c.rc), c.msg);
  CHECK(sim_aborts == 1, "the break aborted the communicator %d times", sim_aborts);
  free_state(st);
}

static void drained(void) {
  nccl_state_t *st = new_state(0.3);
  st->timeout_s = 0.3;
  st->fam->timeout_s = 100; /* the waiter's own timeout must not be what fires */
  call_t c;
  memset(&c, 0, sizeof c);
  hold(1);
  nc_notify(st, done, &c);
  nc_family_drain(st); /* finalize's first step */
  CHECK(c.calls == 1 && c.rc == PLAIT_ERR_SHUTDOWN,
        "finalize with work that never finishes: %d call(s), %s: %s", c.calls,
        plait_result_name_inline(c.rc), c.msg);
  free_state(st);
}

int main(void) {
  main_thread = pthread_self();
  pthread_t stream;
  pthread_create(&stream, NULL, stream_main, NULL);
  in_order();
  async_error();
  stream_error();
  timeout();
  interrupted();
  drained();
  pthread_mutex_lock(&sim_mu);
  sim_stop = 1;
  pthread_cond_broadcast(&sim_cv);
  pthread_mutex_unlock(&sim_mu);
  pthread_join(stream, NULL);
  printf("%d passed, %d failed\n", checks - failed, failed);
  return failed ? 1 : 0;
}
