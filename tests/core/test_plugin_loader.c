/* The transport plugin loader: search order, and a clear message for every
 * way a plugin can be missing or broken (tests/plugins/fixtures/ builds the broken
 * ones). Each test is a job of one rank. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plait/plait.h"
#include "engine/transport/plugin.h"
#include "ranks.h"

static void setup(void) {
  unsetenv("PLAIT_RANK");
  unsetenv("PLAIT_SIZE");
  setenv("PLAIT_PLUGIN_PATH", PLAIT_TEST_PLUGIN_DIR, 1);
}
TestSuite(loader, .init = setup);

static void expect_init_fails(const char *transport, plait_result_t code, const char *const *needles) {
  setenv("PLAIT_TRANSPORT", transport, 1);
  plait_result_t rc = plait_init();
  const char *msg = plait_last_error();
  cr_assert_eq(rc, code, "PLAIT_TRANSPORT=%s: got %s (%s)", transport, plait_result_name(rc), msg);
  for (const char *const *n = needles; *n; n++)
    cr_assert(strstr(msg, *n), "message for %s lacks '%s': %s", transport, *n, msg);
  int on = 1;
  plait_is_initialized(&on);
  cr_assert_eq(on, 0, "a failed init must leave plait uninitialized");
}

Test(loader, valid_plugin_loads) {
  setenv("PLAIT_TRANSPORT", "fixture", 1);
  cr_assert_eq(plait_init(), PLAIT_SUCCESS, "%s", plait_last_error());
  const char *name = NULL;
  cr_assert_eq(plait_transport_name(&name), PLAIT_SUCCESS);
  cr_assert_str_eq(name, "fixture");
  cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS);
}

Test(loader, unknown_name_lists_every_path_tried) {
  setenv("PLAIT_PLUGIN_PATH", PLAIT_TEST_PLUGIN_DIR ":/nonexistent/dir", 1);
  const char *n[] = {"'nosuch'", "not found",
                     PLAIT_TEST_PLUGIN_DIR "/libplait-transport-nosuch.so",
                     "/nonexistent/dir/libplait-transport-nosuch.so",
                     "cannot open shared object file", "PLAIT_PLUGIN_PATH", NULL};
  expect_init_fails("nosuch", PLAIT_ERR_PLUGIN, n);
}

Test(loader, folder_of_libplait_is_searched_last) {
  unsetenv("PLAIT_PLUGIN_PATH");
  const char *n[] = {"libplait-transport-nosuch.so", NULL};
  expect_init_fails("nosuch", PLAIT_ERR_PLUGIN, n);
  /* the core is linked into this test program, so "beside libplait" is the
   * program's folder */
  cr_assert(strstr(plait_last_error(), "/tests/libplait-transport-nosuch.so"), "%s",
            plait_last_error());
}

Test(loader, missing_symbol) {
  const char *n[] = {"libplait-transport-nosymbol.so", "does not export plait_transport_v2 (nor plait_transport_v1)",
                     "undefined symbol", NULL};
  expect_init_fails("nosymbol", PLAIT_ERR_PLUGIN, n);
}

Test(loader, wrong_abi_version) {
  const char *n[] = {"libplait-transport-badabi.so", "ABI version 99", "needs 1", NULL};
  expect_init_fails("badabi", PLAIT_ERR_PLUGIN, n);
}

Test(loader, too_small_table) {
  const char *n[] = {"libplait-transport-small.so", "24 bytes", "at least", NULL};
  expect_init_fails("small", PLAIT_ERR_PLUGIN, n);
}

Test(loader, null_function) {
  const char *n[] = {"'nullfn'", "alltoallv() NULL", NULL};
  expect_init_fails("nullfn", PLAIT_ERR_PLUGIN, n);
}

Test(loader, init_failure_carries_the_plugins_message) {
  const char *n[] = {"'initfail' failed to start", "the fabric is on fire", NULL};
  expect_init_fails("initfail", PLAIT_ERR_TRANSPORT, n);
}

Test(loader, unloadable_library_reports_dlerror) {
  const char *n[] = {"libplait-transport-unloadable.so", "undefined symbol",
                     "plait_symbol_that_does_not_exist", NULL};
  expect_init_fails("unloadable", PLAIT_ERR_PLUGIN, n);
}

Test(loader, name_cannot_be_a_path) {
  const char *n[] = {"PLAIT_TRANSPORT", "../etc", "lowercase", NULL};
  expect_init_fails("../etc", PLAIT_ERR_CONFIG, n);
}

Test(loader, init_works_after_a_broken_plugin) {
  setenv("PLAIT_TRANSPORT", "badabi", 1);
  cr_assert_eq(plait_init(), PLAIT_ERR_PLUGIN);
  setenv("PLAIT_TRANSPORT", "fixture", 1);
  cr_assert_eq(plait_init(), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS);
}

/* A version-1 plugin (the fixture, built through the frozen
 * transport_v1.h) is served as the current table by the adapter, with the
 * traits version 1 implies: no folding, not a candidate of auto, the
 * configuration's fusion defaults; its allreduce refuses what it cannot
 * map, with the adapter's own message. */
Test(loader, v1_plugin_is_served_through_the_adapter) {
  plait_plugin_t p;
  cr_assert_eq(plait_plugin_load(&p, "fixture", PLAIT_TEST_PLUGIN_DIR), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_assert_not_null(p.adapter);
  cr_assert_eq(p.table->abi_version, PLAIT_TRANSPORT_ABI_VERSION);
  cr_assert_str_eq(p.table->name, "fixture");
  cr_assert_eq(p.table->allreduce_flags, 0);
  cr_assert_eq(p.table->auto_place, 0);
  cr_assert_eq(p.table->fusion_piece, 0);
  cr_assert_eq(p.table->fusion_max_tensor, 0);
  cr_assert_null(p.table->algorithm, "beyond the fixture's struct_size: not read");
  float x[2] = {1, 2}, y[2];
  plait_span_t out_of_place = {y, x, 2};
  int st = 0;
  cr_assert_eq(p.table->allreduce(&st, &out_of_place, 1, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0, 1.0),
               PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(p.table->last_error(&st), "no allreduce_scaled"), "%s",
            p.table->last_error(&st));
  plait_span_t in_place = {x, x, 2}; /* mapped onto v1's allreduce: the fixture's answer */
  cr_assert_eq(p.table->allreduce(&st, &in_place, 1, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0, 1.0),
               PLAIT_ERR_UNSUPPORTED);
  cr_assert_null(strstr(p.table->last_error(&st), "ABI v1"),
                 "the adapter's refusal is not the plugin's message: %s", p.table->last_error(&st));
  plait_plugin_unload(&p);
  cr_assert_null(p.adapter);
}

Test(loader, table_checks_direct) {
  plait_plugin_t p;
  cr_assert_eq(plait_plugin_load(&p, "fixture", PLAIT_TEST_PLUGIN_DIR), PLAIT_SUCCESS, "%s",
               plait_last_error());
  plait_transport_t copy = *p.table; /* the fixture (ABI v1) as its adapter serves it */
  copy.caps = 0;
  cr_assert_eq(plait_plugin_check_table(&copy, "x.so"), PLAIT_ERR_PLUGIN);
  cr_assert(strstr(plait_last_error(), "no memory space"));
  copy = *p.table;
  copy.name = NULL;
  cr_assert_eq(plait_plugin_check_table(&copy, "x.so"), PLAIT_ERR_PLUGIN);
  cr_assert(strstr(plait_last_error(), "no name"));
  copy = *p.table;
  copy.mem_copy = NULL;
  cr_assert_eq(plait_plugin_check_table(&copy, "x.so"), PLAIT_ERR_PLUGIN);
  cr_assert(strstr(plait_last_error(), "mem_copy() NULL"));
  copy = *p.table;
  copy.allreduce_flags = PLAIT_ALLREDUCE_SPANS; /* spans need SCALED */
  cr_assert_eq(plait_plugin_check_table(&copy, "x.so"), PLAIT_ERR_PLUGIN);
  cr_assert(strstr(plait_last_error(), "PLAIT_ALLREDUCE_SPANS"), "%s", plait_last_error());
  copy = *p.table;
  copy.auto_place = -1;
  cr_assert_eq(plait_plugin_check_table(&copy, "x.so"), PLAIT_ERR_PLUGIN);
  cr_assert(strstr(plait_last_error(), "auto_place -1"), "%s", plait_last_error());
  plait_plugin_unload(&p);
  plait_plugin_unload(&p); /* harmless twice */
}

/* A folder of its own with a file that is not a library, named like plugin
 * `name`; returns the folder (static buffer). */
static const char *junk_folder(const char *name, char *file, size_t cap) {
  static char dir[256];
  snprintf(dir, sizeof dir, "/tmp/plait-loader-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(file, cap, "%s/libplait-transport-%s.so", dir, name);
  FILE *f = fopen(file, "w");
  cr_assert_not_null(f);
  fputs("not a shared library\n", f);
  fclose(f);
  return dir;
}

/* Runs plait_init with stderr sent to a file; returns what was logged. */
static char *init_logged(plait_result_t *rc) {
  char log[] = "/tmp/plait-loader-log-XXXXXX";
  int fd = mkstemp(log);
  cr_assert_geq(fd, 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  *rc = plait_init();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  off_t n = lseek(fd, 0, SEEK_END);
  char *text = calloc((size_t)n + 1, 1);
  cr_assert_not_null(text);
  cr_assert_eq(pread(fd, text, (size_t)n, 0), n);
  close(fd);
  unlink(log);
  return text;
}

/* A file in PLAIT_PLUGIN_PATH that cannot be loaded is not skipped in
 * silence: an info line names it and says why (issue 16). */
Test(loader, unloadable_file_in_the_path_is_named_when_skipped) {
  char file[512], path[1024];
  const char *dir = junk_folder("fixture", file, sizeof file);
  snprintf(path, sizeof path, "%s:%s", dir, PLAIT_TEST_PLUGIN_DIR);
  setenv("PLAIT_PLUGIN_PATH", path, 1);
  setenv("PLAIT_TRANSPORT", "fixture", 1);
  setenv("PLAIT_LOG_LEVEL", "info", 1);
  plait_result_t rc;
  char *log = init_logged(&rc);
  unsetenv("PLAIT_LOG_LEVEL");
  if (rc == PLAIT_SUCCESS) plait_shutdown();
  unlink(file);
  rmdir(dir);
  cr_assert_eq(rc, PLAIT_SUCCESS, "the plugin further down the path loads: %s",
               plait_last_error());
  char *line = strstr(log, file);
  cr_expect(line && strstr(line, "skipped"), "no log line names %s as skipped:\n%s", file, log);
  free(log);
}

/* When no plugin loads, the error says which files were there but skipped,
 * and why. */
Test(loader, error_names_files_skipped_and_why) {
  char file[512];
  const char *dir = junk_folder("junkonly", file, sizeof file);
  setenv("PLAIT_PLUGIN_PATH", dir, 1);
  const char *n[] = {"'junkonly'", file, "skipped, it cannot be loaded", NULL};
  expect_init_fails("junkonly", PLAIT_ERR_PLUGIN, n);
  unlink(file);
  rmdir(dir);
}

/* A plugin without the appended subset entry (the fixture is built against
 * the first table layout) runs the global process set only: adding another
 * is refused naming the transport, at init and while running. */
Test(loader, plugin_without_subset_refuses_process_sets) {
  setenv("PLAIT_TRANSPORT", "fixture", 1);
  setenv("PLAIT_DYNAMIC_PROCESS_SETS", "1", 1);
  cr_assert_eq(plait_init(), PLAIT_SUCCESS, "%s", plait_last_error());
  int ranks[1] = {0};
  int32_t id = -1;
  cr_assert_eq(plait_process_set_add(ranks, 1, &id), PLAIT_ERR_UNSUPPORTED);
  cr_assert(strstr(plait_last_error(), "transport 'fixture' has no sub-communicators"), "%s",
            plait_last_error());
  cr_assert_eq(id, -1, "no id may be written on error");
  cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS);
  unsetenv("PLAIT_DYNAMIC_PROCESS_SETS");
  setenv("PLAIT_PROCESS_SETS", "0", 1);
  const char *n[] = {"PLAIT_PROCESS_SETS", "'fixture'", "sub-communicators", NULL};
  expect_init_fails("fixture", PLAIT_ERR_UNSUPPORTED, n);
  unsetenv("PLAIT_PROCESS_SETS");
}
