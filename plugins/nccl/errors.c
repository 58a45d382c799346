#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vrecord(nccl_state_t *st, const char *fmt, va_list ap) {
  int n = 0;
  if (st->op) n = snprintf(st->err, sizeof st->err, "%s: ", st->op);
  if (n < 0 || (size_t)n >= sizeof st->err) n = 0;
  vsnprintf(st->err + n, sizeof st->err - (size_t)n, fmt, ap);
}

plait_result_t nc_fail(nccl_state_t *st, plait_result_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vrecord(st, fmt, ap);
  va_end(ap);
  return code;
}

plait_result_t nc_break(nccl_state_t *st, plait_result_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vrecord(st, fmt, ap);
  va_end(ap);
  if (st->broken != PLAIT_SUCCESS) return code;
  st->broken = code;
  memcpy(st->broken_msg, st->err, sizeof st->broken_msg);
  NC_WARN(st, "%s", st->err);
  /* The family is marked failed before any communicator is aborted: the
   * abort lets the stream go on, and a notify marker that runs then must
   * not read as success. */
  if (st->fam) nc_family_break(st->fam, code, st->err); /* aborts the members */
  if (st->fam) pthread_mutex_lock(&st->fam->comm_mu);
  if (st->comm) { /* not a member yet (init, subset) */
    /* Ends what is still running on the device (a kernel waiting for a
     * peer that will never come) and frees the communicator. */
    ncclResult_t r = ncclCommAbort(st->comm);
    if (r != ncclSuccess)
      NC_WARN(st, "ncclCommAbort after the failure: %s", ncclGetErrorString(r));
    st->comm = NULL;
  }
  if (st->fam) pthread_mutex_unlock(&st->fam->comm_mu);
  return code;
}

void nc_family_break(nc_family_t *f, plait_result_t code, const char *msg) {
  pthread_mutex_lock(&f->comm_mu);
  if (atomic_load(&f->broken) == PLAIT_SUCCESS) {
    snprintf(f->broken_msg, sizeof f->broken_msg, "%s", msg);
    atomic_store(&f->broken, code != PLAIT_SUCCESS ? (int)code : (int)PLAIT_ERR_INTERNAL);
    for (nccl_state_t *m = f->members; m; m = m->next_member) {
      if (!m->comm) continue;
      ncclResult_t r = ncclCommAbort(m->comm);
      if (r != ncclSuccess)
        NC_WARN(m, "ncclCommAbort after a failure on the stream: %s", ncclGetErrorString(r));
      m->comm = NULL;
    }
  }
  pthread_mutex_unlock(&f->comm_mu);
  pthread_mutex_lock(&f->q_mu);
  pthread_cond_broadcast(&f->q_cv);
  pthread_mutex_unlock(&f->q_mu);
}

plait_result_t nc_family_failed(const nccl_state_t *st) {
  return st->fam ? (plait_result_t)atomic_load(&st->fam->broken) : st->broken;
}

plait_result_t nc_code(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return PLAIT_SUCCESS;
    case ncclRemoteError: return PLAIT_ERR_PEER_LOST;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return PLAIT_ERR_INVALID_ARGUMENT;
    default: return PLAIT_ERR_TRANSPORT;
  }
}

int nc_job_rank(const nccl_state_t *st, int r) {
  return st->global_ranks && r >= 0 && r < st->nranks ? st->global_ranks[r] : r;
}

void nc_nccl_text(const nccl_state_t *st, const char *call, ncclResult_t r, char *buf,
                  size_t len) {
  const char *last = ncclGetLastError(st->comm);
  snprintf(buf, len, "%s failed: %s%s%s%s on rank %d (CUDA device %d)", call,
           ncclGetErrorString(r), last && *last ? " (" : "", last && *last ? last : "",
           last && *last ? ")" : "", nc_job_rank(st, st->rank), st->device);
}

plait_result_t nc_nccl_break(nccl_state_t *st, const char *call, ncclResult_t r) {
  char text[1024];
  /* ncclGetLastError reads the communicator, which the waiter may abort. */
  if (st->fam) pthread_mutex_lock(&st->fam->comm_mu);
  nc_nccl_text(st, call, r, text, sizeof text);
  if (st->fam) pthread_mutex_unlock(&st->fam->comm_mu);
  return nc_break(st, nc_code(r), "%s", text);
}

static void cuda_text(const nccl_state_t *st, const char *call, cudaError_t e, char *buf,
                      size_t len) {
  snprintf(buf, len, "%s failed: %s: %s on rank %d (CUDA device %d)", call, cudaGetErrorName(e),
           cudaGetErrorString(e), nc_job_rank(st, st->rank), st->device);
}

plait_result_t nc_cuda_fail(nccl_state_t *st, plait_result_t code, const char *call,
                            cudaError_t e) {
  char text[1024];
  cuda_text(st, call, e, text, sizeof text);
  return nc_fail(st, code, "%s", text);
}

plait_result_t nc_cuda_break(nccl_state_t *st, plait_result_t code, const char *call,
                             cudaError_t e) {
  char text[1024];
  cuda_text(st, call, e, text, sizeof text);
  return nc_break(st, code, "%s", text);
}
