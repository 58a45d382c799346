/*
 * Horovod 0.28's environment variables (src/util/config_horovod.c): taken in
 * Horovod's units and parsing where PLAIT_* is unset, PLAIT_* wins, the rest
 * reported by name. Each test runs in its own process (Criterion forks), from
 * an environment without PLAIT_* or HOROVOD_* variables.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"
#include "util/config_horovod.h"
#include "util/log.h"
#include "plait/plait.h"
#include "plait/transport.h"
#include "ranks.h"

TestSuite(horovod_env, .init = plait_test_clear_env);

static plait_config_t load_ok(void) {
  plait_config_t cfg;
  plait_result_t rc = plait_config_load(&cfg);
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_config_load: %s: %s", plait_result_name(rc),
               plait_last_error());
  return cfg;
}

static char *notes(void) {
  size_t n = plait_config_horovod_notes(NULL, 0);
  char *buf = malloc(n + 1);
  cr_assert_not_null(buf);
  cr_assert_eq(plait_config_horovod_notes(buf, n + 1), n);
  cr_assert_eq(strlen(buf), n, "notes length");
  return buf;
}

Test(horovod_env, nothing_set_changes_nothing) {
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.fusion_threshold, 64ull << 20);
  cr_expect_eq(cfg.cycle_time_ms, 1.0);
  cr_expect_eq(cfg.rank, -1);
  plait_config_free(&cfg);
  char *n = notes();
  cr_expect_str_eq(n, "");
  free(n);
}

Test(horovod_env, tuning_knobs_in_horovod_units) {
  setenv("HOROVOD_FUSION_THRESHOLD", "33554432", 1); /* bytes */
  setenv("HOROVOD_CYCLE_TIME", "3.5", 1);            /* ms, fractional */
  setenv("HOROVOD_CACHE_CAPACITY", "0", 1);
  setenv("HOROVOD_STALL_CHECK_TIME_SECONDS", "120", 1);
  setenv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "240", 1);
  setenv("HOROVOD_GLOO_TIMEOUT_SECONDS", "45", 1);
  setenv("HOROVOD_LOG_LEVEL", "INFO", 1);
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.fusion_threshold, 33554432ull);
  cr_expect_eq(cfg.cycle_time_ms, 3.5);
  cr_expect_eq(cfg.cache_capacity, 0);
  cr_expect_eq(cfg.stall_warn_s, 120.0);
  cr_expect_eq(cfg.stall_abort_s, 240.0);
  cr_expect_eq(cfg.timeout_s, 45.0);
  cr_expect_eq(cfg.log_level, PLAIT_LOG_INFO);
  plait_config_free(&cfg);
  char *n = notes();
  cr_expect(strstr(n, "# HOROVOD_FUSION_THRESHOLD=33554432 taken as PLAIT_FUSION_THRESHOLD="
                      "33554432\n"), "%s", n);
  cr_expect(strstr(n, "# HOROVOD_CYCLE_TIME=3.5 taken as PLAIT_CYCLE_TIME_MS=3.5\n"), "%s", n);
  free(n);
  cr_expect_str_eq(plait_config_horovod_origin("PLAIT_CYCLE_TIME_MS"), "HOROVOD_CYCLE_TIME");
  cr_expect_null(plait_config_horovod_origin("PLAIT_TRANSPORT"));
}

Test(horovod_env, zero_threshold_and_zero_cycle_as_in_horovod) {
  setenv("HOROVOD_FUSION_THRESHOLD", "0", 1);
  setenv("HOROVOD_CYCLE_TIME", "0", 1); /* Horovod: no wait between cycles */
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.fusion_threshold, 0);
  cr_expect_eq(cfg.cycle_time_ms, 0.0);
  plait_config_free(&cfg);
}

Test(horovod_env, plait_variable_wins_and_the_note_says_so) {
  setenv("HOROVOD_FUSION_THRESHOLD", "0", 1);
  setenv("PLAIT_FUSION_THRESHOLD", "1M", 1);
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.fusion_threshold, 1ull << 20);
  plait_config_free(&cfg);
  char *n = notes();
  cr_expect(strstr(n, "# HOROVOD_FUSION_THRESHOLD=0 ignored: PLAIT_FUSION_THRESHOLD=1M is set "
                      "and wins\n"), "%s", n);
  free(n);
  cr_expect_null(plait_config_horovod_origin("PLAIT_FUSION_THRESHOLD"));
}

Test(horovod_env, horovod_parsing_quirks_kept_and_named) {
  /* Horovod's strtol reads "64M" as 64 bytes and "true" as 0: so does plait,
   * and says so. */
  setenv("HOROVOD_FUSION_THRESHOLD", "64M", 1);
  setenv("HOROVOD_STALL_CHECK_DISABLE", "true", 1);
  setenv("HOROVOD_LOG_LEVEL", "verbose", 1);
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.fusion_threshold, 64);
  cr_expect_eq(cfg.stall_warn_s, 60.0, "stall check still on: 'true' reads as 0");
  cr_expect_eq(cfg.log_level, PLAIT_LOG_WARN);
  plait_config_free(&cfg);
  char *n = notes();
  cr_expect(strstr(n, "HOROVOD_FUSION_THRESHOLD='64M' is not a plain number: Horovod reads it as "
                      "64, and so does plait"), "%s", n);
  cr_expect(strstr(n, "HOROVOD_STALL_CHECK_DISABLE='true' is not a plain number"), "%s", n);
  cr_expect(strstr(n, "HOROVOD_LOG_LEVEL='verbose' is not one of Horovod's levels"), "%s", n);
  free(n);
}

Test(horovod_env, stall_check_disable_turns_both_times_off) {
  setenv("HOROVOD_STALL_CHECK_DISABLE", "1", 1);
  setenv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "30", 1);
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.stall_warn_s, 0.0);
  cr_expect_eq(cfg.stall_abort_s, 0.0, "disable wins over the shutdown time, as in Horovod");
  plait_config_free(&cfg);
}

Test(horovod_env, bad_values_are_config_errors_naming_the_variable) {
  static const char *cases[][2] = {{"HOROVOD_FUSION_THRESHOLD", "-1"},
                                   {"HOROVOD_CYCLE_TIME", "-2"},
                                   {"HOROVOD_GLOO_TIMEOUT_SECONDS", "0"},
                                   {"HOROVOD_RANK", "one"},
                                   {"HOROVOD_SIZE", "2x"},
                                   {"HOROVOD_STALL_CHECK_TIME_SECONDS", "99999999999"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    plait_test_clear_env();
    setenv(cases[i][0], cases[i][1], 1);
    plait_config_t cfg;
    cr_expect_eq(plait_config_load(&cfg), PLAIT_ERR_CONFIG, "%s=%s", cases[i][0], cases[i][1]);
    char want[128];
    snprintf(want, sizeof want, "%s='%s' is not valid", cases[i][0], cases[i][1]);
    cr_expect(strstr(plait_last_error(), want), "%s", plait_last_error());
  }
}

Test(horovod_env, horovodrun_layout_and_rendezvous) {
  setenv("HOROVOD_RANK", "1", 1);
  setenv("HOROVOD_SIZE", "4", 1);
  setenv("HOROVOD_LOCAL_RANK", "1", 1);
  setenv("HOROVOD_LOCAL_SIZE", "2", 1);
  setenv("HOROVOD_CROSS_RANK", "0", 1); /* harmless: derived at rendezvous */
  setenv("HOROVOD_CROSS_SIZE", "2", 1);
  setenv("HOROVOD_HOSTNAME", "node7", 1);
  setenv("HOROVOD_GLOO_RENDEZVOUS_ADDR", "10.1.2.3", 1);
  setenv("HOROVOD_GLOO_RENDEZVOUS_PORT", "4000", 1);
  setenv("HOROVOD_CONTROLLER", "gloo", 1);
  setenv("HOROVOD_CPU_OPERATIONS", "gloo", 1);
  setenv("HOROVOD_GLOO_IFACE", "lo", 1);
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.rank, 1);
  cr_expect_eq(cfg.size, 4);
  cr_expect_eq(cfg.local_rank, 1);
  cr_expect_eq(cfg.local_size, 2);
  cr_expect_str_eq(cfg.hostname, "node7");
  cr_expect_str_eq(cfg.rendezvous, "10.1.2.3:4001", "horovodrun's store keeps its own port");
  plait_config_free(&cfg);
  char *n = notes();
  /* what horovodrun --gloo sets for its own wiring is not reported */
  cr_expect_null(strstr(n, "HOROVOD_CONTROLLER"), "%s", n);
  cr_expect_null(strstr(n, "HOROVOD_GLOO_IFACE"), "%s", n);
  cr_expect_null(strstr(n, "HOROVOD_CROSS_RANK"), "%s", n);
  free(n);
}

Test(horovod_env, rendezvous_without_port_is_an_error) {
  setenv("HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1", 1);
  plait_config_t cfg;
  cr_expect_eq(plait_config_load(&cfg), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "HOROVOD_GLOO_RENDEZVOUS_PORT='(unset)'"), "%s",
            plait_last_error());
}

/* HOROVOD_HIERARCHICAL_ALLREDUCE and _ALLGATHER force plait's hierarchical
 * allreduce and allgather on (> 0) or off, as in Horovod; the PLAIT_*
 * variable wins. */
Test(horovod_env, hierarchical_allreduce_and_allgather_are_taken) {
  const char *coll[] = {"ALLREDUCE", "ALLGATHER"};
  for (int i = 0; i < 2; i++) {
    char hvd[64], pl[64];
    snprintf(hvd, sizeof hvd, "HOROVOD_HIERARCHICAL_%s", coll[i]);
    snprintf(pl, sizeof pl, "PLAIT_HIERARCHICAL_%s", coll[i]);
    const char *want[] = {"1", "0", "auto"};
    for (int k = 0; k < 3; k++) {
      if (k < 2) setenv(hvd, want[k], 1);
      else setenv(pl, "auto", 1);
      plait_config_t cfg = load_ok();
      cr_expect_str_eq(i ? cfg.hierarchical_allgather : cfg.hierarchical_allreduce, want[k],
                       "%s", hvd);
      plait_config_free(&cfg);
    }
    unsetenv(pl);
    unsetenv(hvd);
  }
}

Test(horovod_env, no_equivalent_reported_by_name_not_an_error) {
  setenv("HOROVOD_ADASUM_MPI_CHUNK_SIZE", "1", 1);
  setenv("HOROVOD_TORUS_ALLREDUCE", "0", 1); /* off: harmless, not reported */
  setenv("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.8", 1);
  setenv("HOROVOD_CONTROLLER", "mpi", 1);
  setenv("HOROVOD_DISABLE_GROUP_FUSION", "1", 1);
  setenv("HOROVOD_NO_SUCH_KNOB", "x", 1);
  setenv("HOROVOD_WITH_PYTORCH", "1", 1); /* build time: harmless */
  setenv("HOROVOD_TIMELINE_MARK_CYCLES", "1", 1);
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.timeline_mark_cycles, 1, "HOROVOD_TIMELINE_MARK_CYCLES=1 marks cycles");
  plait_config_free(&cfg);
  char *n = notes();
  cr_expect(strstr(n, "# HOROVOD_ADASUM_MPI_CHUNK_SIZE=1 has no plait equivalent and is "
                      "ignored: plait has no Adasum reduction"), "%s", n);
  cr_expect_null(strstr(n, "HOROVOD_TORUS_ALLREDUCE"), "%s", n);
  cr_expect(strstr(n, "# HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE=0.8 has no plait equivalent "
                      "and is ignored: plait's autotuner searches a grid"), "%s", n);
  cr_expect(strstr(n, "# HOROVOD_CONTROLLER=mpi has no plait equivalent"), "%s", n);
  cr_expect(strstr(n, "# HOROVOD_DISABLE_GROUP_FUSION=1 has no plait equivalent"), "%s", n);
  cr_expect(strstr(n, "# HOROVOD_NO_SUCH_KNOB is not a Horovod 0.28 variable plait knows"), "%s",
            n);
  cr_expect_null(strstr(n, "HOROVOD_WITH_PYTORCH"), "%s", n);
  cr_expect(strstr(n, "# HOROVOD_TIMELINE_MARK_CYCLES=1 taken as PLAIT_TIMELINE_MARK_CYCLES=1"),
            "%s", n);
  free(n);
}

/* Horovod's autotune variables become plait's; Horovod reads HOROVOD_AUTOTUNE
 * with strtol > 0, so "true" is off there and here (with a warning note). */
Test(horovod_env, autotune_variables_map_to_plait) {
  setenv("HOROVOD_AUTOTUNE", "1", 1);
  setenv("HOROVOD_AUTOTUNE_LOG", "/tmp/hvd_autotune.csv", 1);
  setenv("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5", 1);
  setenv("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "20", 1);
  setenv("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "40", 1);
  plait_config_t cfg = load_ok();
  cr_expect_eq(cfg.autotune, 1);
  cr_expect_str_eq(cfg.autotune_log, "/tmp/hvd_autotune.csv");
  cr_expect_eq(cfg.autotune_warmup_samples, 5);
  cr_expect_eq(cfg.autotune_steps_per_sample, 20);
  cr_expect_eq(cfg.autotune_max_samples, 40);
  plait_config_free(&cfg);
  char *n = notes();
  cr_expect(strstr(n, "# HOROVOD_AUTOTUNE=1 taken as PLAIT_AUTOTUNE=1"), "%s", n);
  cr_expect(strstr(n, "# HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=40 taken as "
                      "PLAIT_AUTOTUNE_MAX_SAMPLES=40"), "%s", n);
  free(n);
  setenv("PLAIT_AUTOTUNE_STEPS_PER_SAMPLE", "3", 1); /* PLAIT_* wins */
  setenv("HOROVOD_AUTOTUNE", "true", 1);            /* Horovod's strtol reads 0: off */
  cfg = load_ok();
  cr_expect_eq(cfg.autotune_steps_per_sample, 3);
  cr_expect_eq(cfg.autotune, 0);
  plait_config_free(&cfg);
  setenv("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "-2", 1);
  unsetenv("PLAIT_AUTOTUNE_STEPS_PER_SAMPLE");
  cr_expect_eq(plait_config_load(&cfg), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE='-2'"), "%s",
            plait_last_error());
}

Test(horovod_env, timeline_rank0_only_unless_per_rank_path) {
  setenv("HOROVOD_TIMELINE", "/tmp/hvd_timeline.json", 1);
  plait_config_t cfg = load_ok();
  plait_config_horovod_settle(&cfg, 1);
  cr_expect_str_eq(cfg.timeline, "", "Horovod writes its timeline on rank 0 only");
  plait_config_free(&cfg);
  cfg = load_ok();
  plait_config_horovod_settle(&cfg, 0);
  cr_expect_str_eq(cfg.timeline, "/tmp/hvd_timeline.json");
  plait_config_free(&cfg);
  setenv("HOROVOD_TIMELINE", "DYNAMIC", 1);
  cfg = load_ok();
  cr_expect_str_eq(cfg.timeline, "", "DYNAMIC: no file until start_timeline");
  plait_config_free(&cfg);
}

Test(horovod_env, dump_says_where_values_came_from) {
  setenv("HOROVOD_CYCLE_TIME", "7", 1);
  size_t need = 0;
  cr_assert_eq(plait_config_dump(NULL, 0, &need), PLAIT_ERR_BUFFER_TOO_SMALL);
  char *buf = malloc(need);
  cr_assert_not_null(buf);
  cr_assert_eq(plait_config_dump(buf, need, NULL), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(strstr(buf, "PLAIT_CYCLE_TIME_MS=7\n"), "%s", buf);
  cr_expect(strstr(buf, "\n# HOROVOD_CYCLE_TIME=7 taken as PLAIT_CYCLE_TIME_MS=7\n"), "%s", buf);
  cr_expect_eq(strlen(buf) + 1, need);
  free(buf);
}

Test(horovod_env, settle_logs_once_at_init) {
  setenv("HOROVOD_FUSION_THRESHOLD", "0", 1);
  setenv("HOROVOD_ADASUM_MPI_CHUNK_SIZE", "1", 1);
  setenv("PLAIT_LOG_LEVEL", "info", 1);
  plait_test_set_plugin_path();
  cr_redirect_stderr();
  cr_assert_eq(plait_init(), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS);
  fflush(stderr);
  FILE *f = cr_get_redirected_stderr();
  char text[16384];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  const char *taken = "HOROVOD_FUSION_THRESHOLD=0 taken as PLAIT_FUSION_THRESHOLD=0";
  const char *first = strstr(text, taken);
  cr_expect(first, "%s", text);
  cr_expect(first && !strstr(first + 1, taken), "logged twice:\n%s", text);
  cr_expect(strstr(text, "HOROVOD_ADASUM_MPI_CHUNK_SIZE=1 has no plait equivalent"), "%s", text);
}

Test(horovod_env, rank_without_size_names_horovods_variables) {
  setenv("HOROVOD_RANK", "0", 1);
  plait_test_set_plugin_path();
  cr_assert_eq(plait_init(), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "HOROVOD_RANK and HOROVOD_SIZE must be set together "
                                       "(HOROVOD_SIZE is missing)"), "%s", plait_last_error());
}
