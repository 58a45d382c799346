/* The documentation names every configuration variable in the table. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_table.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  fclose(f);
  return s;
}

Test(docs, configuration_md_lists_every_variable) {
  char *doc = slurp(PLAIT_SOURCE_DIR "/docs/configuration.md");
  static const char *vars[] = {
#define X(field, var, type, def, help) var,
      PLAIT_CONFIG_TABLE(X)
#undef X
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    char row[128];
    snprintf(row, sizeof row, "| `%s` |", vars[i]);
    cr_expect(strstr(doc, row), "docs/configuration.md has no table row for %s", vars[i]);
  }
  free(doc);
}
