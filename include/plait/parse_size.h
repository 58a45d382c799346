/*
 * plait: the one parser of sizes in bytes, "65536", "64K", "64MiB", "1G",
 * for the configuration table (src/util/config.c), transport plugins (which
 * do not link against libplait) and the benchmarks alike. Static inline in
 * a header of its own, as dtypes.h is: not part of the installed API.
 *
 * The syntax is the configuration table's: one or more decimal digits, then
 * nothing (bytes) or a binary unit K, M, G or T (K = 1024), which may be
 * followed by B or iB; letters in either case ("64k", "64kib", "1GB"). No
 * sign, space, fraction, hex or exponent, no bare "B"; a value of 2^64 or
 * more is refused. Only ASCII is read, whatever the locale.
 *
 * Pure, no lock, any thread; compiles as C99, C11 and C++.
 */
#ifndef PLAIT_PARSE_SIZE_H
#define PLAIT_PARSE_SIZE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses exactly the len bytes at text (for a size inside a longer text,
 * e.g. "4K:64M"); 0 with *out set, or -1 with *out untouched. */
static inline int plait_parse_size_n(const char *text, size_t len, uint64_t *out) {
  size_t i = 0;
  uint64_t v = 0;
  for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
    unsigned d = (unsigned)(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (i == 0) return -1;
  if (i < len) {
    unsigned shift;
    switch (text[i] | 0x20) { /* ASCII lower case */
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: return -1;
    }
    const char *rest = text + i + 1;
    size_t n = len - i - 1; /* after the unit: "", "B" or "iB" */
    if (!(n == 0 || (n == 1 && (rest[0] | 0x20) == 'b') ||
          (n == 2 && (rest[0] | 0x20) == 'i' && (rest[1] | 0x20) == 'b')))
      return -1;
    if (v > (UINT64_MAX >> shift)) return -1;
    v <<= shift;
  }
  *out = v;
  return 0;
}

/* Parses the whole NUL-terminated text; 0 with *out set, or -1 with *out
 * untouched (NULL text: -1). */
static inline int plait_parse_size(const char *text, uint64_t *out) {
  return text ? plait_parse_size_n(text, strlen(text), out) : -1;
}

#ifdef __cplusplus
}
#endif

#endif
