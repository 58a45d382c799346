/*
 * The hierarchical allgather (src/engine/execute/execute_hier_allgather.c) on
 * forked ranks whose hosts are faked with PLAIT_HOSTNAME: every rank checks
 * every element of each output against what each rank contributed (blocks
 * of different sizes, one rank contributing none, rows of 3 elements), with
 * PLAIT_HIERARCHICAL_ALLGATHER off, on and auto. Layouts: 2 hosts x 2 ranks
 * interleaved (auto runs it: the flat ring crosses hosts on every hop),
 * contiguous (auto does not), 3 hosts x 2 ranks interleaved, 2 hosts of
 * unequal counts (never). Each rank logs at debug level to a file, where
 * the test looks for the hierarchical allgather having run (or not). Fails
 * without the mechanism: the "on" job must log it.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops_util.h"

static char dir[256];
static const char *mode_now;
static int layout_now; /* 0: 2 x 2 contiguous, 1: 2 x 2 interleaved, 2: 3 x 2 interleaved, 3: 3 + 1 */

static const char *host_of(int rank) {
  static const char *names[] = {"hostA", "hostB", "hostC"};
  switch (layout_now) {
  case 0: return names[rank / 2];
  case 1: return names[rank % 2];
  case 2: return names[rank % 3];
  default: return names[rank < 3 ? 0 : 1];
  }
}

static int before(int rank) {
  setenv("PLAIT_HOSTNAME", host_of(rank), 1);
  unsetenv("PLAIT_LOCAL_RANK");
  unsetenv("PLAIT_LOCAL_SIZE");
  char log[320];
  snprintf(log, sizeof log, "%s/%s.rank%d.log", dir, mode_now, rank);
  return freopen(log, "w", stderr) ? 0 : 1;
}

/* rows rank r contributes to case k: case 0 over 1 MiB in all (auto's
 * threshold), rank 1 none; case 1 a few rows each */
static int64_t rows_of(int k, int r) {
  if (k == 0) return r == 1 ? 0 : 40000 + 7919 * r;
  return 1 + r;
}

static int32_t value(int k, int r, int64_t row, int col) {
  return (int32_t)(k * 1000003 + r * 7919 + row * 3 + col);
}

static int body(int rank, int nranks, void *arg) {
  (void)arg;
  for (int k = 0; k < 2; k++) {
    int64_t rows = rows_of(k, rank);
    int32_t *in = malloc((size_t)(rows ? rows : 1) * 3 * sizeof *in);
    CHECK(in, "out of memory");
    for (int64_t i = 0; i < rows; i++)
      for (int c = 0; c < 3; c++) in[i * 3 + c] = value(k, rank, i, c);
    plait_tensor_t t = {sizeof t, in, PLAIT_INT32, PLAIT_DEVICE_HOST, 2, {rows, 3}};
    char name[32];
    snprintf(name, sizeof name, "gather%d", k);
    plait_handle_t *h = NULL;
    CHECK(plait_allgather_async(name, &t, NULL, &h) == PLAIT_SUCCESS, "%s", plait_last_error());
    CHECK(plait_wait(h, 60) == PLAIT_SUCCESS, "%s: %s", name, plait_last_error());
    plait_tensor_t out;
    CHECK(plait_handle_output(h, &out) == PLAIT_SUCCESS, "%s", plait_last_error());
    int64_t want = 0;
    for (int r = 0; r < nranks; r++) want += rows_of(k, r);
    CHECK(out.ndim == 2 && out.shape[0] == want && out.shape[1] == 3, "%s: shape %lld", name,
          (long long)out.shape[0]);
    const int32_t *o = out.data;
    for (int r = 0, at = 0; r < nranks; r++)
      for (int64_t i = 0; i < rows_of(k, r); i++, at++)
        for (int c = 0; c < 3; c++)
          CHECK(o[at * 3 + c] == value(k, r, i, c), "%s: rank %d's row %lld col %d is %d", name,
                r, (long long)i, c, o[at * 3 + c]);
    plait_release(h);
    free(in);
  }
  return 0;
}

static int logged(const char *mode, int rank) {
  char path[320], line[512];
  snprintf(path, sizeof path, "%s/%s.rank%d.log", dir, mode, rank);
  FILE *f = fopen(path, "r");
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f))
    found = strstr(line, "hierarchical allgather of") != NULL;
  if (f) fclose(f);
  return found;
}

/* fits: "on" runs it; gains: "auto" does too (for the large case) */
static void check_layout(int layout, int nranks, int fits, int gains) {
  OPS_REQUIRE_GLOO();
  layout_now = layout;
  snprintf(dir, sizeof dir, "/tmp/plait-hierag-XXXXXX");
  cr_assert(mkdtemp(dir), "mkdtemp");
  const char *modes[] = {"off", "on", "auto"};
  for (int m = 0; m < 3; m++) {
    char setting[64];
    snprintf(setting, sizeof setting, "PLAIT_HIERARCHICAL_ALLGATHER=%s", modes[m]);
    const char *env[] = {"PLAIT_LOG_LEVEL=debug", NULL};
    mode_now = modes[m];
    cr_assert_eq(ops_run_hooked(nranks, setting, env, 120, body, NULL, before, NULL), 0,
                 "the %s job failed (logs in %s)", modes[m], dir);
  }
  for (int r = 0; r < nranks; r++) {
    cr_expect(!logged("off", r), "rank %d ran a hierarchical allgather while off", r);
    cr_expect_eq(logged("on", r), fits, "rank %d: hierarchical allgather %s while on", r,
                 fits ? "never ran" : "ran");
    cr_expect_eq(logged("auto", r), gains, "rank %d: hierarchical allgather %s under auto", r,
                 gains ? "never ran" : "ran");
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (!getenv("HIER_KEEP")) (void)!system(cmd);
}

Test(hier_allgather, two_hosts_of_two_interleaved_ranks, .timeout = 240) {
  check_layout(1, 4, 1, 1);
}
Test(hier_allgather, two_hosts_of_two_contiguous_ranks, .timeout = 240) {
  check_layout(0, 4, 1, 0);
}
Test(hier_allgather, three_hosts_of_two_interleaved_ranks, .timeout = 300) {
  check_layout(2, 6, 1, 1);
}
Test(hier_allgather, hosts_of_unequal_counts_run_flat, .timeout = 240) {
  check_layout(3, 4, 0, 0);
}
