/* Internal: a message formatted into a string of its own length. */
#ifndef PLAIT_STRDUPF_H
#define PLAIT_STRDUPF_H

#include <stdarg.h>

/* A new string holding fmt formatted as printf would, however long; the
 * caller frees it. NULL when out of memory, or when the text would be
 * INT_MAX bytes or longer or the format fails (printf's own limits): no
 * half-written or cut text is ever returned. Any thread; reads only its
 * arguments. plait_vstrdupf leaves ap as vsnprintf does (use it no more). */
char *plait_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *plait_vstrdupf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#endif
