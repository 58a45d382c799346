/* The run-time settings of an engine (src/engine/tune/tunables.h): what may change
 * while running, strict parsing, one consistent snapshot, and the engine's
 * configuration never written. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/tune/tunables.h"
#include "plait/transport.h" /* plait_log_level_t */
#include "ranks.h"
#include "util/config.h"

static plait_config_t cfg;
static plait_tunables_t tun;

static void setup(void) {
  plait_test_clear_env();
  cr_assert_eq(plait_config_load(&cfg), PLAIT_SUCCESS);
  plait_tunables_init(&tun, &cfg);
}

static void teardown(void) {
  plait_tunables_destroy(&tun);
  plait_config_free(&cfg);
}

TestSuite(tunables, .init = setup, .fini = teardown);

Test(tunables, start_from_the_configuration) {
  plait_tuning_t v = plait_tunables_get(&tun);
  cr_expect_eq(v.fusion_threshold, cfg.fusion_threshold);
  cr_expect_eq(v.fusion_max_tensor, cfg.fusion_max_tensor);
  cr_expect_eq(v.cycle_time_ms, cfg.cycle_time_ms);
  cr_expect_eq(v.log_level, cfg.log_level);
  cr_expect_eq(v.timeline_mark_cycles, cfg.timeline_mark_cycles);
}

Test(tunables, every_settable_one_changes_and_the_configuration_does_not) {
  plait_config_t before = cfg;
  cr_assert_eq(plait_tunables_set(&tun, "PLAIT_FUSION_THRESHOLD", "4M"), PLAIT_SUCCESS);
  cr_assert_eq(plait_tunables_set(&tun, "PLAIT_FUSION_MAX_TENSOR", "1K"), PLAIT_SUCCESS);
  cr_assert_eq(plait_tunables_set(&tun, "PLAIT_CYCLE_TIME_MS", "2.5"), PLAIT_SUCCESS);
  cr_assert_eq(plait_tunables_set(&tun, "PLAIT_LOG_LEVEL", "error"), PLAIT_SUCCESS);
  cr_assert_eq(plait_tunables_set(&tun, "PLAIT_TIMELINE_MARK_CYCLES", "1"), PLAIT_SUCCESS);
  plait_tuning_t v = plait_tunables_get(&tun);
  cr_expect_eq(v.fusion_threshold, 4u << 20);
  cr_expect_eq(v.fusion_max_tensor, 1024u);
  cr_expect_eq(v.cycle_time_ms, 2.5);
  cr_expect_eq(v.log_level, PLAIT_LOG_ERROR);
  cr_expect_eq(v.timeline_mark_cycles, 1);
  cr_expect(before.fusion_threshold == cfg.fusion_threshold &&
                before.fusion_max_tensor == cfg.fusion_max_tensor &&
                before.cycle_time_ms == cfg.cycle_time_ms && before.log_level == cfg.log_level &&
                before.timeline_mark_cycles == cfg.timeline_mark_cycles,
            "the configuration snapshot was written");
  plait_config_t now = cfg; /* what plait_config_dump shows */
  plait_tunables_overlay(&tun, &now);
  cr_expect_eq(now.fusion_threshold, 4u << 20);
  cr_expect_eq(now.timeout_s, cfg.timeout_s);
}

Test(tunables, only_the_settable_ones) {
  static const char *const settable[] = {"PLAIT_FUSION_THRESHOLD", "PLAIT_FUSION_MAX_TENSOR",
                                         "PLAIT_CYCLE_TIME_MS", "PLAIT_LOG_LEVEL",
                                         "PLAIT_TIMELINE_MARK_CYCLES"};
  for (size_t i = 0; i < sizeof settable / sizeof settable[0]; i++) {
    cr_expect(plait_tunables_settable(settable[i]), "%s", settable[i]);
    cr_expect(strstr(plait_tunables_list(), settable[i]), "the list names %s", settable[i]);
  }
  cr_expect_eq(plait_tunables_set(&tun, "PLAIT_TIMEOUT_S", "5"), PLAIT_ERR_UNSUPPORTED);
  cr_expect(strstr(plait_last_error(), "PLAIT_TIMEOUT_S"), "%s", plait_last_error());
  cr_expect(!plait_tunables_settable(NULL));
  cr_expect(!plait_tunables_settable("PLAIT_TRANSPORT"));
}

Test(tunables, a_bad_value_names_it_and_changes_nothing) {
  plait_tuning_t before = plait_tunables_get(&tun);
  cr_expect_eq(plait_tunables_set(&tun, "PLAIT_FUSION_THRESHOLD", "lots"), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "PLAIT_FUSION_THRESHOLD") &&
                strstr(plait_last_error(), "'lots'"), "%s", plait_last_error());
  cr_expect_eq(plait_tunables_set(&tun, "PLAIT_CYCLE_TIME_MS", "-1"), PLAIT_ERR_CONFIG);
  plait_tuning_t after = plait_tunables_get(&tun);
  cr_expect_eq(memcmp(&before, &after, sizeof before), 0);
}
