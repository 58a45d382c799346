#include "errors.h"

#include "robustness/quiesce.h"

#include <errno.h>
#include <rdma/fi_errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vrecord(ofi_state_t *st, const char *fmt, va_list ap) {
  int n = 0;
  if (st->op) n = snprintf(st->err, sizeof st->err, "%s: ", st->op);
  if (n < 0 || (size_t)n >= sizeof st->err) n = 0;
  vsnprintf(st->err + n, sizeof st->err - (size_t)n, fmt, ap);
}

plait_result_t ofi_fail(ofi_state_t *st, plait_result_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vrecord(st, fmt, ap);
  va_end(ap);
  return code;
}

plait_result_t ofi_break(ofi_state_t *st, plait_result_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vrecord(st, fmt, ap);
  va_end(ap);
  if (st->broken == PLAIT_SUCCESS) {
    st->broken = code;
    memcpy(st->broken_msg, st->err, sizeof st->broken_msg);
    OFI_WARN(st, "%s", st->err);
    /* The collective's requests are cancelled and the queue drained now,
     * while they and the caller's buffers are alive (quiesce.h); plugin.c's
     * guarded entry layer closes the endpoint when the call returns. A
     * rescued state (abandoned) is never touched: libfabric's locks may be
     * held. A subset shares its parent's endpoint: what breaks one breaks
     * both. */
    ofi_quiesce(st);
    if (st->parent && st->parent->broken == PLAIT_SUCCESS) {
      st->parent->broken = code;
      memcpy(st->parent->broken_msg, st->broken_msg, sizeof st->parent->broken_msg);
    }
  }
  if (st->abandoned && st->parent) {
    st->parent->abandoned = 1;
    st->parent->rescued |= st->rescued; /* its endpoint is parked at teardown (parked.h) */
    if (st->rescued_tid) st->parent->rescued_tid = st->rescued_tid;
  }
  return code;
}

plait_result_t ofi_code(int e) {
  switch (e) {
    case FI_ECONNRESET:
    case FI_ECONNREFUSED:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_ESHUTDOWN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_ETIMEDOUT:
    case EPIPE:
    case FI_EIO:
    case FI_ECANCELED: /* never asked for: the provider flushed a closed connection */
      return PLAIT_ERR_PEER_LOST;
    case FI_ENOMEM:
      return PLAIT_ERR_NO_MEMORY;
    default:
      return PLAIT_ERR_TRANSPORT;
  }
}
