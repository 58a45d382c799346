/*
 * "ofi_v1": the real ofi plugin as a plugin built before
 * plait_transport_v1_t.allreduce_scaled was appended. Its table is ofi's,
 * with its own name and a struct_size that ends before allreduce_scaled, so
 * the core must not read that field and must take its own path (copy in,
 * reduce in place, scale in a pass of its own). The ops_allreduce matrix
 * re-runs on it (tests/CMakeLists.txt) to check that path on a transport
 * that would otherwise fold.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "plait/transport.h"

__attribute__((visibility("default"))) plait_transport_v1_t plait_transport_v1;

/* Set beyond struct_size: a core that read it anyway fails loudly. */
static plait_result_t beyond_struct_size(void *state, const void *send, void *recv, size_t count,
                                         plait_dtype_t dtype, plait_op_t op, double postscale) {
  (void)state, (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)postscale;
  return PLAIT_ERR_INTERNAL;
}

/* Loaded with the library: the core reads the table after dlopen returns.
 * Without the ofi plugin the table stays zero, which the loader refuses
 * (ABI version 0) with the path in its message. */
__attribute__((constructor)) static void ofi_v1_load(void) {
  void *lib = dlopen(PLAIT_OFI_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
  const plait_transport_v1_t *ofi = lib ? dlsym(lib, PLAIT_TRANSPORT_SYMBOL_V1) : NULL;
  if (!ofi) return;
  plait_transport_v1 = *ofi;
  plait_transport_v1.name = "ofi_v1";
  plait_transport_v1.struct_size = (uint32_t)offsetof(plait_transport_v1_t, allreduce_scaled);
  plait_transport_v1.allreduce_scaled = beyond_struct_size;
}
