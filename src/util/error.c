/* The per-thread last error (the public calls that read it and name result
 * codes are util/error_abi.c: this file also goes into plaitrun, through
 * plait_base, which must not define public symbols). */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>


#define PLAIT_ERROR_MAX 2048

static _Thread_local char last_error[PLAIT_ERROR_MAX];

const char *plait_error_message(void) { return last_error; }

int plait_format_ranks(char *buf, size_t cap, int n, const unsigned char *pick) {
  int count = 0, listed = 0;
  for (int r = 0; r < n; r++) count += pick[r] != 0;
  size_t used = (size_t)snprintf(buf, cap, "%s ", count == 1 ? "rank" : "ranks");
  for (int r = 0; r < n && used + 16 < cap; r++)
    if (pick[r]) used += (size_t)snprintf(buf + used, cap - used, "%s%d", listed++ ? ", " : "", r);
  if (listed < count && used < cap) snprintf(buf + used, cap - used, ", ...");
  return count;
}

plait_result_t plait_error(plait_result_t result, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return result;
}

plait_result_t plait_error_context(plait_result_t result, const char *fmt, ...) {
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(prefix, sizeof prefix - 2, fmt, ap);
  va_end(ap);
  if (n < 0) return result;
  size_t plen = strlen(prefix);
  memcpy(prefix + plen, ": ", 3);
  plen += 2;
  /* shift the old message right (cut at the end if need be), then prefix */
  memmove(last_error + plen, last_error, sizeof last_error - plen - 1);
  memcpy(last_error, prefix, plen);
  last_error[sizeof last_error - 1] = '\0';
  return result;
}
