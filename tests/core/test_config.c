/*
 * Tests of the configuration table (src/util/config.c, src/util/config_table.h) and of
 * plait_config_dump / plait_config_help.
 *
 * Each Criterion test runs in its own forked process, so setenv()/unsetenv()
 * here never reach another test. Every test starts from an environment with no
 * PLAIT_* variable (whatever the shell that ran the tests had exported).
 *
 * The lists of variables are taken from PLAIT_CONFIG_TABLE itself (X-macros
 * below), so a variable added to the table is covered without editing this
 * file, and a new variable type fails to compile here until it gets a bad
 * value and an "accepts" phrase.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"
#include "util/config_table.h"
#include "util/error.h"
#include "plait/plait.h"
#include "plait/transport.h"
#include "ranks.h"


TestSuite(parse);
TestSuite(config, .init = plait_test_clear_env);
TestSuite(unknown, .init = plait_test_clear_env);
TestSuite(help, .init = plait_test_clear_env);
TestSuite(dump, .init = plait_test_clear_env);

/* ------------------------------------------------------------------------ */
/* plait_parse_size                                                          */
/* ------------------------------------------------------------------------ */

Test(parse, size_accepts_units) {
  static const struct {
    const char *text;
    uint64_t want;
  } cases[] = {
      {"0", 0},
      {"1", 1},
      {"65536", 65536},
      {"64K", 64ull << 10},
      {"64k", 64ull << 10},
      {"64KB", 64ull << 10},
      {"64KiB", 64ull << 10},
      {"64M", 64ull << 20},
      {"64m", 64ull << 20},
      {"64MB", 64ull << 20},
      {"64mb", 64ull << 20},
      {"64MiB", 64ull << 20},
      {"64mib", 64ull << 20},
      {"1G", 1ull << 30},
      {"1GiB", 1ull << 30},
      {"1T", 1ull << 40},
      {"0K", 0},
      {"007", 7},
      {"18446744073709551615", UINT64_MAX},
      {"16777215T", 16777215ull << 40},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t got = 12345;
    int rc = plait_parse_size(cases[i].text, &got);
    cr_expect_eq(rc, 0, "plait_parse_size(\"%s\") = %d, expected 0", cases[i].text, rc);
    cr_expect_eq(got, cases[i].want, "plait_parse_size(\"%s\") gave %llu, expected %llu",
                 cases[i].text, (unsigned long long)got, (unsigned long long)cases[i].want);
  }
}

Test(parse, size_rejects_bad_text) {
  static const char *bad[] = {
      "-1", "", " 64M", "64M ", "64 M", "64Q", "1.5M", "64MBB", "64MiBB", "64Mi", "64B",
      "M", "K64", "+64", "0x40", "1e6",
      "99999999999999999999", /* more than 64 bits */
      "18446744073709551616", /* UINT64_MAX + 1 */
      "20000000T",            /* fits as a number, overflows once scaled */
      "16777216T",            /* exactly 2^64 */
      "17179869184G",         /* exactly 2^64 */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t got = 777;
    int rc = plait_parse_size(bad[i], &got);
    cr_expect_eq(rc, -1, "plait_parse_size(\"%s\") = %d, expected -1", bad[i], rc);
    cr_expect_eq(got, 777, "plait_parse_size(\"%s\") wrote %llu on failure", bad[i],
                 (unsigned long long)got);
  }
}

/* ------------------------------------------------------------------------ */
/* plait_parse_bool and plait_parse_level                                    */
/* ------------------------------------------------------------------------ */

Test(parse, bool_accepts_every_spelling_in_any_case) {
  static const struct {
    const char *text;
    int want;
  } cases[] = {
      {"1", 1},     {"true", 1},  {"yes", 1},  {"on", 1},   {"TRUE", 1}, {"True", 1},
      {"YES", 1},   {"yEs", 1},   {"ON", 1},   {"oN", 1},   {"0", 0},    {"false", 0},
      {"no", 0},    {"off", 0},   {"FALSE", 0}, {"False", 0}, {"NO", 0},  {"No", 0},
      {"OFF", 0},   {"oFf", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = 42;
    int rc = plait_parse_bool(cases[i].text, &got);
    cr_expect_eq(rc, 0, "plait_parse_bool(\"%s\") = %d, expected 0", cases[i].text, rc);
    cr_expect_eq(got, cases[i].want, "plait_parse_bool(\"%s\") gave %d, expected %d",
                 cases[i].text, got, cases[i].want);
  }
}

Test(parse, bool_rejects_other_text) {
  static const char *bad[] = {"2", "", "maybe", "-1", "01", "10", " 1", "1 ", "tru",
                              "yess", "of", "y", "n", "t", "f", "enable"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int got = 42;
    int rc = plait_parse_bool(bad[i], &got);
    cr_expect_eq(rc, -1, "plait_parse_bool(\"%s\") = %d, expected -1", bad[i], rc);
    cr_expect_eq(got, 42, "plait_parse_bool(\"%s\") wrote %d on failure", bad[i], got);
  }
}

Test(parse, level_accepts_names_in_any_case) {
  static const struct {
    const char *text;
    int want;
  } cases[] = {
      {"trace", PLAIT_LOG_TRACE}, {"debug", PLAIT_LOG_DEBUG}, {"info", PLAIT_LOG_INFO},
      {"warn", PLAIT_LOG_WARN},   {"error", PLAIT_LOG_ERROR}, {"off", PLAIT_LOG_OFF},
      {"TRACE", PLAIT_LOG_TRACE}, {"Debug", PLAIT_LOG_DEBUG}, {"INFO", PLAIT_LOG_INFO},
      {"WaRn", PLAIT_LOG_WARN},   {"ERROR", PLAIT_LOG_ERROR}, {"OFF", PLAIT_LOG_OFF},
      {"warning", PLAIT_LOG_WARN}, {"WARNING", PLAIT_LOG_WARN},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = -7;
    int rc = plait_parse_level(cases[i].text, &got);
    cr_expect_eq(rc, 0, "plait_parse_level(\"%s\") = %d, expected 0", cases[i].text, rc);
    cr_expect_eq(got, cases[i].want, "plait_parse_level(\"%s\") gave %d, expected %d",
                 cases[i].text, got, cases[i].want);
  }
}

Test(parse, level_rejects_other_text) {
  static const char *bad[] = {"", "verbose", "3", "warn ", " info", "fatal", "all", "none",
                              "err", "debugx"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int got = -7;
    int rc = plait_parse_level(bad[i], &got);
    cr_expect_eq(rc, -1, "plait_parse_level(\"%s\") = %d, expected -1", bad[i], rc);
    cr_expect_eq(got, -7, "plait_parse_level(\"%s\") wrote %d on failure", bad[i], got);
  }
}

Test(parse, level_name_round_trips) {
  static const char *names[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (int l = PLAIT_LOG_TRACE; l <= PLAIT_LOG_OFF; l++) {
    cr_expect_str_eq(plait_level_name(l), names[l], "plait_level_name(%d)", l);
    int back = -1;
    cr_expect_eq(plait_parse_level(plait_level_name(l), &back), 0);
    cr_expect_eq(back, l, "level %d does not survive name -> parse", l);
  }
  cr_expect_str_eq(plait_level_name(-1), "?");
  cr_expect_str_eq(plait_level_name(PLAIT_LOG_OFF + 1), "?");
}

/* ------------------------------------------------------------------------ */
/* plait_config_load                                                         */
/* ------------------------------------------------------------------------ */

Test(config, defaults) {
  plait_config_t cfg;
  plait_result_t rc = plait_config_load(&cfg);
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_config_load: %s: %s", plait_result_name(rc),
               plait_last_error());
  cr_expect_str_eq(cfg.transport, "auto");
  cr_expect_str_eq(cfg.plugin_path, "");
  cr_expect_eq(cfg.fusion_threshold, 64ull << 20, "fusion threshold %llu",
               (unsigned long long)cfg.fusion_threshold);
  cr_expect_eq(cfg.cycle_time_ms, 1.0, "cycle time %g", cfg.cycle_time_ms);
  cr_expect_eq(cfg.cache_capacity, 1024, "cache capacity %lld", (long long)cfg.cache_capacity);
  cr_expect_str_eq(cfg.timeline, "");
  cr_expect_eq(cfg.stall_warn_s, 60.0);
  cr_expect_eq(cfg.stall_abort_s, 0.0);
  cr_expect_eq(cfg.timeout_s, 60.0);
  cr_expect_eq(cfg.start_timeout_s, 60.0);
  cr_expect_eq(cfg.log_level, PLAIT_LOG_WARN);
  cr_expect_str_eq(cfg.rendezvous, "");
  cr_expect_str_eq(cfg.secret, "");
  cr_expect_eq(cfg.autotune, 0);
  cr_expect_eq(cfg.rank, -1);
  cr_expect_eq(cfg.size, -1);
  cr_expect_eq(cfg.local_rank, -1);
  cr_expect_eq(cfg.local_size, -1);
  cr_expect_str_eq(cfg.hostname, "");
  plait_config_free(&cfg);
  cr_expect_null(cfg.transport, "plait_config_free leaves a dangling pointer");
  plait_config_free(&cfg); /* twice is harmless */
  plait_config_free(NULL);
}

Test(config, values_from_the_environment) {
  setenv("PLAIT_TRANSPORT", "my_ofi2", 1);
  setenv("PLAIT_PLUGIN_PATH", "/a:/b", 1);
  setenv("PLAIT_FUSION_THRESHOLD", "1KiB", 1);
  setenv("PLAIT_CYCLE_TIME_MS", "2.5", 1);
  setenv("PLAIT_CACHE_CAPACITY", "0", 1);
  setenv("PLAIT_STALL_WARN_S", "0", 1);
  setenv("PLAIT_STALL_ABORT_S", "0.25", 1);
  setenv("PLAIT_TIMEOUT_S", "1e3", 1);
  setenv("PLAIT_LOG_LEVEL", "DEBUG", 1);
  setenv("PLAIT_AUTOTUNE", "No", 1);
  setenv("PLAIT_RANK", "3", 1);
  setenv("PLAIT_SIZE", "16777216", 1);
  setenv("PLAIT_LOCAL_RANK", "", 1); /* empty: unset */
  setenv("PLAIT_HOSTNAME", "node-7", 1);
  plait_config_t cfg;
  plait_result_t rc = plait_config_load(&cfg);
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_config_load: %s", plait_last_error());
  cr_expect_str_eq(cfg.transport, "my_ofi2");
  cr_expect_str_eq(cfg.plugin_path, "/a:/b");
  cr_expect_eq(cfg.fusion_threshold, 1024);
  cr_expect_eq(cfg.cycle_time_ms, 2.5);
  cr_expect_eq(cfg.cache_capacity, 0);
  cr_expect_eq(cfg.stall_warn_s, 0.0);
  cr_expect_eq(cfg.stall_abort_s, 0.25);
  cr_expect_eq(cfg.timeout_s, 1000.0);
  cr_expect_eq(cfg.log_level, PLAIT_LOG_DEBUG);
  cr_expect_eq(cfg.autotune, 0);
  cr_expect_eq(cfg.rank, 3);
  cr_expect_eq(cfg.size, 16777216);
  cr_expect_eq(cfg.local_rank, -1);
  cr_expect_str_eq(cfg.hostname, "node-7");
  plait_config_free(&cfg);
}

/* A value of each type that the type must refuse, and a phrase of what the
 * type accepts that the message must contain. TEXT takes any string. */
#define BAD_NAME "Gloo"
#define BAD_TEXT NULL
#define BAD_SIZE "64Q"
#define BAD_COUNT "-1"
#define BAD_RANKNUM "x1"
#define BAD_SECONDS "-0.5"
#define BAD_POSITIVE "0"
#define BAD_BOOL "maybe"
#define BAD_LEVEL "loud"
#define ACCEPTS_NAME "lowercase"
#define ACCEPTS_TEXT NULL
#define ACCEPTS_SIZE "64M"
#define ACCEPTS_COUNT "integer >= 0"
#define ACCEPTS_RANKNUM "integer >= 0"
#define ACCEPTS_SECONDS ">= 0"
#define ACCEPTS_POSITIVE "> 0"
#define ACCEPTS_BOOL "true"
#define ACCEPTS_LEVEL "debug"

typedef struct {
  const char *var, *type, *bad, *accepts;
} var_case_t;

static const var_case_t var_cases[] = {
#define X(field, var, type, def, range, help) {var, #type, BAD_##type, ACCEPTS_##type},
    PLAIT_CONFIG_TABLE(X)
#undef X
};
#define N_VARS (sizeof var_cases / sizeof var_cases[0])

/* Loads with var=value and expects PLAIT_ERR_CONFIG naming var, value, and
 * what it accepts. */
static void expect_rejected(const char *var, const char *value, const char *accepts) {
  cr_assert_eq(setenv(var, value, 1), 0);
  plait_config_t cfg;
  memset(&cfg, 0xAB, sizeof cfg);
  plait_error(PLAIT_SUCCESS, "stale message");
  plait_result_t rc = plait_config_load(&cfg);
  const char *msg = plait_last_error();
  cr_expect_eq(rc, PLAIT_ERR_CONFIG, "%s='%s': got %s (%s), expected PLAIT_ERR_CONFIG", var,
               value, plait_result_name(rc), msg);
  char quoted[256];
  snprintf(quoted, sizeof quoted, "%s='%s'", var, value);
  cr_expect(strstr(msg, quoted) != NULL, "message does not quote %s: \"%s\"", quoted, msg);
  if (accepts)
    cr_expect(strstr(msg, accepts) != NULL, "message for %s does not say it accepts \"%s\": \"%s\"",
              var, accepts, msg);
  /* left empty: nothing to free, no pointer left dangling */
  cr_expect_null(cfg.transport, "%s: cfg.transport not cleared on failure", var);
  cr_expect_null(cfg.secret, "%s: cfg.secret not cleared on failure", var);
  if (rc == PLAIT_SUCCESS) plait_config_free(&cfg);
  cr_assert_eq(unsetenv(var), 0);
}

Test(config, every_variable_rejects_a_bad_value_of_its_type) {
  size_t checked = 0, text = 0;
  for (size_t i = 0; i < N_VARS; i++) {
    const var_case_t *c = &var_cases[i];
    if (!c->bad) { /* TEXT: anything goes; prove it */
      cr_assert_str_eq(c->type, "TEXT");
      setenv(c->var, " any: thing\t'quoted' ", 1);
      /* PLAIT_SECRET_FILE names a file read only when PLAIT_SECRET is unset
       * (tests/core/test_secret_file.c checks the file) */
      if (!strcmp(c->var, "PLAIT_SECRET_FILE")) setenv("PLAIT_SECRET", "s", 1);
      plait_config_t cfg;
      plait_result_t rc = plait_config_load(&cfg);
      cr_expect_eq(rc, PLAIT_SUCCESS, "%s (TEXT) refused any text: %s", c->var, plait_last_error());
      if (rc == PLAIT_SUCCESS) plait_config_free(&cfg);
      unsetenv(c->var);
      unsetenv("PLAIT_SECRET");
      text++;
      continue;
    }
    expect_rejected(c->var, c->bad, c->accepts);
    checked++;
  }
  cr_expect_eq(checked + text, N_VARS);
  cr_expect_geq(checked, 10, "only %zu typed variables in the table?", checked);
}

Test(config, more_bad_values) {
  static const struct {
    const char *var, *value, *accepts;
  } cases[] = {
      {"PLAIT_TRANSPORT", "", "lowercase"},
      {"PLAIT_TRANSPORT", "../evil", "lowercase"},
      {"PLAIT_TRANSPORT", "a-b", "lowercase"},
      {"PLAIT_TRANSPORT", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "lowercase"},
      {"PLAIT_FUSION_THRESHOLD", "", "64M"},
      {"PLAIT_FUSION_THRESHOLD", "1.5M", "64M"},
      {"PLAIT_FUSION_THRESHOLD", "99999999999999999999", "64M"},
      {"PLAIT_CACHE_CAPACITY", "1.5", "integer"},
      {"PLAIT_CACHE_CAPACITY", "+5", "integer"},
      {"PLAIT_CACHE_CAPACITY", "5 ", "integer"},
      {"PLAIT_CACHE_CAPACITY", "99999999999999999999", "integer"},
      {"PLAIT_CYCLE_TIME_MS", "", "> 0"},
      {"PLAIT_CYCLE_TIME_MS", "-1", "> 0"},
      {"PLAIT_CYCLE_TIME_MS", "nan", "> 0"},
      {"PLAIT_CYCLE_TIME_MS", "inf", "> 0"},
      {"PLAIT_CYCLE_TIME_MS", "1ms", "> 0"},
      {"PLAIT_TIMEOUT_S", " 5", "> 0"},
      {"PLAIT_TIMEOUT_S", "1e10", "1 to 86400"},
      {"PLAIT_STALL_WARN_S", "abc", ">= 0"},
      {"PLAIT_AUTOTUNE", "2", "true"},
      {"PLAIT_AUTOTUNE", "", "true"},
      {"PLAIT_RANK", "-1", "integer >= 0"},
      {"PLAIT_RANK", "16777217", "0 to 16777215"},
      {"PLAIT_RANK", "99999999999999999999", "integer >= 0"},
      {"PLAIT_SIZE", "4.0", "integer >= 0"},
      {"PLAIT_LOCAL_SIZE", "two", "integer >= 0"},
      {"PLAIT_LOG_LEVEL", "", "debug"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_rejected(cases[i].var, cases[i].value, cases[i].accepts);
}

/* PLAIT_AUTOTUNE works now: a true value is taken, with its options. */
Test(config, autotune_and_its_options_are_taken) {
  const char *yes[] = {"1", "true", "Yes", "on"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    setenv("PLAIT_AUTOTUNE", yes[i], 1);
    plait_config_t cfg;
    cr_assert_eq(plait_config_load(&cfg), PLAIT_SUCCESS, "PLAIT_AUTOTUNE=%s: %s", yes[i],
                 plait_last_error());
    cr_expect_eq(cfg.autotune, 1, "PLAIT_AUTOTUNE=%s", yes[i]);
    plait_config_free(&cfg);
  }
  setenv("PLAIT_AUTOTUNE_LOG", "/tmp/x.csv", 1);
  setenv("PLAIT_AUTOTUNE_WARMUP_SAMPLES", "0", 1);
  setenv("PLAIT_AUTOTUNE_STEPS_PER_SAMPLE", "7", 1);
  setenv("PLAIT_AUTOTUNE_MAX_SAMPLES", "30", 1);
  plait_config_t cfg;
  cr_assert_eq(plait_config_load(&cfg), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_str_eq(cfg.autotune_log, "/tmp/x.csv");
  cr_expect_eq(cfg.autotune_warmup_samples, 0);
  cr_expect_eq(cfg.autotune_steps_per_sample, 7);
  cr_expect_eq(cfg.autotune_max_samples, 30);
  plait_config_free(&cfg);
  setenv("PLAIT_AUTOTUNE_STEPS_PER_SAMPLE", "0", 1); /* a sample of no lists measures nothing */
  cr_expect_eq(plait_config_load(&cfg), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "PLAIT_AUTOTUNE_STEPS_PER_SAMPLE"), "%s",
            plait_last_error());
  unsetenv("PLAIT_AUTOTUNE_STEPS_PER_SAMPLE");
  unsetenv("PLAIT_AUTOTUNE_LOG");
  unsetenv("PLAIT_AUTOTUNE_WARMUP_SAMPLES");
  unsetenv("PLAIT_AUTOTUNE_MAX_SAMPLES");
  setenv("PLAIT_AUTOTUNE", "0", 1);
  cr_expect_eq(plait_config_load(&cfg), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(cfg.autotune, 0);
  plait_config_free(&cfg);
}

/* What was set, not defaulted, is known: autotune keeps it and the
 * transport's defaults leave it alone. */
Test(config, given_marks_variables_set_not_defaulted) {
  setenv("PLAIT_FUSION_THRESHOLD", "64M", 1); /* the default's value, but set */
  plait_config_t cfg;
  cr_assert_eq(plait_config_load(&cfg), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(plait_config_given(&cfg, "PLAIT_FUSION_THRESHOLD"));
  cr_expect_not(plait_config_given(&cfg, "PLAIT_FUSION_MAX_TENSOR"));
  cr_expect_not(plait_config_given(&cfg, "PLAIT_NO_SUCH"));
  cr_assert_eq(plait_config_parse_var(&cfg, "PLAIT_FUSION_MAX_TENSOR", "1M"), PLAIT_SUCCESS);
  cr_expect(plait_config_given(&cfg, "PLAIT_FUSION_MAX_TENSOR"));
  plait_config_free(&cfg);
  unsetenv("PLAIT_FUSION_THRESHOLD");
}

Test(config, documented_example_message) {
  setenv("PLAIT_FUSION_THRESHOLD", "64Q", 1);
  plait_config_t cfg;
  cr_assert_eq(plait_config_load(&cfg), PLAIT_ERR_CONFIG);
  const char *msg = plait_last_error();
  cr_expect(strstr(msg, "PLAIT_FUSION_THRESHOLD") != NULL, "%s", msg);
  cr_expect(strstr(msg, "64Q") != NULL, "%s", msg);
  cr_expect(strstr(msg, "65536") && strstr(msg, "64K") && strstr(msg, "1G"), "%s", msg);
  cr_expect(strstr(msg, "built-in default") == NULL, "a value from the environment is not a default: %s",
            msg);
}

/* ------------------------------------------------------------------------ */
/* plait_config_unknown                                                      */
/* ------------------------------------------------------------------------ */

Test(unknown, lists_typos_only) {
  setenv("PLAIT_TYPO", "1", 1);
  setenv("PLAIT_OFI_X", "1", 1);
  setenv("PLAIT_LIBRARY", "/x/libplait.so", 1);
  setenv("PLAIT_NCCL_Y", "1", 1);
  setenv("PLAIT_GLOO_Z", "1", 1);
  setenv("PLAIT_TEST_W", "1", 1);
  setenv("PLAIT_BENCH_V", "1", 1);
  setenv("PLAIT_FUSION_THRESHOLD", "1M", 1);
  setenv("NOT_PLAIT_TYPO", "1", 1);
  char buf[256];
  memset(buf, 'Z', sizeof buf);
  int n = plait_config_unknown(buf, sizeof buf);
  cr_expect_eq(n, 2, "%d unknown variables: \"%s\"", n, buf);
  /* no NCCL plugin exists to check PLAIT_NCCL_*: the core reports them */
  cr_expect(strstr(buf, "PLAIT_TYPO") && strstr(buf, "PLAIT_NCCL_Y"), "%s", buf);
}

Test(unknown, none) {
  setenv("PLAIT_LOG_LEVEL", "info", 1);
  setenv("PLAIT_OFI_PROVIDER", "tcp", 1);
  setenv("PLAIT_TENSORFLOW_LIBRARY", "/x/libplait_tensorflow.so", 1); /* plait.tensorflow's */
  setenv("PLAIT_MXNET_LIBRARY", "/x/libplait_mxnet.so", 1);            /* plait.mxnet's */
  char buf[64];
  memset(buf, 'Z', sizeof buf);
  cr_expect_eq(plait_config_unknown(buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "", "buffer not emptied when nothing is unknown");
}

Test(unknown, prefix_of_a_known_name_is_unknown) {
  setenv("PLAIT_FUSION", "1", 1);           /* prefix of PLAIT_FUSION_THRESHOLD */
  setenv("PLAIT_RANKS", "1", 1);            /* PLAIT_RANK plus a letter */
  setenv("PLAIT_TRANSPORT", "gloo", 1);
  char buf[256];
  int n = plait_config_unknown(buf, sizeof buf);
  cr_expect_eq(n, 2, "%d unknown variables: \"%s\"", n, buf);
  cr_expect(strstr(buf, "PLAIT_FUSION") != NULL, "%s", buf);
  cr_expect(strstr(buf, "PLAIT_RANKS") != NULL, "%s", buf);
  cr_expect(strstr(buf, ", ") != NULL, "not comma-separated: %s", buf);
  cr_expect(strstr(buf, "PLAIT_TRANSPORT") == NULL, "%s", buf);
  cr_expect(strchr(buf, '=') == NULL, "values leak into the list: %s", buf);
}

Test(unknown, small_buffer_is_cut_and_terminated) {
  setenv("PLAIT_TYPO_NUMBER_ONE", "1", 1);
  char buf[8];
  memset(buf, 'Z', sizeof buf);
  cr_expect_eq(plait_config_unknown(buf, 6), 1);
  cr_expect_str_eq(buf, "PLAIT");
  cr_expect_eq(buf[6], 'Z', "wrote past the buffer");
  cr_expect_eq(plait_config_unknown(NULL, 0), 1, "count without a buffer");
}

/* ------------------------------------------------------------------------ */
/* plait_config_help                                                         */
/* ------------------------------------------------------------------------ */

/* Values the type accepts that would wedge or break a job (issue 16): each is
 * refused naming the variable, the value and the range. */
Test(config, every_numeric_variable_refuses_values_outside_its_range) {
  static const struct {
    const char *var, *value, *range;
  } cases[] = {
      {"PLAIT_FUSION_THRESHOLD", "17G", "0 to 16G"},
      {"PLAIT_FUSION_MAX_TENSOR", "2T", "0 to 1T"},
      {"PLAIT_CYCLE_TIME_MS", "1e9", "0.01 to 86400000"},
      {"PLAIT_CYCLE_TIME_MS", "0.001", "0.01 to 86400000"},
      {"PLAIT_CACHE_CAPACITY", "1048577", "0 to 1048576"},
      {"PLAIT_STALL_WARN_S", "86401", "0 to 86400"},
      {"PLAIT_STALL_ABORT_S", "1e9", "0 to 86400"},
      {"PLAIT_TIMEOUT_S", "1e-9", "1 to 86400"},
      {"PLAIT_TIMEOUT_S", "0.5", "1 to 86400"},
      {"PLAIT_TIMEOUT_S", "86401", "1 to 86400"},
      {"PLAIT_START_TIMEOUT_S", "0.01", "0.1 to 86400"},
      {"PLAIT_START_TIMEOUT_S", "1e6", "0.1 to 86400"},
      {"PLAIT_RANK", "16777216", "0 to 16777215"},
      {"PLAIT_SIZE", "0", "1 to 16777216"},
      {"PLAIT_SIZE", "16777217", "1 to 16777216"},
      {"PLAIT_LOCAL_RANK", "16777216", "0 to 16777215"},
      {"PLAIT_LOCAL_SIZE", "0", "1 to 16777216"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    expect_rejected(cases[i].var, cases[i].value, cases[i].range);
    expect_rejected(cases[i].var, cases[i].value, "out of range");
  }
}

typedef struct {
  const char *var, *type, *range;
} range_case_t;

static const range_case_t range_cases[] = {
#define X(field, var, type, def, range, help) {var, #type, range},
    PLAIT_CONFIG_TABLE(X)
#undef X
};

/* Every numeric variable has a range in the table, and both of its ends are
 * accepted. */
Test(config, every_numeric_variable_has_a_range_whose_ends_are_accepted) {
  for (size_t i = 0; i < sizeof range_cases / sizeof range_cases[0]; i++) {
    const range_case_t *c = &range_cases[i];
    int numeric = strstr("SIZE COUNT RANKNUM SECONDS POSITIVE", c->type) != NULL;
    cr_expect_eq(numeric, *c->range != '\0', "%s (%s): range \"%s\"", c->var, c->type, c->range);
    const char *dots = strstr(c->range, "..");
    if (!numeric || !dots) continue;
    char ends[2][32];
    snprintf(ends[0], sizeof ends[0], "%.*s", (int)(dots - c->range), c->range);
    snprintf(ends[1], sizeof ends[1], "%s", dots + 2);
    for (int k = 0; k < 2; k++) {
      setenv(c->var, ends[k], 1);
      plait_config_t cfg;
      plait_result_t rc = plait_config_load(&cfg);
      cr_expect_eq(rc, PLAIT_SUCCESS, "%s=%s (an end of its range) refused: %s", c->var, ends[k],
                   plait_last_error());
      if (rc == PLAIT_SUCCESS) plait_config_free(&cfg);
      unsetenv(c->var);
    }
  }
}

typedef struct {
  const char *var, *type, *def, *range, *help;
} help_case_t;

static const help_case_t help_cases[] = {
#define X(field, var, type, def, range, help) {var, #type, def, range, help},
    PLAIT_CONFIG_TABLE(X)
#undef X
};

/* The line of text that begins with name followed by a blank, or NULL. */
static const char *find_line(const char *text, const char *name, char sep) {
  size_t n = strlen(name);
  for (const char *p = text; p && *p;) {
    if (!strncmp(p, name, n) && p[n] == sep) return p;
    p = strchr(p, '\n');
    if (p) p++;
  }
  return NULL;
}

static char *help_text(void) {
  size_t needed = 0;
  plait_result_t rc = plait_config_help(NULL, 0, &needed);
  cr_assert_eq(rc, PLAIT_ERR_BUFFER_TOO_SMALL, "plait_config_help(NULL, 0): %s",
               plait_result_name(rc));
  cr_assert_gt(needed, 1);
  char *buf = malloc(needed);
  cr_assert_not_null(buf);
  size_t again = 0;
  rc = plait_config_help(buf, needed, &again);
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_config_help: %s", plait_last_error());
  cr_assert_eq(again, needed);
  cr_assert_eq(strlen(buf) + 1, needed, "needed %zu but text is %zu long", needed, strlen(buf));
  return buf;
}

Test(help, names_every_variable_with_type_default_and_help) {
  char *text = help_text();
  for (size_t i = 0; i < sizeof help_cases / sizeof help_cases[0]; i++) {
    const help_case_t *c = &help_cases[i];
    const char *line = find_line(text, c->var, ' ');
    cr_expect_not_null(line, "%s is missing from plait_config_help:\n%s", c->var, text);
    if (!line) continue;
    const char *eol = strchr(line, '\n');
    cr_assert_not_null(eol);
    size_t len = (size_t)(eol - line);
    char head[512];
    snprintf(head, sizeof head, "%.*s", (int)len, line);
    char def[256];
    snprintf(def, sizeof def, "default: %s", *c->def ? c->def : "(unset)");
    cr_expect(strstr(head, def) != NULL, "%s: no \"%s\" in \"%s\"", c->var, def, head);
    cr_expect(strstr(head, c->type) != NULL, "%s: type %s not in \"%s\"", c->var, c->type, head);
    char range[128];
    snprintf(range, sizeof range, "range: %s", c->range);
    cr_expect(!*c->range || strstr(head, range) != NULL, "%s: no \"%s\" in \"%s\"", c->var, range,
              head);
    cr_expect(strncmp(eol + 1, "    ", 4) == 0 && strncmp(eol + 5, c->help, strlen(c->help)) == 0,
              "%s: help text not on the next line", c->var);
  }
  free(text);
}

Test(help, does_not_read_the_environment) {
  char *before = help_text();
  setenv("PLAIT_FUSION_THRESHOLD", "64Q", 1); /* bad, and ignored by help */
  setenv("PLAIT_SECRET", "help-must-not-show-this-secret", 1);
  char *after = help_text();
  cr_expect_str_eq(before, after);
  cr_expect(strstr(after, "help-must-not-show-this-secret") == NULL);
  free(before);
  free(after);
}

Test(help, too_small_buffer) {
  char *full = help_text();
  size_t n = strlen(full) + 1;
  char *buf = malloc(n + 1);
  cr_assert_not_null(buf);
  memset(buf, 'Z', n + 1);
  size_t needed = 0;
  cr_expect_eq(plait_config_help(buf, n - 1, &needed), PLAIT_ERR_BUFFER_TOO_SMALL);
  cr_expect_eq(needed, n);
  cr_expect_eq(buf[n - 2], '\0', "cut text is not NUL-terminated");
  cr_expect_eq(strncmp(buf, full, n - 2), 0, "cut text is not a prefix of the full text");
  cr_expect_eq(buf[n - 1], 'Z', "wrote past the buffer");
  cr_expect(strstr(plait_last_error(), "too small") != NULL, "%s", plait_last_error());
  free(buf);
  free(full);
}

/* ------------------------------------------------------------------------ */
/* plait_config_dump (before plait_init) and plait_config_format             */
/* ------------------------------------------------------------------------ */

/* The whole dump, malloc'ed; fails the test on any error. */
static char *dump_text(void) {
  size_t needed = 0;
  plait_result_t rc = plait_config_dump(NULL, 0, &needed);
  cr_assert_eq(rc, PLAIT_ERR_BUFFER_TOO_SMALL, "plait_config_dump(NULL, 0): %s: %s",
               plait_result_name(rc), plait_last_error());
  cr_assert_gt(needed, 1);
  char *buf = malloc(needed);
  cr_assert_not_null(buf);
  size_t again = 0;
  rc = plait_config_dump(buf, needed, &again);
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_config_dump: %s: %s", plait_result_name(rc),
               plait_last_error());
  cr_assert_eq(again, needed);
  cr_assert_eq(strlen(buf) + 1, needed);
  return buf;
}

Test(dump, one_line_per_variable_with_defaults) {
  char *text = dump_text();
  size_t lines = 0;
  for (const char *p = text; *p; p++) lines += *p == '\n';
  cr_expect_eq(lines, sizeof help_cases / sizeof help_cases[0], "%zu lines:\n%s", lines, text);
  for (size_t i = 0; i < sizeof help_cases / sizeof help_cases[0]; i++)
    cr_expect_not_null(find_line(text, help_cases[i].var, '='), "%s= missing from dump:\n%s",
                       help_cases[i].var, text);
  static const char *expect[] = {
      "PLAIT_TRANSPORT=auto\n",       "PLAIT_PLUGIN_PATH=\n",     "PLAIT_FUSION_THRESHOLD=67108864\n",
      "PLAIT_CYCLE_TIME_MS=1\n",      "PLAIT_CACHE_CAPACITY=1024\n", "PLAIT_STALL_WARN_S=60\n",
      "PLAIT_STALL_ABORT_S=0\n",      "PLAIT_TIMEOUT_S=60\n",     "PLAIT_START_TIMEOUT_S=60\n",
      "PLAIT_LOG_LEVEL=warn\n",       "PLAIT_SECRET=\n",          "PLAIT_AUTOTUNE=0\n",
      "PLAIT_RANK=\n",                "PLAIT_SIZE=\n",
  };
  for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
    cr_expect(strstr(text, expect[i]) != NULL, "\"%.*s\" not in dump:\n%s",
              (int)strlen(expect[i]) - 1, expect[i], text);
  cr_expect(strncmp(text, "PLAIT_TRANSPORT=auto\n", 21) == 0, "dump does not start with the table: %s",
            text);
  free(text);
}

Test(dump, reads_the_environment_each_time_before_init) {
  setenv("PLAIT_FUSION_THRESHOLD", "1K", 1);
  setenv("PLAIT_LOG_LEVEL", "Error", 1);
  char *a = dump_text();
  cr_expect(strstr(a, "PLAIT_FUSION_THRESHOLD=1024\n") != NULL, "%s", a);
  cr_expect(strstr(a, "PLAIT_LOG_LEVEL=error\n") != NULL, "%s", a);
  setenv("PLAIT_FUSION_THRESHOLD", "2K", 1);
  char *b = dump_text();
  cr_expect(strstr(b, "PLAIT_FUSION_THRESHOLD=2048\n") != NULL, "%s", b);
  free(a);
  free(b);
}

Test(dump, bad_value_before_init_is_a_config_error) {
  setenv("PLAIT_CACHE_CAPACITY", "-3", 1);
  char buf[4096];
  size_t needed = 12345;
  plait_result_t rc = plait_config_dump(buf, sizeof buf, &needed);
  cr_expect_eq(rc, PLAIT_ERR_CONFIG, "got %s", plait_result_name(rc));
  cr_expect(strstr(plait_last_error(), "PLAIT_CACHE_CAPACITY='-3'") != NULL, "%s",
            plait_last_error());
  cr_expect_eq(needed, 12345, "needed written on error");
}

Test(dump, exact_and_too_small_buffers) {
  setenv("PLAIT_TIMELINE", "/tmp/some/timeline.json", 1);
  char *full = dump_text();
  size_t n = strlen(full) + 1;
  char *buf = malloc(n + 1);
  cr_assert_not_null(buf);

  /* exactly big enough */
  memset(buf, 'Z', n + 1);
  size_t needed = 0;
  cr_expect_eq(plait_config_dump(buf, n, &needed), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(needed, n);
  cr_expect_str_eq(buf, full);
  cr_expect_eq(buf[n], 'Z', "wrote past the buffer");
  /* needed may be NULL */
  cr_expect_eq(plait_config_dump(buf, n, NULL), PLAIT_SUCCESS);

  /* one byte short: cut, terminated, needed right */
  memset(buf, 'Z', n + 1);
  needed = 0;
  plait_error(PLAIT_SUCCESS, "stale");
  cr_expect_eq(plait_config_dump(buf, n - 1, &needed), PLAIT_ERR_BUFFER_TOO_SMALL);
  cr_expect_eq(needed, n);
  cr_expect_eq(buf[n - 2], '\0', "cut text not NUL-terminated");
  cr_expect_eq(strncmp(buf, full, n - 2), 0, "cut text is not a prefix");
  cr_expect_eq(buf[n - 1], 'Z', "wrote past the buffer");
  cr_expect(strstr(plait_last_error(), "too small") != NULL, "%s", plait_last_error());
  char want[64];
  snprintf(want, sizeof want, "%zu", n);
  cr_expect(strstr(plait_last_error(), want) != NULL, "message does not say %zu bytes: %s", n,
            plait_last_error());

  /* tiny buffers */
  for (size_t size = 1; size <= 17; size += 8) {
    memset(buf, 'Z', n + 1);
    needed = 0;
    cr_expect_eq(plait_config_dump(buf, size, &needed), PLAIT_ERR_BUFFER_TOO_SMALL);
    cr_expect_eq(needed, n);
    cr_expect_eq(strlen(buf), size - 1);
    cr_expect_eq(strncmp(buf, full, size - 1), 0);
    cr_expect_eq(buf[size], 'Z');
  }

  /* buf NULL, size 0: only the size */
  needed = 0;
  cr_expect_eq(plait_config_dump(NULL, 0, &needed), PLAIT_ERR_BUFFER_TOO_SMALL);
  cr_expect_eq(needed, n);
  cr_expect_eq(plait_config_dump(NULL, 0, NULL), PLAIT_ERR_BUFFER_TOO_SMALL);
  free(buf);
  free(full);
}

Test(dump, null_buffer_with_a_size_is_invalid) {
  size_t needed = 99;
  cr_expect_eq(plait_config_dump(NULL, 16, &needed), PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(plait_last_error(), "buf") != NULL, "%s", plait_last_error());
  cr_expect_eq(needed, 99);
}

Test(dump, secret_is_never_printed) {
  static const char secret[] = "s3cr3t-0123456789abcdef-DO-NOT-PRINT";
  setenv("PLAIT_SECRET", secret, 1);
  char *text = dump_text();
  cr_expect(strstr(text, secret) == NULL, "secret in dump:\n%s", text);
  cr_expect(strstr(text, "s3cr3t") == NULL, "part of the secret in dump:\n%s", text);
  cr_expect(strstr(text, "PLAIT_SECRET=(set, not shown)\n") != NULL, "%s", text);
  /* every cut of the dump as well */
  char buf[2048];
  for (size_t size = 1; size < sizeof buf && size <= strlen(text) + 1; size++) {
    plait_config_dump(buf, size, NULL);
    cr_assert(strstr(buf, "s3cr3t") == NULL, "secret in a %zu-byte dump", size);
  }
  free(text);

  plait_config_t cfg;
  cr_assert_eq(plait_config_load(&cfg), PLAIT_SUCCESS);
  cr_expect_str_eq(cfg.secret, secret, "the secret is still loaded for the control plane");
  char fmt[4096];
  cr_assert_eq(plait_config_format(&cfg, fmt, sizeof fmt, NULL), PLAIT_SUCCESS);
  cr_expect(strstr(fmt, "s3cr3t") == NULL, "secret in plait_config_format:\n%s", fmt);
  plait_config_free(&cfg);
}

Test(dump, success_leaves_last_error_alone) {
  plait_error(PLAIT_ERR_TIMEOUT, "an earlier failure");
  char buf[8192];
  cr_assert_eq(plait_config_dump(buf, sizeof buf, NULL), PLAIT_SUCCESS);
  cr_expect_str_eq(plait_last_error(), "an earlier failure");
}

/* A line break in a text value would print as two settings in
 * plait_config_dump and the info log ("one NAME=value per line"), so a value
 * could pass for another variable's (found by tests/fuzz/fuzz_config). */
Test(config, text_with_a_line_break_is_refused) {
  static const char *const vars[] = {"PLAIT_PLUGIN_PATH", "PLAIT_TIMELINE", "PLAIT_HOSTNAME",
                                     "PLAIT_RENDEZVOUS", "PLAIT_SECRET"};
  static const char *const values[] = {"/opt/x\nPLAIT_TRANSPORT=ofi", "a\rb", "\n"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    for (size_t k = 0; k < sizeof values / sizeof values[0]; k++)
      expect_rejected(vars[i], values[k], "without a line break");
  setenv("HOROVOD_HOSTNAME", "node1\nPLAIT_TRANSPORT=ofi", 1);
  plait_config_t cfg;
  plait_result_t rc = plait_config_load(&cfg);
  cr_expect_eq(rc, PLAIT_ERR_CONFIG, "HOROVOD_HOSTNAME with a newline: %s", plait_last_error());
  cr_expect(strstr(plait_last_error(), "HOROVOD_HOSTNAME") != NULL, "%s", plait_last_error());
  if (rc == PLAIT_SUCCESS) plait_config_free(&cfg);
}
