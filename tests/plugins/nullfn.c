/* Broken: leaves alltoallv NULL. */
#include "common.h"
static plait_result_t init(const plait_transport_init_args_t *a, void **s) {
  (void)a, (void)s;
  return PLAIT_SUCCESS;
}
FX_EXPORT const plait_transport_v1_t plait_transport_v1 = {
    PLAIT_TRANSPORT_V1_ABI_VERSION, sizeof(plait_transport_v1_t), "nullfn", PLAIT_CAP_HOST_MEMORY, 0,
    0, init, fx_finalize, fx_last_error, fx_allreduce, fx_allgatherv, fx_broadcast, NULL,
    fx_reducescatter, fx_barrier, fx_alloc, fx_free, fx_copy, NULL, NULL, NULL};
