/*
 * The ofi multi-rank tests' way to run a job (test_ofi_collectives.c,
 * test_ofi_liveness.c, test_ofi_signals.c): in a Criterion test, skip it,
 * saying why, when the plugin was not built or the provider cannot start
 * here; otherwise every rank must pass.
 */
#ifndef PLAIT_TEST_OFI_JOB_H
#define PLAIT_TEST_OFI_JOB_H

#include <criterion/criterion.h>

#include <stdio.h>

#include "transport_matrix.h"

static inline void ofi_require_plugin(void) {
  FILE *f = fopen(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", "rb");
  if (!f)
    cr_skip_test("the ofi transport plugin was not built (is libfabric-dev installed?): "
                 "no " PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so");
  fclose(f);
}

/* A job of nranks running body over FI_PROVIDER=prov, with extra
 * environment entries (NULL-terminated, up to 14; NULL for none). */
static inline void ofi_run_job(const char *prov, int nranks, tm_body_fn body,
                               const char *const *extra) {
  ofi_require_plugin();
  char fi[64], reason[1024] = "";
  snprintf(fi, sizeof fi, "FI_PROVIDER=%s", prov);
  const char *env[16];
  int k = 0;
  env[k++] = fi;
  for (; extra && *extra && k < 15; extra++) env[k++] = *extra;
  env[k] = NULL;
  int rc = tm_run("ofi", nranks, body, env, reason, sizeof reason);
  if (rc == TM_SKIPPED) cr_skip_test("FI_PROVIDER=%s cannot start here: %s", prov, reason);
  cr_assert_eq(rc, TM_PASSED, "a rank of %d failed on FI_PROVIDER=%s (see its messages above)",
               nranks, prov);
}

#endif
