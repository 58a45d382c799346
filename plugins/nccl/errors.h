/*
 * Errors and logging. Every failure is a plait_result_t plus a message kept
 * in the state (last_error) that names this rank and its device; NCCL errors
 * carry ncclGetErrorString's and ncclGetLastError's text, CUDA errors
 * cudaGetErrorName's and cudaGetErrorString's.
 */
#ifndef PLAIT_NCCL_ERRORS_H
#define PLAIT_NCCL_ERRORS_H

#include "plait/dtypes.h" /* the inline names: no libplait to call */
#include "state.h"

#define NC_LOG(st, level, ...)                                                 \
  do {                                                                         \
    if ((st)->log != NULL && (int)(level) >= (st)->log_level)                  \
      (st)->log((int)(level), "nccl", __FILE__, __LINE__, __VA_ARGS__);        \
  } while (0)
#define NC_DEBUG(st, ...) NC_LOG(st, PLAIT_LOG_DEBUG, __VA_ARGS__)
#define NC_INFO(st, ...) NC_LOG(st, PLAIT_LOG_INFO, __VA_ARGS__)
#define NC_WARN(st, ...) NC_LOG(st, PLAIT_LOG_WARN, __VA_ARGS__)

/* Records "<op>: <message>" and returns code. Leaves the state usable: for
 * errors found before anything was enqueued. */
plait_result_t nc_fail(nccl_state_t *st, plait_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As nc_fail, then aborts the communicator (ncclCommAbort: nothing stays
 * stuck in a kernel) and breaks the state's family (nc_family_break), so
 * that every later call fails at once and every outstanding done fires with
 * this failure. Logs the failure once, at warn level. Core thread. */
plait_result_t nc_break(nccl_state_t *st, plait_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Breaks the family (every state sharing the stream): records msg as the
 * failure every later call reports, aborts every member's communicator
 * (under comm_mu) and wakes the waiter, which fails every outstanding done.
 * The first break wins. Any thread. */
void nc_family_break(nc_family_t *f, plait_result_t code, const char *msg);

/* The family's failure (PLAIT_SUCCESS while healthy). Any thread. */
plait_result_t nc_family_failed(const nccl_state_t *st);

/* The plait code for an NCCL result: a remote error (a peer exited or the
 * network failed) is PLAIT_ERR_PEER_LOST, a bad argument or usage
 * PLAIT_ERR_INVALID_ARGUMENT, the rest PLAIT_ERR_TRANSPORT. */
plait_result_t nc_code(ncclResult_t r);

/* "ncclAllReduce failed: <ncclGetErrorString> (<ncclGetLastError>) on rank
 * R (device D)" into buf. */
void nc_nccl_text(const nccl_state_t *st, const char *call, ncclResult_t r, char *buf,
                  size_t len);

/* After a failed NCCL call: breaks the state with nc_code(r) and the text. */
plait_result_t nc_nccl_break(nccl_state_t *st, const char *call, ncclResult_t r);

/* After a failed CUDA call: "call failed: cudaErrorX: text on rank R (CUDA
 * device D)". nc_cuda_fail leaves the state usable, nc_cuda_break breaks it
 * (for a failure with work enqueued). */
plait_result_t nc_cuda_fail(nccl_state_t *st, plait_result_t code, const char *call,
                            cudaError_t e);
plait_result_t nc_cuda_break(nccl_state_t *st, plait_result_t code, const char *call,
                             cudaError_t e);

/* The rank of this communicator's rank r in the job (a subset's ranks are
 * renumbered). */
int nc_job_rank(const nccl_state_t *st, int r);

#define NC_REQUIRE(st, cond, ...)                                              \
  do {                                                                         \
    if (!(cond)) return nc_fail((st), PLAIT_ERR_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)

/* Propagates a failure (the message is already recorded). */
#define NC_CHECK(expr)                                                         \
  do {                                                                         \
    plait_result_t nc_rc_ = (expr);                                            \
    if (nc_rc_ != PLAIT_SUCCESS) return nc_rc_;                                \
  } while (0)

#endif
