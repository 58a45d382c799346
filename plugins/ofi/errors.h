/*
 * Errors and logging. Every failure is a plait_result_t plus a message kept
 * in the state (last_error); libfabric errors carry fi_strerror's text (and
 * fi_cq_strerror's for completion errors) and the peer's rank.
 */
#ifndef PLAIT_OFI_ERRORS_H
#define PLAIT_OFI_ERRORS_H

#include "plait/dtypes.h" /* plait_result_name_inline: no libplait to call */
#include "state.h"

#define OFI_LOG(st, level, ...)                                                \
  do {                                                                         \
    if ((st)->log != NULL && (int)(level) >= (st)->log_level)                  \
      (st)->log((int)(level), "ofi", __FILE__, __LINE__, __VA_ARGS__);         \
  } while (0)
#define OFI_DEBUG(st, ...) OFI_LOG(st, PLAIT_LOG_DEBUG, __VA_ARGS__)
#define OFI_INFO(st, ...) OFI_LOG(st, PLAIT_LOG_INFO, __VA_ARGS__)
#define OFI_WARN(st, ...) OFI_LOG(st, PLAIT_LOG_WARN, __VA_ARGS__)

/* Records the message (prefixed with the running collective's name) and
 * returns code. Leaves the state usable: for errors found before any
 * communication. */
plait_result_t ofi_fail(ofi_state_t *st, plait_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As ofi_fail, and marks the state broken: the ranks may be out of step, so
 * every later collective fails at once (a subset's parent with it). Logs the
 * failure once, at warn level, and quiesces the endpoint (quiesce.h: cancels
 * and drains the collective's posted requests) unless the state was rescued
 * (abandoned). The collective returns the code up to its entry point, whose
 * guarded layer (plugin.c) closes the endpoint. */
plait_result_t ofi_break(ofi_state_t *st, plait_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The plait code for a libfabric error number (positive, as in
 * fi_cq_err_entry.err): a lost connection is PLAIT_ERR_PEER_LOST, the rest
 * PLAIT_ERR_TRANSPORT. */
plait_result_t ofi_code(int fi_errno);

#define OFI_REQUIRE(st, cond, ...)                                             \
  do {                                                                         \
    if (!(cond)) return ofi_fail((st), PLAIT_ERR_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)

/* Propagates a failure (the message is already recorded). */
#define OFI_CHECK(expr)                                                        \
  do {                                                                         \
    plait_result_t ofi_rc_ = (expr);                                           \
    if (ofi_rc_ != PLAIT_SUCCESS) return ofi_rc_;                              \
  } while (0)

#endif
