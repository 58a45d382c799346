/* A transport for device memory only that runs nothing: for the API's
 * checks of where a tensor lives (host tensors refused, a tensor on another
 * device refused, what needs batch_copy refused). Its state says it is on
 * device 1; it has no batch_copy. */
#include "common.h"

static int device_of_state = 1;

static plait_result_t devonly_init(const plait_transport_init_args_t *a, void **state) {
  (void)a;
  *state = &device_of_state;
  return PLAIT_SUCCESS;
}

static int devonly_device(void *state) { return *(const int *)state; }

FX_EXPORT const plait_transport_v1_t plait_transport_v1 = {
    PLAIT_TRANSPORT_V1_ABI_VERSION, sizeof(plait_transport_v1_t), "devonly",
    PLAIT_CAP_DEVICE_MEMORY | PLAIT_CAP_ALLREDUCE, 0, 0, devonly_init, FX_TABLE_REST,
    .device = devonly_device};
