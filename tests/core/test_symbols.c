/*
 * The ABI of libplait.so is exactly what plait.h declares: the dynamic
 * function symbols that `nm -D --defined-only` lists equal the functions
 * declared with PLAIT_API in include/plait/plait.h and include/plait/elastic.h. An internal function that
 * leaks out (a missed `static`, a version script that says too much) or a
 * declared function that is not exported (hidden visibility, a typo in the
 * name) fails the test, which prints the difference both ways.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NAMES 512
#define NAME_LEN 128

typedef struct {
  char names[MAX_NAMES][NAME_LEN];
  size_t n;
} name_set_t;

static int set_has(const name_set_t *s, const char *name) {
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->names[i], name)) return 1;
  return 0;
}

static void set_add(name_set_t *s, const char *name, size_t len) {
  cr_assert_lt(len, (size_t)NAME_LEN, "symbol name too long: %.*s", (int)len, name);
  char tmp[NAME_LEN];
  memcpy(tmp, name, len);
  tmp[len] = '\0';
  if (set_has(s, tmp)) return;
  cr_assert_lt(s->n, (size_t)MAX_NAMES);
  memcpy(s->names[s->n++], tmp, len + 1);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  cr_assert_not_null(buf);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      cr_assert_not_null(buf);
    }
  }
  fclose(f);
  buf[len] = '\0';
  return buf;
}

/* Blanks out comments, string and character literals, and preprocessor lines
 * (with their continuations), keeping newlines, so that only declarations are
 * left to scan. */
static void strip(char *s) {
  int line_start = 1;
  for (char *p = s; *p;) {
    if (line_start) {
      char *q = p;
      while (*q == ' ' || *q == '\t') q++;
      if (*q == '#') { /* directive: blank up to an unescaped newline */
        char prev = 0;
        while (*q && !(*q == '\n' && prev != '\\')) {
          prev = *q;
          if (*q != '\n') *q = ' ';
          q++;
        }
        p = q;
        continue;
      }
    }
    line_start = 0;
    if (p[0] == '/' && p[1] == '*') {
      char *end = strstr(p + 2, "*/");
      char *stop = end ? end + 2 : p + strlen(p);
      for (; p < stop; p++)
        if (*p != '\n') *p = ' ';
      continue;
    }
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') *p++ = ' ';
      continue;
    }
    if (*p == '"' || *p == '\'') {
      char quote = *p;
      *p++ = ' ';
      while (*p && *p != quote) {
        if (*p == '\\' && p[1]) *p++ = ' ';
        if (*p != '\n') *p = ' ';
        p++;
      }
      if (*p) *p++ = ' ';
      continue;
    }
    if (*p == '\n') line_start = 1;
    p++;
  }
}

static int ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Names of the functions declared `PLAIT_API ... plait_xxx(` in the header;
 * a declaration may be spread over several lines. */
static void header_functions(const char *path, name_set_t *out) {
  char *text = read_file(path);
  strip(text);
  static const char api[] = "PLAIT_API";
  for (char *p = strstr(text, api); p; p = strstr(p + 1, api)) {
    if ((p > text && ident_char(p[-1])) || ident_char(p[sizeof api - 1])) continue;
    char *paren = p + sizeof api - 1;
    while (*paren && *paren != '(' && *paren != ';') paren++;
    cr_assert_eq(*paren, '(', "%s: PLAIT_API without a function after it: %.60s", path, p);
    char *end = paren;
    while (end > p && isspace((unsigned char)end[-1])) end--;
    char *start = end;
    while (start > p && ident_char(start[-1])) start--;
    cr_assert_gt(end, start, "%s: no name before '(' in: %.60s", path, p);
    cr_assert_eq(strncmp(start, "plait_", 6), 0, "%s: PLAIT_API function %.*s is not plait_*", path,
                 (int)(end - start), start);
    set_add(out, start, (size_t)(end - start));
  }
  free(text);
}

static int have_nm(void) {
  FILE *f = popen("command -v nm 2>/dev/null", "r");
  if (!f) return 0;
  char line[512] = "";
  char *got = fgets(line, sizeof line, f);
  pclose(f);
  return got && *line;
}

/* Dynamic defined symbols of lib: functions into funcs, everything else that
 * is not a version node into others. */
static void library_symbols(const char *lib, name_set_t *funcs, name_set_t *others) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>&1", lib);
  FILE *f = popen(cmd, "r");
  cr_assert_not_null(f, "popen(%s)", cmd);
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    /* "0000000000003950 T plait_shutdown@@PLAIT_0" (the address may be absent) */
    char a[64] = "", b[512] = "", c[512] = "";
    int n = sscanf(line, "%63s %511s %511s", a, b, c);
    const char *type, *name;
    if (n == 3) {
      type = b;
      name = c;
    } else if (n == 2) {
      type = a;
      name = b;
    } else {
      continue;
    }
    if (strlen(type) != 1) cr_assert_fail("unexpected nm output: %s", line);
    size_t len = strcspn(name, "@");
    switch (type[0]) {
    case 'T': case 'W': case 'i': set_add(funcs, name, len); break;
    case 'A': break; /* version node such as PLAIT_0 */
    default: set_add(others, name, len); break;
    }
  }
  int status = pclose(f);
  cr_assert_eq(status, 0, "`%s` failed (status %d)", cmd, status);
}

static void print_set(const char *title, const name_set_t *s) {
  fprintf(stderr, "%s (%zu):", title, s->n);
  for (size_t i = 0; i < s->n; i++) fprintf(stderr, " %s", s->names[i]);
  fprintf(stderr, "\n");
}

Test(symbols, exports_equal_the_header) {
  if (!have_nm()) cr_skip_test("nm (binutils) is not on PATH: cannot list the exports");
  static const char lib[] = PLAIT_TEST_LIB_DIR "/libplait.so";
  static const char header[] = PLAIT_SOURCE_DIR "/include/plait/plait.h";
  static const char elastic[] = PLAIT_SOURCE_DIR "/include/plait/elastic.h";
  cr_assert_eq(access(lib, R_OK), 0, "%s is missing: build the 'plait' target first", lib);

  static name_set_t declared, exported, other;
  header_functions(header, &declared);
  header_functions(elastic, &declared);
  library_symbols(lib, &exported, &other);
  /* guard against a parser that finds nothing on both sides */
  cr_assert(set_has(&declared, "plait_init") && set_has(&declared, "plait_config_dump") &&
                set_has(&declared, "plait_version_string"),
            "the header parser missed declarations");
  cr_assert_gt(exported.n, 0, "nm lists no function in %s", lib);

  static name_set_t missing, extra;
  for (size_t i = 0; i < declared.n; i++)
    if (!set_has(&exported, declared.names[i]))
      set_add(&missing, declared.names[i], strlen(declared.names[i]));
  for (size_t i = 0; i < exported.n; i++)
    if (!set_has(&declared, exported.names[i]))
      set_add(&extra, exported.names[i], strlen(exported.names[i]));
  if (missing.n || extra.n) {
    print_set("declared with PLAIT_API in plait.h or elastic.h but not exported by libplait.so",
              &missing);
    print_set("exported by libplait.so but not declared with PLAIT_API in plait.h or elastic.h",
              &extra);
  }
  cr_expect_eq(missing.n, 0, "%zu declared function(s) not exported, first: %s", missing.n,
               missing.n ? missing.names[0] : "");
  cr_expect_eq(extra.n, 0, "%zu exported function(s) not declared, first: %s", extra.n,
               extra.n ? extra.names[0] : "");
  cr_expect_eq(declared.n, exported.n);
  if (other.n) print_set("exported non-function symbols", &other);
  cr_expect_eq(other.n, 0, "libplait.so exports data symbol(s), first: %s",
               other.n ? other.names[0] : "");
}

Test(symbols, header_parser_reads_split_declarations) {
  /* The parser itself, on a header that spreads declarations over lines and
   * mentions PLAIT_API in comments, strings and directives. */
  char path[] = "/tmp/plait-symbols-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  static const char text[] =
      "#define PLAIT_API __attribute__((visibility(\"default\")))\n"
      "#define TWO_LINES \\\n  PLAIT_API int plait_not_this(void);\n"
      "/* PLAIT_API int plait_commented(void); */\n"
      "// PLAIT_API int plait_line_comment(void);\n"
      "static const char *s = \"PLAIT_API int plait_in_string(void);\";\n"
      "PLAIT_API int plait_one(void);\n"
      "PLAIT_API const char *\nplait_two\n  (int x);\n"
      "PLAIT_API plait_result_t plait_three(char *buf,\n    size_t n);\n"
      "int plait_not_api(void);\n";
  cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  static name_set_t got;
  header_functions(path, &got);
  unlink(path);
  cr_expect_eq(got.n, 3, "found %zu names", got.n);
  cr_expect(set_has(&got, "plait_one"));
  cr_expect(set_has(&got, "plait_two"));
  cr_expect(set_has(&got, "plait_three"));
}
