/* Formatting into a string of exactly the needed length (strdupf.h). */
#include "util/strdupf.h"

#include <stdio.h>
#include <stdlib.h>

char *plait_vstrdupf(const char *fmt, va_list ap) {
  va_list measure;
  va_copy(measure, ap);
  int n = vsnprintf(NULL, 0, fmt, measure); /* -1: over INT_MAX, or a bad format */
  va_end(measure);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (!s) return NULL;
  if (vsnprintf(s, (size_t)n + 1, fmt, ap) != n) { /* the same arguments: cannot differ */
    free(s);
    return NULL;
  }
  return s;
}

char *plait_strdupf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = plait_vstrdupf(fmt, ap);
  va_end(ap);
  return s;
}
