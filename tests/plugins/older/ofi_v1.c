/*
 * "ofi_v1" and "ofi_v1s": the real ofi plugin as a plugin of the frozen
 * version-1 ABI (include/plait/transport_v1.h), built to check the core's
 * v1 adapter (src/engine/plugin_v1.c) with real collectives. Its v1 entries
 * call ofi's version-2 table: allreduce is one span in place,
 * allreduce_scaled one span from send to recv, allreduce_spans the spans.
 *
 *  - ofi_v1: a table whose struct_size ends before allreduce_scaled (a
 *    plugin built before it was appended), so the core must not read that
 *    field and must take its own path (copy in, reduce in place, scale in a
 *    pass of its own). allreduce_scaled is set beyond struct_size, failing
 *    loudly if read.
 *  - ofi_v1s (OFI_V1_FULL): the whole v1 table, allreduce_scaled and
 *    allreduce_spans included, so the adapter serves all three entries.
 *
 * The ops_allreduce matrix re-runs on both (tests/CMakeLists.txt), and
 * tests/mp/test_v1_adapter.c compares their results with ofi's, bit for bit.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "plait/transport.h"

#ifdef OFI_V1_FULL
#define V1_NAME "ofi_v1s"
#else
#define V1_NAME "ofi_v1"
#endif

__attribute__((visibility("default"))) plait_transport_v1_t plait_transport_v1;

static const plait_transport_t *ofi; /* the real plugin's current table */

static plait_result_t v1_allreduce(void *state, void *buf, size_t count, plait_dtype_t dtype,
                                   plait_op_t op) {
  plait_span_t s = {buf, buf, count};
  return ofi->allreduce(state, &s, 1, dtype, op, 1.0, 1.0);
}

#ifdef OFI_V1_FULL
static plait_result_t v1_allreduce_scaled(void *state, const void *send, void *recv, size_t count,
                                          plait_dtype_t dtype, plait_op_t op, double postscale) {
  plait_span_t s = {recv, send, count};
  return ofi->allreduce(state, &s, 1, dtype, op, 1.0, postscale);
}

static plait_result_t v1_allreduce_spans(void *state, const plait_span_t *spans, size_t n,
                                         plait_dtype_t dtype, plait_op_t op, double postscale) {
  return ofi->allreduce(state, spans, n, dtype, op, 1.0, postscale);
}
#else
/* Set beyond struct_size: a core that read it anyway fails loudly. */
static plait_result_t beyond_struct_size(void *state, const void *send, void *recv, size_t count,
                                         plait_dtype_t dtype, plait_op_t op, double postscale) {
  (void)state, (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)postscale;
  return PLAIT_ERR_INTERNAL;
}
#endif

/* Loaded with the library: the core reads the table after dlopen returns.
 * Without the ofi plugin the table stays zero, which the loader refuses
 * (ABI version 0) with the path in its message. */
__attribute__((constructor)) static void ofi_v1_load(void) {
  void *lib = dlopen(PLAIT_OFI_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
  ofi = lib ? dlsym(lib, PLAIT_TRANSPORT_SYMBOL) : NULL;
  if (!ofi) return;
  plait_transport_v1_t *t = &plait_transport_v1;
  t->abi_version = PLAIT_TRANSPORT_V1_ABI_VERSION;
  t->name = V1_NAME;
  t->caps = ofi->caps;
  t->dtypes = ofi->dtypes;
  t->ops = ofi->ops;
  t->init = ofi->init;
  t->finalize = ofi->finalize;
  t->last_error = ofi->last_error;
  t->allreduce = v1_allreduce;
  t->allgatherv = ofi->allgatherv;
  t->broadcast = ofi->broadcast;
  t->alltoallv = ofi->alltoallv;
  t->reducescatter = ofi->reducescatter;
  t->barrier = ofi->barrier;
  t->mem_alloc = ofi->mem_alloc;
  t->mem_free = ofi->mem_free;
  t->mem_copy = ofi->mem_copy;
  t->algorithm = ofi->algorithm;
  t->subset = ofi->subset;
  t->probe = ofi->probe;
#ifdef OFI_V1_FULL
  t->struct_size = (uint32_t)sizeof(plait_transport_v1_t);
  t->allreduce_scaled = v1_allreduce_scaled;
  t->allreduce_spans = v1_allreduce_spans;
#else
  t->struct_size = (uint32_t)offsetof(plait_transport_v1_t, allreduce_scaled);
  t->allreduce_scaled = beyond_struct_size;
#endif
}
