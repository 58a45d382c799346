#include "wait.h"

#include <stdio.h>
#include <time.h>

#include "errors.h"

double nc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct backoff {
  double start;
  long sleep_ns;
} backoff_t;

static void backoff_init(backoff_t *b) {
  b->start = nc_now();
  b->sleep_ns = 0;
}

/* One pause of the poll loop; returns the seconds waited so far. */
static double backoff_pause(backoff_t *b) {
  double waited = nc_now() - b->start;
  if (waited < 100e-6) return waited;
  b->sleep_ns = b->sleep_ns ? b->sleep_ns * 2 : 5000;
  if (b->sleep_ns > 1000000) b->sleep_ns = 1000000;
  struct timespec ts = {0, b->sleep_ns};
  nanosleep(&ts, NULL);
  return nc_now() - b->start;
}

static plait_result_t timed_out(nccl_state_t *st, const char *what) {
  return nc_break(st, PLAIT_ERR_PEER_LOST,
                  "%s did not complete within %.3g s (PLAIT_TIMEOUT_S) on rank %d (CUDA "
                  "device %d): a peer rank is gone, stopped or far behind; NCCL does not say "
                  "which (the communicator was aborted)",
                  what, st->timeout_s, nc_job_rank(st, st->rank), st->device);
}

plait_result_t nc_settle(nccl_state_t *st, ncclComm_t comm, const char *what, ncclResult_t r) {
  if (r != ncclSuccess && r != ncclInProgress) return nc_nccl_break(st, what, r);
  backoff_t b;
  backoff_init(&b);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) return nc_nccl_break(st, "ncclCommGetAsyncError", q);
    if (state == ncclSuccess) return PLAIT_SUCCESS;
    if (state != ncclInProgress) return nc_nccl_break(st, what, state);
    if (backoff_pause(&b) > st->timeout_s) return timed_out(st, what);
  }
}

plait_result_t nc_after_stream(nccl_state_t *st, cudaStream_t stream, const char *which) {
  char call[128];
  cudaError_t e = cudaEventRecord(st->ready, stream);
  if (e != cudaSuccess) {
    snprintf(call, sizeof call, "cudaEventRecord (%s)", which);
    return nc_cuda_fail(st, PLAIT_ERR_TRANSPORT, call, e);
  }
  e = cudaStreamWaitEvent(st->stream, st->ready, 0);
  if (e == cudaSuccess) return PLAIT_SUCCESS;
  snprintf(call, sizeof call, "cudaStreamWaitEvent (%s)", which);
  return nc_cuda_fail(st, PLAIT_ERR_TRANSPORT, call, e);
}

plait_result_t nc_after_default_stream(nccl_state_t *st) {
  if (st->fam && st->fam->readied) return PLAIT_SUCCESS; /* the core names the streams */
  return nc_after_stream(st, cudaStreamLegacy, "default stream");
}

plait_result_t nc_wait_event(nccl_state_t *st, cudaEvent_t ev, const char *what) {
  backoff_t b;
  backoff_init(&b);
  for (;;) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) return PLAIT_SUCCESS;
    if (e != cudaErrorNotReady) return nc_cuda_break(st, PLAIT_ERR_TRANSPORT, what, e);
    cudaGetLastError(); /* "not ready" is recorded as this thread's last error: clear it */
    if (st->fam) pthread_mutex_lock(&st->fam->comm_mu);
    ncclResult_t q = ncclSuccess, state = ncclSuccess;
    if (st->comm) q = ncclCommGetAsyncError(st->comm, &state);
    if (st->fam) pthread_mutex_unlock(&st->fam->comm_mu);
    if (q != ncclSuccess) return nc_nccl_break(st, "ncclCommGetAsyncError", q);
    if (state != ncclSuccess && state != ncclInProgress) return nc_nccl_break(st, what, state);
    plait_result_t failed = nc_family_failed(st);
    if (failed != PLAIT_SUCCESS)
      return nc_fail(st, failed, "%s was cut short: %s", what, st->fam->broken_msg);
    if (backoff_pause(&b) > st->timeout_s) return timed_out(st, what);
  }
}

plait_result_t nc_wait(nccl_state_t *st, const char *what) {
  cudaError_t e = cudaEventRecord(st->done, st->stream);
  if (e != cudaSuccess) return nc_cuda_break(st, PLAIT_ERR_TRANSPORT, "cudaEventRecord", e);
  return nc_wait_event(st, st->done, what);
}

plait_result_t nc_finish(nccl_state_t *st, const char *what) {
  return st->fam && st->fam->async ? PLAIT_SUCCESS : nc_wait(st, what);
}
