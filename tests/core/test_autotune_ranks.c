/*
 * Autotuning across ranks (src/engine/tune/list_settings.c): rank 0 decides and
 * its settings travel with the response lists, so every rank runs every list
 * with the same settings (plait_stats.settings_digest, a digest of the
 * settings of every list run, is equal on every rank); turning it off returns
 * every rank to its own settings; the per-transport defaults apply where the
 * user set nothing. In-process ranks (tests/harness/engines.h). Nothing here
 * depends on timing: the tuner's choices may differ from run to run, the
 * agreement may not.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "autotune_csv.h"
#include "engine/tune/list_settings.h"

#include "engines.h"
#include "plait/plait.h"

static int plugin_built(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/libplait-transport-%s.so", PLAIT_TEST_LIB_DIR, name);
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

#define REQUIRE_PLUGIN(name)                                                   \
  do {                                                                         \
    if (!plugin_built(name))                                                   \
      cr_skip_test("the %s transport plugin was not built here: no %s/libplait-transport-%s.so", \
                   name, PLAIT_TEST_LIB_DIR, name);                            \
  } while (0)

#define RANK_OK(call)                                                          \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS) {                                                \
      plait_test_say(rank, "%s:%d: %s -> %s: %s", __FILE__, __LINE__, #call,   \
                     plait_result_name(rc_), plait_last_error());              \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define RANK_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      plait_test_say(rank, "%s:%d: %s: ", __FILE__, __LINE__, #cond);          \
      plait_test_say(rank, __VA_ARGS__);                                       \
      return 1;                                                                \
    }                                                                          \
  } while (0)

typedef struct {
  int steps, off_after; /* off_after >= 0: rank 0 turns autotune off after that step */
  int waves;            /* groups of gradients a step submits one after the other */
  int unique;           /* a new name for each gradient in every step */
  plait_stats_t mid[PLAIT_TEST_MAX_RANKS], end[PLAIT_TEST_MAX_RANKS];
} job_t;

/* One training step: 8 gradients of different sizes, checked; submitted in
 * `waves` groups, each waited for before the next (so a step is at least
 * that many response lists). */
static int step(int rank, int n, int s, int waves, int unique) {
  enum { T = 8 };
  static const int len[T] = {64, 256, 1024, 4096, 16384, 512, 2048, 128};
  static _Thread_local float x[T][16384];
  plait_handle_t *h[T];
  if (waves < 1) waves = 1;
  for (int w = 0; w < waves; w++) {
    int lo = w * T / waves, hi = (w + 1) * T / waves;
    for (int k = lo; k < hi; k++) {
      char name[32];
      if (unique) /* a new name every step, as unnamed ops get in some scripts */
        snprintf(name, sizeof name, "grad.%d.step%d", k, s);
      else
        snprintf(name, sizeof name, "grad.%d", k);
      for (int i = 0; i < len[k]; i++) x[k][i] = (float)(rank + (i % 7) + k + s % 3);
      plait_tensor_t t;
      RANK_OK(plait_tensor_1d(&t, x[k], len[k], PLAIT_FLOAT32));
      RANK_OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[k]));
    }
    for (int k = lo; k < hi; k++) {
      RANK_OK(plait_wait(h[k], 60));
      plait_release(h[k]);
      for (int i = 0; i < len[k]; i++) {
        float want = (float)(n * (n - 1) / 2 + n * ((i % 7) + k + s % 3));
        RANK_CHECK(x[k][i] == want, "step %d grad.%d[%d] = %g, expected %g", s, k, i, x[k][i],
                   want);
      }
    }
  }
  return 0;
}

static int barrier(int rank) {
  plait_handle_t *h;
  RANK_OK(plait_barrier_async(NULL, &h));
  RANK_OK(plait_wait(h, 60));
  plait_release(h);
  return 0;
}

static int body(int rank, int n, void *arg) {
  job_t *j = arg;
  for (int s = 0; s < j->steps; s++) {
    if (step(rank, n, s, j->waves, j->unique)) return 1;
    if (s == j->off_after) {
      if (barrier(rank)) return 1;
      j->mid[rank].struct_size = sizeof j->mid[rank];
      RANK_OK(plait_stats(&j->mid[rank]));
      if (barrier(rank)) return 1; /* every rank has read it before it changes */
      if (rank == 0) RANK_OK(plait_config_set("PLAIT_AUTOTUNE", "0"));
    }
  }
  if (barrier(rank)) return 1; /* the last list every rank runs */
  j->end[rank].struct_size = sizeof j->end[rank];
  RANK_OK(plait_stats(&j->end[rank]));
  return 0;
}

static void expect_agreement(const plait_stats_t *st, int n, const char *when) {
  for (int r = 1; r < n; r++) {
    cr_expect_eq(st[r].settings_digest, st[0].settings_digest,
                 "%s: rank %d ran its lists with other settings than rank 0 (digest %llx vs "
                 "%llx)", when, r, (unsigned long long)st[r].settings_digest,
                 (unsigned long long)st[0].settings_digest);
    cr_expect_eq(st[r].fusion_threshold_now, st[0].fusion_threshold_now, "%s: rank %d", when, r);
    cr_expect_eq(st[r].fusion_max_tensor_now, st[0].fusion_max_tensor_now, "%s: rank %d", when,
                 r);
    cr_expect_eq(st[r].cycle_time_ms_now, st[0].cycle_time_ms_now, "%s: rank %d", when, r);
    cr_expect_eq(st[r].autotune_state, st[0].autotune_state, "%s: rank %d", when, r);
  }
  cr_expect_neq(st[0].settings_digest, 0, "%s: no list ran", when);
}

static const char *const TUNE_FAST[] = {"PLAIT_AUTOTUNE=1", "PLAIT_AUTOTUNE_WARMUP_SAMPLES=0",
                                        "PLAIT_AUTOTUNE_STEPS_PER_SAMPLE=1",
                                        "PLAIT_AUTOTUNE_SAMPLE_MIN_S=0",
                                        "PLAIT_AUTOTUNE_MAX_SAMPLES=15", NULL};

static void tune_and_agree(int nranks) {
  static job_t j;
  memset(&j, 0, sizeof j);
  j.steps = 60;
  j.off_after = -1;
  plait_test_engines_t job = {.nranks = nranks, .settings = TUNE_FAST};
  cr_assert_eq(plait_test_run_engines(&job, body, &j), 0, "a rank failed (above)");
  expect_agreement(j.end, nranks, "after 60 steps");
  /* it explored and settled: 15 samples (5 settings) */
  cr_expect_geq(j.end[0].autotune_samples, 15, "rank 0 measured %llu samples",
                (unsigned long long)j.end[0].autotune_samples);
  cr_expect_eq(j.end[0].autotune_state, 2, "not settled: state %llu after %llu samples",
               (unsigned long long)j.end[0].autotune_state,
               (unsigned long long)j.end[0].autotune_samples);
  cr_log_info("%d ranks settled on threshold %llu, largest fused %llu, cycle %g ms", nranks,
              (unsigned long long)j.end[0].fusion_threshold_now,
              (unsigned long long)j.end[0].fusion_max_tensor_now, j.end[0].cycle_time_ms_now);
}

Test(autotune_ranks, every_rank_runs_every_list_with_rank0s_settings_2ranks, .timeout = 120) {
  REQUIRE_PLUGIN("gloo");
  tune_and_agree(2);
}

Test(autotune_ranks, every_rank_runs_every_list_with_rank0s_settings_3ranks, .timeout = 120) {
  REQUIRE_PLUGIN("gloo");
  tune_and_agree(3);
}

/* A sample is whole training steps, told apart by the tensor names coming
 * back (list_settings.c): every row of the CSV holds exactly the 8
 * gradients of each of its steps, though each step is 3 lists or more. */
Test(autotune_ranks, samples_are_whole_steps_found_from_the_names, .timeout = 120) {
  REQUIRE_PLUGIN("gloo");
  char path[] = "/tmp/plait_autotune_ranks_XXXXXX";
  cr_assert_eq(at_log_file(path), 0);
  char log[sizeof path + 32];
  snprintf(log, sizeof log, "PLAIT_AUTOTUNE_LOG=%s", path);
  const char *const settings[] = {"PLAIT_AUTOTUNE=1", "PLAIT_AUTOTUNE_WARMUP_SAMPLES=1",
                                  "PLAIT_AUTOTUNE_STEPS_PER_SAMPLE=2",
                                  "PLAIT_AUTOTUNE_SAMPLE_MIN_S=0", log, NULL};
  static job_t j;
  memset(&j, 0, sizeof j);
  j.steps = 40;
  j.off_after = -1;
  j.waves = 3;
  plait_test_engines_t job = {.nranks = 2, .settings = settings};
  cr_assert_eq(plait_test_run_engines(&job, body, &j), 0, "a rank failed (above)");
  expect_agreement(j.end, 2, "after 40 steps");
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char line[512];
  cr_assert_not_null(fgets(line, sizeof line, f));
  int rows = 0;
  unsigned long long lists_seen = 0, steps_seen = 0;
  while (fgets(line, sizeof line, f)) {
    at_row_t w;
    cr_assert_eq(at_row_parse(line, &w), 11, "row '%s'", line);
    rows++;
    cr_expect_eq(w.steps, 2, "'%s'", line);
    cr_expect_eq(w.tensors, 8 * w.steps, "not whole steps of 8 gradients: '%s'", line);
    cr_expect_eq(w.bytes, w.steps * 4 * (64 + 256 + 1024 + 4096 + 16384 + 512 + 2048 + 128),
                 "'%s'", line);
    lists_seen += w.lists, steps_seen += w.steps;
  }
  fclose(f);
  unlink(path);
  cr_expect_geq(rows, 8, "only %d samples in 40 steps", rows);
  cr_expect_geq(lists_seen, 3 * steps_seen, "steps of 3 waves ran in fewer lists");
  cr_log_info("%d samples, %llu lists for %llu steps", rows, lists_seen, steps_seen);
}

/* Names that never come back give no steps: past 8192 names (list_settings.h)
 * a sample counts response lists instead, and the tuner still tunes. */
Test(autotune_ranks, names_that_never_repeat_are_sampled_by_lists, .timeout = 120) {
  REQUIRE_PLUGIN("gloo");
  static job_t j;
  memset(&j, 0, sizeof j);
  j.steps = PLAIT_LS_SEEN_MAX / 8 + 40;
  j.off_after = -1;
  j.unique = 1;
  plait_test_engines_t job = {.nranks = 2, .settings = TUNE_FAST};
  cr_assert_eq(plait_test_run_engines(&job, body, &j), 0, "a rank failed (above)");
  expect_agreement(j.end, 2, "unique names");
  cr_expect_geq(j.end[0].autotune_samples, 10, "%llu samples in the last 40 steps",
                (unsigned long long)j.end[0].autotune_samples);
}

/* Off at start: the configured settings, no tuner. */
Test(autotune_ranks, off_means_the_configured_settings, .timeout = 120) {
  REQUIRE_PLUGIN("gloo");
  static job_t j;
  memset(&j, 0, sizeof j);
  j.steps = 10;
  j.off_after = -1;
  static const char *const off[] = {"PLAIT_AUTOTUNE=0", "PLAIT_FUSION_THRESHOLD=8M", NULL};
  plait_test_engines_t job = {.nranks = 2, .settings = off};
  cr_assert_eq(plait_test_run_engines(&job, body, &j), 0, "a rank failed (above)");
  expect_agreement(j.end, 2, "autotune off");
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(j.end[r].autotune_state, 0);
    cr_expect_eq(j.end[r].autotune_samples, 0);
    cr_expect_eq(j.end[r].fusion_threshold_now, 8u << 20);
    cr_expect_eq(j.end[r].fusion_max_tensor_now, 0);
    cr_expect_float_eq(j.end[r].cycle_time_ms_now, 1.0, 1e-12);
  }
}

/* Turned off while running (plait_config_set on rank 0): every rank goes
 * back to its own settings, together. */
Test(autotune_ranks, turned_off_while_running_every_rank_goes_back, .timeout = 120) {
  REQUIRE_PLUGIN("gloo");
  static job_t j;
  memset(&j, 0, sizeof j);
  j.steps = 40;
  j.off_after = 20;
  plait_test_engines_t job = {.nranks = 3, .settings = TUNE_FAST};
  cr_assert_eq(plait_test_run_engines(&job, body, &j), 0, "a rank failed (above)");
  expect_agreement(j.mid, 3, "before turning it off");
  for (int r = 0; r < 3; r++)
    cr_expect_neq(j.mid[r].autotune_state, 0, "rank %d was not tuned before", r);
  expect_agreement(j.end, 3, "after turning it off");
  for (int r = 0; r < 3; r++) {
    cr_expect_eq(j.end[r].autotune_state, 0, "rank %d: state %llu", r,
                 (unsigned long long)j.end[r].autotune_state);
    cr_expect_eq(j.end[r].fusion_threshold_now, 64u << 20, "rank %d", r);
    cr_expect_eq(j.end[r].fusion_max_tensor_now, 0, "rank %d", r);
    cr_expect_float_eq(j.end[r].cycle_time_ms_now, 1.0, 1e-12, "rank %d", r);
  }
}

/* A variable the user set stays fixed while the others are tuned. */
Test(autotune_ranks, variables_set_explicitly_stay, .timeout = 120) {
  REQUIRE_PLUGIN("gloo");
  static job_t j;
  memset(&j, 0, sizeof j);
  j.steps = 60;
  j.off_after = -1;
  static const char *const pinned[] = {"PLAIT_AUTOTUNE=1", "PLAIT_AUTOTUNE_WARMUP_SAMPLES=0",
                                       "PLAIT_AUTOTUNE_STEPS_PER_SAMPLE=1",
                                       "PLAIT_AUTOTUNE_SAMPLE_MIN_S=0",
                                       "PLAIT_AUTOTUNE_MAX_SAMPLES=15",
                                       "PLAIT_FUSION_THRESHOLD=8M", "PLAIT_CYCLE_TIME_MS=0.5",
                                       NULL};
  plait_test_engines_t job = {.nranks = 2, .settings = pinned};
  cr_assert_eq(plait_test_run_engines(&job, body, &j), 0, "a rank failed (above)");
  expect_agreement(j.end, 2, "pinned");
  cr_expect_eq(j.end[0].autotune_state, 2);
  cr_expect_eq(j.end[0].fusion_threshold_now, 8u << 20);
  cr_expect_float_eq(j.end[0].cycle_time_ms_now, 0.5, 1e-12);
}

/* The transport's defaults apply where the user set nothing: over ofi,
 * tensors above 1 MiB skip the fusion buffer; a value set stays. */
static void ofi_defaults(const char *const *settings, uint64_t want) {
  static job_t j;
  memset(&j, 0, sizeof j);
  j.steps = 2;
  j.off_after = -1;
  plait_test_engines_t job = {.nranks = 2, .transport = "ofi", .settings = settings};
  cr_assert_eq(plait_test_run_engines(&job, body, &j), 0, "a rank failed (above)");
  for (int r = 0; r < 2; r++)
    cr_expect_eq(j.end[r].fusion_max_tensor_now, want, "rank %d: %llu", r,
                 (unsigned long long)j.end[r].fusion_max_tensor_now);
}

Test(autotune_ranks, ofi_defaults_to_1M_largest_fused_tensor, .timeout = 120) {
  REQUIRE_PLUGIN("ofi");
  ofi_defaults(NULL, 1u << 20);
  static const char *const set[] = {"PLAIT_FUSION_MAX_TENSOR=0", NULL};
  ofi_defaults(set, 0);
}

Test(autotune_ranks, gloo_keeps_the_table_defaults, .timeout = 120) {
  REQUIRE_PLUGIN("gloo");
  static job_t j;
  memset(&j, 0, sizeof j);
  j.steps = 2;
  j.off_after = -1;
  plait_test_engines_t job = {.nranks = 2};
  cr_assert_eq(plait_test_run_engines(&job, body, &j), 0, "a rank failed (above)");
  cr_expect_eq(j.end[0].fusion_max_tensor_now, 0);
  cr_expect_eq(j.end[0].fusion_threshold_now, 64u << 20);
}

/* The whole engine converges on traffic whose best setting is known: the
 * costmodel test transport (tests/plugins/fixtures/costmodel.c) charges each
 * allreduce of B bytes 100 us + 1 ns/byte + a term in B^2 on a virtual
 * clock, which the tuner reads instead of the real one, so a step of 64
 * tensors of 64 KiB moves fastest in fused responses of 1 MiB: the threshold
 * must settle on 1M (from the default 64M, across the plateau of thresholds
 * that all fuse the whole step). The cycle time is pinned (the virtual clock
 * does not see it). */
static int costmodel_body(int rank, int n, void *arg) {
  (void)n;
  plait_stats_t *out = arg;
  enum { T = 64, N = 16384 };
  static float x[T][N];
  plait_stats_t st = {.struct_size = sizeof st};
  int steps = 0;
  for (; steps < 5000; steps++) {
    plait_handle_t *h[T];
    for (int k = 0; k < T; k++) {
      char name[32];
      snprintf(name, sizeof name, "w.%d", k);
      plait_tensor_t t;
      RANK_OK(plait_tensor_1d(&t, x[k], N, PLAIT_FLOAT32));
      RANK_OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[k]));
    }
    for (int k = 0; k < T; k++) {
      RANK_OK(plait_wait(h[k], 60));
      plait_release(h[k]);
    }
    RANK_OK(plait_stats(&st));
    if (st.autotune_state == 2) break;
  }
  *out = st;
  cr_log_info("settled after %d steps: threshold %llu, largest fused %llu", steps,
              (unsigned long long)st.fusion_threshold_now,
              (unsigned long long)st.fusion_max_tensor_now);
  return 0;
}

Test(autotune_ranks, converges_on_a_cost_model_with_a_known_best, .timeout = 300) {
  const char *path = PLAIT_TEST_PLUGIN_DIR "/libplait-transport-costmodel.so";
  void *so = dlopen(path, RTLD_NOW);
  cr_assert_not_null(so, "%s", dlerror());
  plait_ls_test_clock = (double (*)(void))dlsym(so, "costmodel_now");
  cr_assert_not_null(plait_ls_test_clock, "%s", dlerror());
  static plait_stats_t st;
  static const char *const tune[] = {"PLAIT_AUTOTUNE=1", "PLAIT_CYCLE_TIME_MS=1", NULL};
  plait_test_engines_t job = {.nranks = 1, .transport = "costmodel", .settings = tune};
  int rc = plait_test_run_engines(&job, costmodel_body, &st);
  plait_ls_test_clock = NULL;
  dlclose(so);
  cr_assert_eq(rc, 0, "the rank failed (above)");
  cr_expect_eq(st.autotune_state, 2, "not settled after 5000 steps");
  cr_expect_eq(st.fusion_threshold_now, 1u << 20, "settled on threshold %llu, not 1M",
               (unsigned long long)st.fusion_threshold_now);
  cr_expect(st.fusion_max_tensor_now == 0 || st.fusion_max_tensor_now >= 64u << 10,
            "largest fused tensor %llu keeps the 64 KiB tensors out of the buffer",
            (unsigned long long)st.fusion_max_tensor_now);
  cr_expect_float_eq(st.cycle_time_ms_now, 1.0, 1e-12, "the pinned cycle time moved");
}
