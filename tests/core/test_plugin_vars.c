/* Unknown variables of a plugin's prefix are reported, not silently ignored:
 * the core leaves PLAIT_GLOO_* and PLAIT_OFI_* to the gloo and ofi plugins,
 * which warn about the ones they do not read when they start; PLAIT_NCCL_*
 * (no plugin yet) is reported by the core. Jobs of one rank, with stderr
 * captured: the warnings are what a user sees. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plait/plait.h"
#include "ranks.h"

static void setup(void) {
  plait_test_clear_env();
  plait_test_set_plugin_path();
}
TestSuite(plugin_vars, .init = setup);

/* plait_init and plait_shutdown with stderr captured; returns what was
 * written (malloc'd). */
static char *init_output(void) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  cr_assert_not_null(tmp);
  int saved = dup(2);
  cr_assert(saved >= 0);
  cr_assert(dup2(fileno(tmp), 2) >= 0);
  plait_result_t rc = plait_init();
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", plait_last_error());
  if (rc == PLAIT_SUCCESS) plait_shutdown();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_init: %s", msg);
  long n = ftell(tmp);
  char *out = calloc(1, (size_t)n + 1);
  cr_assert_not_null(out);
  rewind(tmp);
  cr_assert_eq(fread(out, 1, (size_t)n, tmp), (size_t)n);
  fclose(tmp);
  return out;
}

/* The names listed after "unknown variable(s) ignored: " on the line of
 * subsystem `who` ("gloo", "ofi", "config"), up to " (". */
static void listed(const char *out, const char *who, char *names, size_t len) {
  char tag[96];
  snprintf(tag, sizeof tag, " %s] unknown variable(s) ignored: ", who);
  const char *p = strstr(out, tag);
  names[0] = '\0';
  if (!p) return;
  p += strlen(tag);
  size_t n = strcspn(p, "(\n");
  if (n && p[n - 1] == ' ') n--;
  snprintf(names, len, "%.*s", (int)(n < len ? n : len - 1), p);
}

Test(plugin_vars, gloo_reports_every_plait_gloo_variable) {
  setenv("PLAIT_TRANSPORT", "gloo", 1);
  setenv("PLAIT_GLOO_TIMEOUT", "5", 1);
  setenv("PLAIT_GLOO_DEVICE", "lo", 1);
  char *out = init_output();
  char names[256];
  listed(out, "gloo", names, sizeof names);
  cr_expect(strstr(names, "PLAIT_GLOO_TIMEOUT") && strstr(names, "PLAIT_GLOO_DEVICE"),
            "the gloo plugin did not name them: \"%s\"", out);
  listed(out, "config", names, sizeof names);
  cr_expect_str_eq(names, "", "the core should leave PLAIT_GLOO_* to the plugin: \"%s\"", out);
  free(out);
}

Test(plugin_vars, ofi_reports_its_typos_only) {
  if (access(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", F_OK) != 0)
    cr_skip_test("the ofi plugin is not built here (" PLAIT_TEST_LIB_DIR
                 "/libplait-transport-ofi.so is missing: no libfabric at configure time)");
  setenv("PLAIT_TRANSPORT", "ofi", 1);
  static const char *const documented[][2] = {
      {"PLAIT_OFI_CHUNK", "1M"}, {"PLAIT_OFI_WINDOW", "4"}, {"PLAIT_OFI_MR", "auto"},
      {"PLAIT_OFI_ALLREDUCE_RING_MIN", "1M"}, {"PLAIT_OFI_ALLGATHERV_RING_MIN", "256K"},
      {"PLAIT_OFI_BROADCAST_CHAIN_MIN", "1M"}, {"PLAIT_OFI_REDUCESCATTER_RING_MIN", "64K"}};
  for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++)
    setenv(documented[i][0], documented[i][1], 1);
  setenv("PLAIT_OFI_CHUNCK", "1M", 1);
  char *out = init_output();
  char names[256];
  listed(out, "ofi", names, sizeof names);
  cr_expect_str_eq(names, "PLAIT_OFI_CHUNCK", "stderr: \"%s\"", out);
  free(out);
}

Test(plugin_vars, ofi_is_quiet_without_typos) {
  if (access(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", F_OK) != 0)
    cr_skip_test("the ofi plugin is not built here (" PLAIT_TEST_LIB_DIR
                 "/libplait-transport-ofi.so is missing: no libfabric at configure time)");
  setenv("PLAIT_TRANSPORT", "ofi", 1);
  setenv("PLAIT_OFI_WINDOW", "8", 1);
  char *out = init_output();
  cr_expect_null(strstr(out, "unknown variable"), "stderr: \"%s\"", out);
  free(out);
}

Test(plugin_vars, nccl_prefix_has_no_plugin_so_the_core_reports_it) {
  setenv("PLAIT_TRANSPORT", "gloo", 1);
  setenv("PLAIT_NCCL_SOCKET_IFNAME", "eth0", 1);
  char *out = init_output();
  char names[256];
  listed(out, "config", names, sizeof names);
  cr_expect_str_eq(names, "PLAIT_NCCL_SOCKET_IFNAME", "stderr: \"%s\"", out);
  free(out);
}
