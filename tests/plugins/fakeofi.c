/* Stands in for the ofi plugin (its table is named "ofi"; the tests link it
 * as libplait-transport-ofi.so in a folder of their own) to test what
 * PLAIT_TRANSPORT=auto does when a rank cannot start the transport that was
 * chosen: probe says "shm" on every rank; init fails on a rank whose
 * FAKEOFI_FAIL is set, after (FAKEOFI_LATE set) or before the bootstrap
 * allgather the others then wait in. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static _Thread_local char err[256];
static const char *fake_last_error(void *state) {
  (void)state;
  return err;
}

static plait_result_t fake_probe(const plait_transport_init_args_t *a, char *detail, size_t len) {
  (void)a;
  snprintf(detail, len, "shm");
  return PLAIT_SUCCESS;
}

static plait_result_t fake_init(const plait_transport_init_args_t *a, void **state) {
  int fail = getenv("FAKEOFI_FAIL") != NULL, late = getenv("FAKEOFI_LATE") != NULL;
  if (fail && !late) {
    snprintf(err, sizeof err, "fakeofi: rank %d cannot open its endpoint", a->rank);
    return PLAIT_ERR_TRANSPORT;
  }
  const plait_bootstrap_t *b = a->bootstrap;
  int mine = a->rank, all[64];
  if (a->nranks > 64) return PLAIT_ERR_UNSUPPORTED;
  plait_result_t rc = b->allgather(b->ctx, &mine, sizeof mine, all);
  if (rc) {
    snprintf(err, sizeof err, "fakeofi: exchanging addresses failed");
    return rc;
  }
  if (fail) {
    snprintf(err, sizeof err, "fakeofi: rank %d cannot insert the addresses", a->rank);
    return PLAIT_ERR_TRANSPORT;
  }
  *state = (void *)a;
  return PLAIT_SUCCESS;
}

FX_EXPORT plait_transport_t plait_transport_v2 = {
    .abi_version = PLAIT_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(plait_transport_t),
    .name = "ofi",
    .caps = PLAIT_CAP_HOST_MEMORY,
    .auto_place = 0, /* fakeofi_load: 10 when it stands in for ofi */
    .init = fake_init,
    .finalize = fx_finalize,
    .last_error = fake_last_error,
    .allreduce = fx_allreduce_v2,
    .allgatherv = fx_allgatherv,
    .broadcast = fx_broadcast,
    .alltoallv = fx_alltoallv,
    .reducescatter = fx_reducescatter,
    .barrier = fx_barrier,
    .mem_alloc = fx_alloc,
    .mem_free = fx_free,
    .mem_copy = fx_copy,
    .probe = fake_probe,
};

/* Linked as libplait-transport-ofi.so it takes ofi's place in auto (10);
 * under its own name it is never a candidate, so a plugin folder holding it
 * beside the real ofi does not change what auto chooses. */
__attribute__((constructor)) static void fakeofi_load(void) {
  Dl_info info;
  const char *as = "libplait-transport-ofi.so";
  if (dladdr((void *)&plait_transport_v2, &info) && info.dli_fname) {
    size_t n = strlen(info.dli_fname), k = strlen(as);
    if (n >= k && !strcmp(info.dli_fname + n - k, as)) plait_transport_v2.auto_place = 10;
  }
}
