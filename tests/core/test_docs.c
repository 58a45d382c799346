/* docs/configuration.md and the configuration table (src/util/config_table.h,
 * the one source of truth) agree: the table of variables there lists
 * exactly the table's variables, each with its type and default. And
 * docs/timeline.md names every activity of the timeline's one list
 * (src/engine/timeline.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/observe/timeline.h"
#include "util/config_table.h"

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

typedef struct {
  const char *var, *type, *def, *range;
} var_t;

static const var_t vars[] = {
#define X(field, var, type, def, range, help) {var, #type, def, range},
    PLAIT_CONFIG_TABLE(X)
#undef X
};
#define N_VARS (sizeof vars / sizeof vars[0])

/* The core's table of variables: from "## Variables" to the next heading. */
static char *core_section(char *doc) {
  char *start = strstr(doc, "\n## Variables\n");
  cr_assert(start, "docs/configuration.md has no '## Variables' section");
  start++;
  char *end = strstr(start + 1, "\n#");
  if (end) end[1] = '\0';
  return start;
}

Test(docs, configuration_md_lists_every_variable_with_type_and_default) {
  char *doc = slurp(PLAIT_SOURCE_DIR "/docs/configuration.md");
  char *sec = core_section(doc);
  for (size_t i = 0; i < N_VARS; i++) {
    char row[160];
    snprintf(row, sizeof row, "| `%s` | %s | ", vars[i].var, vars[i].type);
    char *at = strstr(sec, row);
    cr_expect(at, "docs/configuration.md has no row starting \"%s\"", row);
    if (at && *vars[i].range) { /* the range column of that row */
      char range[96];
      snprintf(range, sizeof range, "| `%s` |", vars[i].range);
      const char *eol = strchr(at, '\n');
      const char *cell = strstr(at, range);
      cr_expect(cell && (!eol || cell < eol), "docs/configuration.md: %s's range is not %s",
                vars[i].var, range);
    }
    if (!at || !*vars[i].def) continue; /* an empty default is explained in words */
    char def[96];
    snprintf(def, sizeof def, "`%s` |", vars[i].def);
    cr_expect(!strncmp(at + strlen(row), def, strlen(def)),
              "docs/configuration.md: %s's default is not %s", vars[i].var, def);
  }
  free(doc);
}

Test(docs, configuration_md_lists_no_variable_outside_the_table) {
  char *doc = slurp(PLAIT_SOURCE_DIR "/docs/configuration.md");
  char *sec = core_section(doc);
  int rows = 0;
  for (char *p = strstr(sec, "\n| `PLAIT_"); p; p = strstr(p + 1, "\n| `PLAIT_")) {
    char name[96];
    if (sscanf(p, "\n| `%95[A-Z0-9_]`", name) != 1) continue;
    rows++;
    int known = 0;
    for (size_t i = 0; i < N_VARS && !known; i++) known = !strcmp(vars[i].var, name);
    cr_expect(known, "docs/configuration.md documents %s, which src/util/config_table.h does not "
              "declare", name);
  }
  cr_expect_eq((size_t)rows, N_VARS, "%d rows for %zu variables", rows, N_VARS);
  free(doc);
}

Test(docs, timeline_md_names_every_activity) {
  char *doc = slurp(PLAIT_SOURCE_DIR "/docs/timeline.md");
  for (int a = 0; a < PLAIT_TL_ACTIVITY_COUNT; a++) {
    char quoted[96];
    snprintf(quoted, sizeof quoted, "`%s`", plait_tl_name((plait_tl_activity_t)a));
    cr_expect(strstr(doc, quoted), "docs/timeline.md does not name %s", quoted);
  }
  free(doc);
}
