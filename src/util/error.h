/* Internal: the thread's last error and the check macros. */
#ifndef PLAIT_ERROR_H
#define PLAIT_ERROR_H

#include "plait/plait.h"

/* Records "fmt..." as this thread's last error and returns result. */
plait_result_t plait_error(plait_result_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* This thread's last error: what plait_last_error() returns in libplait; code
 * linked into plaitrun (plait_base) reads its own copy with this. */
const char *plait_error_message(void);

/* Prefixes this thread's last error with "fmt...: " (adds context on the way
 * up) and returns result. */
plait_result_t plait_error_context(plait_result_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes "rank 3" or "ranks 1, 3" (ending ", ..." when cut short) for the
 * ranks r in [0, n) with pick[r] set; returns how many were picked. */
int plait_format_ranks(char *buf, size_t cap, int n, const unsigned char *pick);

/* Evaluate expr (a plait_result_t); on failure return it. */
#define PLAIT_CHECK(expr)                                                      \
  do {                                                                         \
    plait_result_t plait_check_rc_ = (expr);                                   \
    if (plait_check_rc_ != PLAIT_SUCCESS) return plait_check_rc_;              \
  } while (0)

/* Evaluate expr into rc; on failure jump to label. */
#define PLAIT_CHECK_GOTO(rc, expr, label)                                      \
  do {                                                                         \
    (rc) = (expr);                                                             \
    if ((rc) != PLAIT_SUCCESS) goto label;                                     \
  } while (0)

#endif
