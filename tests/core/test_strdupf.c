/*
 * util/strdupf: a formatted message in a string of its own length. Every
 * length comes back whole (around the sizes of the fixed buffers it
 * replaced, and far past them) in a block no bigger than the text needs;
 * "" is a string; a format that fails or memory that runs out give NULL,
 * never a cut or half-written text.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <wchar.h>

#include "util/strdupf.h"

Test(strdupf, formats_as_printf) {
  char *s = plait_strdupf("%s '%s': %d of %u, %.1f%% %c", "allreduce", "w", -3, 4u, 12.5, 'x');
  cr_assert_not_null(s);
  cr_expect_str_eq(s, "allreduce 'w': -3 of 4, 12.5% x");
  free(s);
}

Test(strdupf, empty_text_is_a_string) {
  char *s = plait_strdupf("%s", "");
  cr_assert_not_null(s, "an empty result is \"\", not NULL");
  cr_expect_eq(s[0], '\0');
  free(s);
}

/* Lengths about each former fixed buffer (256, 512, 768, 1024, 1600) and
 * well past them: the whole text, in a block that fits it closely. */
Test(strdupf, every_length_whole_and_sized_to_fit) {
  static const size_t lengths[] = {1,    2,    15,   16,   17,   255,  256,  257,   511,  512,
                                   513,  767,  768,  769,  1023, 1024, 1025, 1599,  1600, 1601,
                                   4095, 4096, 8191, 8192, 8193, 65535, 65536, 1u << 20};
  for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
    size_t n = lengths[i];
    char *name = malloc(n);
    cr_assert_not_null(name);
    for (size_t j = 0; j < n - 1; j++) name[j] = (char)('a' + j % 26);
    name[n - 1] = '\0'; /* n - 1 characters, then "'" twice around it */
    char *s = plait_strdupf("'%s'", name);
    cr_assert_not_null(s, "length %zu", n + 1);
    cr_expect_eq(strlen(s), n + 1, "length %zu came back as %zu", n + 1, strlen(s));
    cr_expect(s[0] == '\'' && s[n] == '\'' && !memcmp(s + 1, name, n - 1), "length %zu", n + 1);
    if (n < 65536) /* below malloc's mmap threshold: 16-byte steps, and a split
                      leaves no remainder under 32 bytes */
      cr_expect_lt(malloc_usable_size(s), n + 2 + 48, "length %zu: a block of %zu bytes", n + 1,
                   malloc_usable_size(s));
    free(s);
    free(name);
  }
}

static char *vformat_twice(char **second, const char *fmt, ...) {
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  char *first = plait_vstrdupf(fmt, ap);
  *second = plait_vstrdupf(fmt, again);
  va_end(again);
  va_end(ap);
  return first;
}

Test(strdupf, va_list_form_measures_on_a_copy) {
  char *second, *first = vformat_twice(&second, "%s=%d", "PLAIT_SPIN_US", 50);
  cr_assert(first && second);
  cr_expect_str_eq(first, "PLAIT_SPIN_US=50");
  cr_expect_str_eq(second, "PLAIT_SPIN_US=50");
  free(first);
  free(second);
}

/* vsnprintf fails (-1) on a wide character the locale cannot write (the C
 * locale, as a test starts): NULL, nothing half-written. */
Test(strdupf, failing_format_gives_null) {
  static const wchar_t bad[] = {0xD800, 0};
  cr_expect_null(plait_strdupf("before %ls after", bad));
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

/* Address space capped just above what the process maps now (criterion runs
 * each test in a process of its own): a 4 MiB text cannot be allocated. */
Test(strdupf, out_of_memory_gives_null) {
#ifdef UNDER_SANITIZER
  cr_skip_test("a sanitizer reserves address space that an RLIMIT_AS cap would starve");
#else
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  cr_assert(f && fscanf(f, "%lu", &pages) == 1);
  fclose(f);
  size_t mapped = pages * (size_t)sysconf(_SC_PAGESIZE);
  struct rlimit was, cap;
  cr_assert_eq(getrlimit(RLIMIT_AS, &was), 0);
  cap = (struct rlimit){mapped + (1u << 20), was.rlim_max}; /* the soft limit only */
  cr_assert_eq(setrlimit(RLIMIT_AS, &cap), 0);
  char *big = plait_strdupf("%*s", 4 << 20, "");
  char *small = plait_strdupf("%s", "small");
  cr_assert_eq(setrlimit(RLIMIT_AS, &was), 0); /* criterion reports with room again */
  cr_expect_null(big, "a 4 MiB text under a 1 MiB margin of address space");
  cr_expect(small && !strcmp(small, "small"), "small texts still fit");
  free(big);
  free(small);
#endif
}
