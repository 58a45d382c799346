/*
 * PLAIT_TRANSPORT=auto (the default), on forked ranks through the public C
 * ABI: ofi where every rank can start it with the same provider (shm on one
 * host, tcp across hosts), gloo otherwise; the same transport on every rank;
 * the choice logged once at info level; and the fallbacks: the ofi plugin
 * missing (everywhere, or on one rank), a provider missing or excluded, ranks
 * on several hosts (simulated with PLAIT_HOSTNAME), ranks that would pick
 * different providers, a rank that cannot start the chosen transport (every
 * rank fails naming it, never a hang), and an explicit PLAIT_TRANSPORT=ofi
 * with no ofi plugin (an error, never a silent fallback).
 *
 * "The plugin missing" is a folder of the test's own, holding links to the
 * plugins a rank may find, as its PLAIT_PLUGIN_PATH: the test executables
 * carry the engine, so no plugin lies beside them.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plait/plait.h"
#include "ranks.h"

#define MAXR 4

typedef struct {
  int nranks;
  const char *transport;       /* PLAIT_TRANSPORT; NULL: unset, the default */
  const char *path[MAXR];      /* PLAIT_PLUGIN_PATH per rank; NULL: the build's */
  const char *host[MAXR];      /* PLAIT_HOSTNAME per rank; NULL: unset */
  const char *provider[MAXR];  /* FI_PROVIDER per rank; NULL: unset */
  const char *extra[MAXR][2];  /* up to two more "NAME=value" per rank */
  const char *want;            /* the transport every rank gets; NULL: init fails */
  const char *err[MAXR];       /* what init's error says on each rank, when it fails */
  char dir[256];               /* logs and plugin folders */
} spec_t;

static int ofi_built(void) { return access(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", R_OK) == 0; }

static void require_ofi(void) {
  if (!ofi_built())
    cr_skip_test("the ofi transport plugin was not built (is libfabric-dev installed?): no "
                 PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so");
}

static void make_dir(spec_t *s) {
  snprintf(s->dir, sizeof s->dir, "/tmp/plait-auto-XXXXXX");
  cr_assert_not_null(mkdtemp(s->dir));
}

/* A plugin folder under s->dir named `name` with links: "gloo" to the real
 * gloo plugin; "ofi" to the real ofi; "fake" to fakeofi as ofi. */
static const char *plugin_dir(spec_t *s, const char *name, int gloo, const char *ofi) {
  static char paths[8][320];
  static int used;
  char *d = paths[used++ % 8];
  snprintf(d, 320, "%s/%s", s->dir, name);
  cr_assert_eq(mkdir(d, 0700), 0, "mkdir %s", d);
  char link[400];
  if (gloo) {
    snprintf(link, sizeof link, "%s/libplait-transport-gloo.so", d);
    cr_assert_eq(symlink(PLAIT_TEST_LIB_DIR "/libplait-transport-gloo.so", link), 0);
  }
  if (ofi) {
    snprintf(link, sizeof link, "%s/libplait-transport-ofi.so", d);
    const char *target = !strcmp(ofi, "fake") ? PLAIT_TEST_PLUGIN_DIR "/libplait-transport-fakeofi.so"
                                               : PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so";
    cr_assert_eq(symlink(target, link), 0);
  }
  return d;
}

static int allreduce_one(int rank, int nranks) {
  float x = (float)(rank + 1);
  plait_tensor_t t = {sizeof t, &x, PLAIT_FLOAT32, PLAIT_DEVICE_HOST, 1, {1}};
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_allreduce_async("auto.x", &t, &t, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 60);
  if (h) plait_release(h);
  float want = (float)(nranks * (nranks + 1) / 2);
  if (rc || x != want) {
    plait_test_say(rank, "allreduce: %s (%s), got %g, want %g", plait_result_name(rc),
                   plait_last_error(), (double)x, (double)want);
    return 1;
  }
  return 0;
}

static int rank_main(int rank, int nranks, void *arg) {
  const spec_t *s = arg;
  if (s->transport)
    setenv("PLAIT_TRANSPORT", s->transport, 1);
  else
    unsetenv("PLAIT_TRANSPORT");
  unsetenv("FI_PROVIDER");
  unsetenv("FAKEOFI_FAIL");
  unsetenv("FAKEOFI_LATE");
  if (s->path[rank]) setenv("PLAIT_PLUGIN_PATH", s->path[rank], 1);
  if (s->host[rank]) { /* the layout from the hosts, not from the launcher */
    setenv("PLAIT_HOSTNAME", s->host[rank], 1);
    unsetenv("PLAIT_LOCAL_RANK");
    unsetenv("PLAIT_LOCAL_SIZE");
  }
  if (s->provider[rank]) setenv("FI_PROVIDER", s->provider[rank], 1);
  for (int i = 0; i < 2; i++)
    if (s->extra[rank][i]) putenv(strdup(s->extra[rank][i]));
  setenv("PLAIT_LOG_LEVEL", "info", 1);
  setenv("PLAIT_TIMEOUT_S", "10", 1);
  int saved = plait_test_stderr_to(s->dir, rank);
  if (saved < 0) return 1;
  plait_result_t rc = plait_init();
  char err[2048];
  snprintf(err, sizeof err, "%s", plait_last_error());
  const char *name = "";
  if (rc == PLAIT_SUCCESS) plait_transport_name(&name);
  int fails = rc == PLAIT_SUCCESS && s->want ? allreduce_one(rank, nranks) : 0;
  if (rc == PLAIT_SUCCESS) plait_shutdown();
  plait_test_stderr_back(saved);
  if (s->want && (rc || strcmp(name, s->want))) {
    plait_test_say(rank, "wanted transport %s, got %s (%s: %s)", s->want, rc ? "none" : name,
                   plait_result_name(rc), rc ? err : "");
    return 1;
  }
  if (!s->want && (rc == PLAIT_SUCCESS || !strstr(err, s->err[rank]))) {
    plait_test_say(rank, "init should fail saying '%s', got %s: %s", s->err[rank],
                   plait_result_name(rc), err);
    return 1;
  }
  return fails;
}

/* Every rank's log, concatenated. */
static void read_logs(const spec_t *s, char *out, size_t cap) {
  size_t o = 0;
  out[0] = '\0';
  for (int r = 0; r < s->nranks; r++) {
    char log[320];
    snprintf(log, sizeof log, "%s/rank%d.log", s->dir, r);
    FILE *f = fopen(log, "r");
    if (!f) continue;
    o += fread(out + o, 1, cap - 1 - o, f);
    out[o] = '\0';
    fclose(f);
  }
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)); p++) n++;
  return n;
}

/* Runs the job; checks each rank, and that rank 0 logged `line` once and no
 * other rank logged a choice. */
static void run(spec_t *s, const char *line) {
  plait_test_clear_env();
  plait_test_set_plugin_path();
  plait_test_job_t job = {.nranks = s->nranks, .timeout_s = 90};
  int rc = plait_test_run_ranks(&job, rank_main, s);
  static char logs[1 << 16];
  read_logs(s, logs, sizeof logs);
  cr_assert_eq(rc, 0, "a rank failed (see above); the logs:\n%s", logs);
  if (line) {
    cr_expect_eq(count(logs, "transport auto: "), 1, "the choice is logged once:\n%s", logs);
    cr_expect(strstr(logs, line) != NULL, "no '%s' in the logs:\n%s", line, logs);
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (system(cmd)) cr_log_warn("could not remove %s", s->dir);
}

Test(auto, default_is_auto_and_picks_ofi_shm_on_one_host, .timeout = 120) {
  require_ofi();
  spec_t s = {.nranks = 3, .want = "ofi"};
  make_dir(&s);
  run(&s, "transport auto: ofi (shm; all 3 ranks on one host)");
}

Test(auto, explicit_auto, .timeout = 120) {
  require_ofi();
  spec_t s = {.nranks = 2, .transport = "auto", .want = "ofi"};
  make_dir(&s);
  run(&s, "transport auto: ofi (shm; all 2 ranks on one host)");
}

Test(auto, explicit_gloo_is_kept, .timeout = 120) {
  spec_t s = {.nranks = 2, .transport = "gloo", .want = "gloo"};
  make_dir(&s);
  run(&s, NULL);
}

Test(auto, ofi_plugin_missing_falls_back_to_gloo, .timeout = 120) {
  spec_t s = {.nranks = 2, .want = "gloo"};
  make_dir(&s);
  s.path[0] = s.path[1] = plugin_dir(&s, "gloo-only", 1, NULL);
  /* no rank found ofi, so it is no candidate: the core names none itself */
  run(&s, "transport auto: gloo (all 2 ranks on one host)\n");
}

Test(auto, ofi_plugin_missing_on_one_rank_gives_gloo_everywhere, .timeout = 120) {
  require_ofi();
  spec_t s = {.nranks = 3, .want = "gloo"};
  make_dir(&s);
  s.path[2] = plugin_dir(&s, "gloo-only", 1, NULL);
  run(&s, "ofi not used: rank 2: libplait-transport-ofi.so not found");
}

Test(auto, shm_excluded_gives_ofi_tcp, .timeout = 120) {
  require_ofi();
  spec_t s = {.nranks = 2, .want = "ofi", .provider = {"^shm", "^shm"}};
  make_dir(&s);
  run(&s, "transport auto: ofi (tcp;ofi_rxm; all 2 ranks on one host)");
}

Test(auto, no_provider_falls_back_to_gloo, .timeout = 120) {
  require_ofi();
  spec_t s = {.nranks = 2, .want = "gloo", .provider = {"nosuch", "nosuch"}};
  make_dir(&s);
  run(&s, "ofi not used: rank 0: no libfabric provider (FI_PROVIDER=nosuch)");
}

Test(auto, ranks_that_would_pick_different_providers_get_gloo, .timeout = 120) {
  require_ofi();
  spec_t s = {.nranks = 2, .want = "gloo", .provider = {"^shm", "shm"}};
  make_dir(&s);
  run(&s, "ofi not used: rank 0 would use tcp;ofi_rxm but rank 1 shm");
}

Test(auto, several_hosts_pick_ofi_tcp, .timeout = 120) {
  require_ofi();
  spec_t s = {.nranks = 3, .want = "ofi", .host = {"hosta", "hosta", "hostb"}};
  make_dir(&s);
  run(&s, "transport auto: ofi (tcp;ofi_rxm; 3 ranks on several hosts)");
}

Test(auto, several_hosts_with_only_shm_get_gloo, .timeout = 120) {
  require_ofi();
  spec_t s = {.nranks = 2, .want = "gloo", .host = {"hosta", "hostb"},
              .provider = {"shm", "shm"}};
  make_dir(&s);
  run(&s, "ofi not used: rank 0: the ranks are on several hosts");
}

/* The chosen transport fails to start on one rank: every rank fails naming
 * it and the transport, whether the others wait inside the plugin's own
 * bootstrap exchange (mid) or have started it (late). */
static void rank_fails(int bad, int late) {
  spec_t s = {.nranks = 3};
  make_dir(&s);
  const char *fake = plugin_dir(&s, "fake", 1, "fake");
  char who[64];
  snprintf(who, sizeof who, "rank %d failed: transport 'ofi' failed to start", bad);
  for (int r = 0; r < 3; r++) {
    s.path[r] = fake;
    s.err[r] = r == bad ? "fakeofi: rank" : strdup(who);
  }
  s.extra[bad][0] = "FAKEOFI_FAIL=1";
  s.extra[bad][1] = late ? "FAKEOFI_LATE=1" : NULL;
  run(&s, "transport auto: ofi (shm; all 3 ranks on one host)");
}

Test(auto, rank_fails_to_start_chosen_transport_mid, .timeout = 120) { rank_fails(1, 0); }
Test(auto, rank0_fails_to_start_chosen_transport_mid, .timeout = 120) { rank_fails(0, 0); }
Test(auto, rank_fails_to_start_chosen_transport_late, .timeout = 120) { rank_fails(2, 1); }

Test(auto, explicit_ofi_missing_is_an_error, .timeout = 120) {
  spec_t s = {.nranks = 2, .transport = "ofi"};
  make_dir(&s);
  s.path[0] = s.path[1] = plugin_dir(&s, "gloo-only", 1, NULL);
  s.err[0] = s.err[1] = "transport plugin 'ofi' (PLAIT_TRANSPORT) not found";
  run(&s, NULL);
}
