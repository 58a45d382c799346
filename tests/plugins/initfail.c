/* Broken: init fails with its own message. */
#include "common.h"
static const char *last_error(void *state) {
  (void)state;
  return "initfail: the fabric is on fire";
}
static plait_result_t init(const plait_transport_init_args_t *a, void **s) {
  (void)a, (void)s;
  return PLAIT_ERR_TRANSPORT;
}
FX_EXPORT const plait_transport_v1_t plait_transport_v1 = {
    PLAIT_TRANSPORT_V1_ABI_VERSION, sizeof(plait_transport_v1_t), "initfail", PLAIT_CAP_HOST_MEMORY,
    0, 0, init, fx_finalize, last_error, fx_allreduce, fx_allgatherv, fx_broadcast, fx_alltoallv,
    fx_reducescatter, fx_barrier, fx_alloc, fx_free, fx_copy, NULL, NULL, NULL};
