/* The docs checked against the code: docs/configuration.md against the
 * configuration table (src/util/config_table.h, the one source of truth): the
 * table of variables there lists exactly the table's variables, each with its
 * type and default; docs/timeline.md names every activity of the timeline's
 * one list (src/engine/observe/timeline.h); docs/design.md's file map against
 * the tree. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* docs/design.md's file map (the section between "<!-- file-map: begin" and
 * "<!-- file-map: end -->") and the tree agree: every folder and file it names
 * exists; every folder of src/ and plugins/ that holds source files has a row,
 * and each of those files is named in its folder's rows; the walk of one
 * allreduce names at most 8 files, each of which exists. Rows read
 * "| `folder/` | `a.c`, `b.{c,h}` | what |". */
#define MAP_MAX 1024
static struct {
  char dir[128], name[96];
} map_files[MAP_MAX];
static size_t n_map_files;
static char map_dirs[256][128];
static size_t n_map_dirs;

static char *file_map_section(char *doc) {
  char *start = strstr(doc, "<!-- file-map: begin");
  cr_assert(start, "docs/design.md has no '<!-- file-map: begin' marker");
  char *end = strstr(start, "<!-- file-map: end -->");
  cr_assert(end, "docs/design.md has no '<!-- file-map: end -->' marker");
  *end = '\0';
  return start;
}

static int path_is(const char *rel, mode_t type) {
  char path[512];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", PLAIT_SOURCE_DIR, rel);
  return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

static void map_add_file(const char *dir, const char *name) {
  cr_assert_lt(n_map_files, (size_t)MAP_MAX);
  snprintf(map_files[n_map_files].dir, sizeof map_files[0].dir, "%s", dir);
  snprintf(map_files[n_map_files].name, sizeof map_files[0].name, "%s", name);
  n_map_files++;
  char rel[256];
  snprintf(rel, sizeof rel, "%s%s", dir, name);
  cr_expect(path_is(rel, S_IFREG), "docs/design.md's file map names %s, which does not exist", rel);
}

/* One name of a row's second cell; "stem.{c,h}" stands for stem.c and stem.h. */
static void map_add_names(const char *dir, const char *tok) {
  const char *open = strchr(tok, '{'), *close = open ? strchr(open, '}') : NULL;
  if (!close) {
    map_add_file(dir, tok);
    return;
  }
  const char *alt = open + 1;
  while (alt <= close) {
    const char *stop = alt;
    while (stop < close && *stop != ',') stop++;
    char name[96];
    snprintf(name, sizeof name, "%.*s%.*s%s", (int)(open - tok), tok, (int)(stop - alt), alt,
             close + 1);
    map_add_file(dir, name);
    alt = stop + 1;
  }
}

/* Reads the map's rows into map_dirs and map_files. */
static void read_file_map(char *sec) {
  n_map_files = n_map_dirs = 0;
  for (char *line = strstr(sec, "\n| `"); line; line = strstr(line + 1, "\n| `")) {
    char dir[128];
    if (sscanf(line, "\n| `%127[^`]`", dir) != 1) continue;
    cr_expect(dir[strlen(dir) - 1] == '/', "docs/design.md's file map: row '%s' is not a folder "
              "(rows are '| `folder/` | `file`, ... | what |')", dir);
    cr_expect(path_is(dir, S_IFDIR), "docs/design.md's file map names %s, which does not exist",
              dir);
    cr_assert_lt(n_map_dirs, sizeof map_dirs / sizeof map_dirs[0]);
    snprintf(map_dirs[n_map_dirs++], sizeof map_dirs[0], "%s", dir);
    char *eol = strchr(line + 1, '\n');
    char *cell = strchr(line + 3, '|'); /* the files cell, after the folder's */
    cr_assert(cell && (!eol || cell < eol), "docs/design.md's file map: row %s has no files cell",
              dir);
    char *cell_end = strchr(cell + 1, '|');
    for (char *p = strchr(cell, '`'); p && p < cell_end; p = strchr(p + 1, '`')) {
      char *q = strchr(p + 1, '`');
      if (!q || q > cell_end) break;
      char tok[96];
      snprintf(tok, sizeof tok, "%.*s", (int)(q - p - 1), p + 1);
      map_add_names(dir, tok);
      p = q;
    }
  }
}

static int source_file(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (!strcmp(dot, ".c") || !strcmp(dot, ".h") || !strcmp(dot, ".cc") ||
                 !strcmp(dot, ".cu") || !strcmp(dot, ".cpp"));
}

static int unmapped;
static int check_mapped(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type != FTW_F || !source_file(path + ftw->base)) return 0;
  const char *rel = path + strlen(PLAIT_SOURCE_DIR) + 1;
  char dir[128];
  snprintf(dir, sizeof dir, "%.*s", ftw->base - (int)strlen(PLAIT_SOURCE_DIR) - 1, rel);
  int has_row = 0, named = 0;
  for (size_t i = 0; i < n_map_dirs; i++) has_row |= !strcmp(map_dirs[i], dir);
  for (size_t i = 0; i < n_map_files && !named; i++)
    named = !strcmp(map_files[i].dir, dir) && !strcmp(map_files[i].name, path + ftw->base);
  if (!has_row) {
    cr_expect(0, "%s is not in docs/design.md's file map: its folder %s has no row", rel, dir);
  } else {
    cr_expect(named, "%s is not in docs/design.md's file map: name it in a row of %s", rel, dir);
  }
  unmapped += !named;
  return 0;
}

Test(docs, design_md_file_map_names_what_exists_and_every_source_file) {
  char *doc = slurp(PLAIT_SOURCE_DIR "/docs/design.md");
  read_file_map(file_map_section(doc));
  cr_expect_gt(n_map_dirs, 0, "docs/design.md's file map has no rows");
  unmapped = 0;
  cr_assert_eq(nftw(PLAIT_SOURCE_DIR "/src", check_mapped, 16, FTW_PHYS), 0);
  cr_assert_eq(nftw(PLAIT_SOURCE_DIR "/plugins", check_mapped, 16, FTW_PHYS), 0);
  cr_expect_eq(unmapped, 0, "%d source files of src/ and plugins/ are not in the file map", unmapped);
  free(doc);
}

Test(docs, design_md_walks_one_allreduce_through_at_most_8_named_files) {
  char *doc = slurp(PLAIT_SOURCE_DIR "/docs/design.md");
  char *sec = file_map_section(doc);
  int steps = 0;
  for (char *p = strchr(sec, '\n'); p; p = strchr(p + 1, '\n')) {
    int n;
    char rel[256];
    if (p[1] < '1' || p[1] > '9' || sscanf(p + 1, "%d. `%255[^`]`", &n, rel) != 2) continue;
    steps++;
    cr_expect_eq(n, steps, "docs/design.md's walk: step %d is numbered %d", steps, n);
    cr_expect(path_is(rel, S_IFREG), "docs/design.md's walk, step %d, names %s, which does not "
              "exist", n, rel);
  }
  cr_expect_gt(steps, 0, "docs/design.md's file map has no walk of one allreduce "
               "('1. `path`: ...')");
  cr_expect_leq(steps, 8, "docs/design.md walks one allreduce through %d files; at most 8",
                steps);
  free(doc);
}
