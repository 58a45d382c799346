/* The rule of PLAIT_TRANSPORT=auto (src/engine/transport/transport_choice.c), as the
 * pure function every rank applies to the same findings. The whole path, with
 * real plugins and ranks, is tests/core/test_transport_auto.c. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "engine/transport/transport_choice.h"

static const char *const names[] = {"ofi", "gloo"};

/* facts for n ranks: ofi[r] (NULL: can start with "shm"; "!why": cannot;
 * "=x": can, with detail x), gloo always able. */
static void fill(plait_choice_fact_t *f, int n, const char *const *ofi) {
  memset(f, 0, sizeof *f * (size_t)n * 2);
  for (int r = 0; r < n; r++) {
    plait_choice_fact_t *o = &f[r * 2], *g = &f[r * 2 + 1];
    const char *v = ofi ? ofi[r] : NULL;
    if (v && v[0] == '!') {
      o->code = PLAIT_ERR_PLUGIN;
      snprintf(o->detail, sizeof o->detail, "%s", v + 1);
    } else {
      snprintf(o->detail, sizeof o->detail, "%s", v ? v + 1 : "shm");
    }
    g->code = PLAIT_SUCCESS;
  }
}

/* The candidates come from the plugins' own places (auto_place), merged
 * over every rank's offers alike on every rank: no name is built in. */
Test(choice, candidates_by_declared_place) {
  plait_choice_offer_t offers[3 * PLAIT_CHOICE_MAX], c[PLAIT_CHOICE_MAX];
  memset(offers, 0, sizeof offers);
  /* rank 0 has gloo (20) and ofi (10); rank 1 gloo only; rank 2 also zz (10) */
  snprintf(offers[0].name, sizeof offers[0].name, "gloo"), offers[0].place = 20;
  snprintf(offers[1].name, sizeof offers[1].name, "ofi"), offers[1].place = 10;
  snprintf(offers[PLAIT_CHOICE_MAX].name, sizeof offers[0].name, "gloo");
  offers[PLAIT_CHOICE_MAX].place = 20;
  snprintf(offers[2 * PLAIT_CHOICE_MAX].name, sizeof offers[0].name, "zz");
  offers[2 * PLAIT_CHOICE_MAX].place = 10;
  int n = plait_choice_candidates(offers, 3, c, PLAIT_CHOICE_MAX);
  cr_assert_eq(n, 3);
  cr_expect_str_eq(c[0].name, "ofi");
  cr_expect_str_eq(c[1].name, "zz"); /* same place: by name */
  cr_expect_str_eq(c[2].name, "gloo");
  cr_assert_eq(plait_choice_candidates(offers, 3, c, 1), 1, "at most cap");
  cr_expect_str_eq(c[0].name, "ofi", "cut after ordering: the lowest place stays");
}

/* This rank's offers from a real plugin folder: the plugins that declare a
 * place (gloo, ofi when built), never one that does not (nccl, the v1 test
 * plugins, a broken one), lowest place first. */
Test(choice, offers_read_from_the_plugins) {
  plait_choice_offer_t o[PLAIT_CHOICE_MAX];
  int n = plait_choice_offers(PLAIT_TEST_LIB_DIR ":" PLAIT_TEST_PLUGIN_DIR, o, PLAIT_CHOICE_MAX);
  int gloo = -1, ofi = -1;
  for (int i = 0; i < n; i++) {
    cr_expect(strcmp(o[i].name, "nccl") && strcmp(o[i].name, "fixture") &&
                  strcmp(o[i].name, "devsim") && strcmp(o[i].name, "flaky"),
              "%s offered itself to auto", o[i].name);
    if (!strcmp(o[i].name, "gloo")) gloo = i;
    if (!strcmp(o[i].name, "ofi")) ofi = i; /* the real one: earlier in the path than fakeofi */
    if (i) cr_expect_leq(o[i - 1].place, o[i].place);
  }
  cr_assert_geq(gloo, 0, "gloo (place 20) was not offered");
  cr_expect_eq(o[gloo].place, 20);
  if (ofi >= 0) cr_expect_lt(ofi, gloo, "ofi (place 10) before gloo");
}

Test(choice, every_rank_able_takes_ofi) {
  plait_choice_fact_t f[8];
  fill(f, 4, NULL);
  char why[512];
  cr_assert_eq(plait_choice_decide(names, 2, f, 4, "all 4 ranks on one host", why, sizeof why), 0);
  cr_expect_str_eq(why, "ofi (shm; all 4 ranks on one host)");
}

Test(choice, one_rank_unable_moves_every_rank_to_gloo) {
  plait_choice_fact_t f[8];
  const char *ofi[] = {NULL, NULL, "!libplait-transport-ofi.so not found", NULL};
  fill(f, 4, ofi);
  char why[512];
  cr_assert_eq(plait_choice_decide(names, 2, f, 4, "L", why, sizeof why), 1);
  cr_expect_str_eq(why, "gloo (L); ofi not used: rank 2: libplait-transport-ofi.so not found");
}

Test(choice, different_providers_move_every_rank_to_gloo) {
  plait_choice_fact_t f[6];
  const char *ofi[] = {"=tcp;ofi_rxm", "=tcp;ofi_rxm", "=shm"};
  fill(f, 3, ofi);
  char why[512];
  cr_assert_eq(plait_choice_decide(names, 2, f, 3, "L", why, sizeof why), 1);
  cr_expect_str_eq(why, "gloo (L); ofi not used: rank 0 would use tcp;ofi_rxm but rank 2 shm");
}

Test(choice, none_able_is_minus_one_with_every_reason) {
  plait_choice_fact_t f[4];
  const char *ofi[] = {"!no provider", NULL};
  fill(f, 2, ofi);
  f[3].code = PLAIT_ERR_PLUGIN;
  snprintf(f[3].detail, sizeof f[3].detail, "libplait-transport-gloo.so not found");
  char why[512];
  cr_assert_eq(plait_choice_decide(names, 2, f, 2, "L", why, sizeof why), -1);
  cr_expect(strstr(why, "ofi not used: rank 0: no provider"), "%s", why);
  cr_expect(strstr(why, "gloo not used: rank 1: libplait-transport-gloo.so not found"), "%s", why);
}

Test(choice, a_plugin_without_probe_has_no_detail) {
  plait_choice_fact_t f[2];
  memset(f, 0, sizeof f);
  char why[512];
  const char *only[] = {"gloo"};
  cr_assert_eq(plait_choice_decide(only, 1, f, 2, "all 2 ranks on one host", why, sizeof why), 0);
  cr_expect_str_eq(why, "gloo (all 2 ranks on one host)");
}
