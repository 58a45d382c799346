/* Broken: its table says it is smaller than version 1's. */
#include "common.h"
static plait_result_t init(const plait_transport_init_args_t *a, void **s) {
  (void)a, (void)s;
  return PLAIT_SUCCESS;
}
FX_EXPORT const plait_transport_v1_t plait_transport_v1 = {
    PLAIT_TRANSPORT_V1_ABI_VERSION, 24, "small", PLAIT_CAP_HOST_MEMORY, 0, 0, init, FX_TABLE_REST};
