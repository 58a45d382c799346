/*
 * PLAIT_TRANSPORT unset (auto) ends in the same transport setup as the
 * explicit choice it makes: on one host, PLAIT_TRANSPORT=ofi with
 * FI_PROVIDER=shm. Issue 37's goal 4 found auto slower than that explicit
 * choice in one run; this pins what was checked then (docs/performance.md,
 * "Oversubscription and the plugin alone"): every line the ofi plugin logs
 * while it starts (provider, fabric, domain, memory registration, inject
 * size, pieces per message, data progress, direct reads, the progress loop's
 * ranks per CPU and yield window) and every default the core takes from the
 * transport (PLAIT_FUSION_MAX_TENSOR) read the same, on every rank, at 2 ranks
 * and at 3 (oversubscribed on a 2-CPU host), but for the endpoint's address,
 * the start-up time and the removal of regions dead processes left. A setting auto chose differently (a provider, a
 * yield window, a tunable) would show as a line that differs.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plait/plait.h"
#include "ranks.h"

#define MAXR 3
#define SETUP_MAX 4096

typedef struct {
  int explicit_shm; /* 1: PLAIT_TRANSPORT=ofi FI_PROVIDER=shm; 0: both unset (auto) */
  char dir[64];     /* the ranks' logs */
} setup_job_t;

static int rank_main(int rank, int nranks, void *arg) {
  const setup_job_t *j = arg;
  unsetenv("PLAIT_TRANSPORT");
  unsetenv("FI_PROVIDER");
  unsetenv("PLAIT_OFI_YIELD_US");
  if (j->explicit_shm) {
    setenv("PLAIT_TRANSPORT", "ofi", 1);
    setenv("FI_PROVIDER", "shm", 1);
  }
  setenv("PLAIT_LOG_LEVEL", "debug", 1);
  setenv("PLAIT_TIMEOUT_S", "20", 1);
  int saved = plait_test_stderr_to(j->dir, rank);
  if (saved < 0) return 1;
  plait_result_t rc = plait_init();
  float x = (float)(rank + 1);
  plait_tensor_t t = {sizeof t, &x, PLAIT_FLOAT32, PLAIT_DEVICE_HOST, 1, {1}};
  plait_handle_t *h = NULL;
  if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async("setup.x", &t, &t, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 60);
  if (h) plait_release(h);
  char err[1024];
  snprintf(err, sizeof err, "%s", plait_last_error());
  plait_shutdown();
  plait_test_stderr_back(saved);
  if (rc || x != (float)(nranks * (nranks + 1) / 2)) {
    plait_test_say(rank, "%s: %s (%s), sum %g", j->explicit_shm ? "ofi/shm" : "auto",
                   plait_result_name(rc), err, (double)x);
    return 1;
  }
  return 0;
}

/* In place: each run of digits and dots right after `after` becomes one '#'. */
static void mask_after(char *line, const char *after) {
  for (char *p = strstr(line, after); p; p = strstr(p, after)) {
    p += strlen(after);
    char *e = p;
    while ((*e >= '0' && *e <= '9') || *e == '.') e++;
    if (e == p) continue;
    *p = '#';
    memmove(p + 1, e, strlen(e) + 1);
  }
}

/* A rank's setup as the log tells it: the ofi plugin's lines up to "started
 * in", then the core's config lines, each without its time stamp, address
 * and start-up time. */
static void read_setup(const char *dir, int rank, char *out, size_t cap) {
  char path[128], line[2048];
  snprintf(path, sizeof path, "%s/rank%d.log", dir, rank);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "no log %s", path);
  out[0] = '\0';
  int started = 0;
  while (fgets(line, sizeof line, f)) {
    const char *sub = strstr(line, " ofi] ") ? " ofi] " : strstr(line, " config] ") ? " config] "
                                                                                     : NULL;
    if (!sub || (started && !strcmp(sub, " ofi] "))) continue;
    /* what the machine held, not what was chosen: a region a dead process
     * of another test left, removed by whichever job came first
     * (shm_stale.h), differed between the two jobs under a loaded ctest */
    if (strstr(line, "left by a dead process")) continue;
    char *msg = strstr(line, sub) + 1; /* "ofi] ..." */
    mask_after(msg, "fi_shm://");
    mask_after(msg, "started in ");
    if (strstr(msg, "started in ")) started = 1;
    size_t used = strlen(out);
    cr_assert_lt(used + strlen(msg), cap - 1, "rank %d's setup lines exceed %zu bytes", rank, cap);
    memcpy(out + used, msg, strlen(msg) + 1);
  }
  fclose(f);
}

static void run_job(setup_job_t *j, int nranks, char setup[][SETUP_MAX]) {
  snprintf(j->dir, sizeof j->dir, "/tmp/plait-auto-setup-XXXXXX");
  cr_assert_not_null(mkdtemp(j->dir));
  plait_test_clear_env();
  plait_test_set_plugin_path();
  plait_test_job_t job = {.nranks = nranks, .timeout_s = 90};
  int rc = plait_test_run_ranks(&job, rank_main, j);
  for (int r = 0; r < nranks && rc == 0; r++) read_setup(j->dir, r, setup[r], SETUP_MAX);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", j->dir);
  if (system(cmd)) cr_log_warn("could not remove %s", j->dir);
  cr_assert_eq(rc, 0, "a %s rank failed (above)", j->explicit_shm ? "ofi/shm" : "auto");
}

static void same_setup(int nranks) {
  if (access(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", R_OK) != 0)
    cr_skip_test("the ofi transport plugin was not built (is libfabric-dev installed?): no "
                 PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so");
  static char autos[MAXR][SETUP_MAX], explicit[MAXR][SETUP_MAX];
  setup_job_t a = {.explicit_shm = 0}, e = {.explicit_shm = 1};
  run_job(&a, nranks, autos);
  run_job(&e, nranks, explicit);
  for (int r = 0; r < nranks; r++) {
    cr_expect(strstr(explicit[r], "provider shm, fabric shm") != NULL,
              "rank %d: explicit ofi/shm logged no shm setup:\n%s", r, explicit[r]);
    cr_expect(strstr(explicit[r], "a wait yields for") != NULL,
              "rank %d: no progress-loop line:\n%s", r, explicit[r]);
    cr_expect_str_eq(autos[r], explicit[r],
                     "rank %d of %d: auto's setup differs from PLAIT_TRANSPORT=ofi "
                     "FI_PROVIDER=shm's:\n--- auto\n%s--- ofi/shm\n%s", r, nranks, autos[r],
                     explicit[r]);
  }
}

Test(auto_setup, two_ranks_same_as_explicit_ofi_shm, .timeout = 200) { same_setup(2); }

Test(auto_setup, three_ranks_same_as_explicit_ofi_shm, .timeout = 200) { same_setup(3); }
