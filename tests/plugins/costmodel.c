/* A one-rank transport with a cost model instead of a network, for the
 * autotune convergence test (tests/unit/test_autotune_ranks.c): each
 * allreduce of B bytes advances a virtual clock by ALPHA + BETA * B +
 * GAMMA * B^2 seconds (a per-call cost, a per-byte cost, and a cost that
 * grows faster than the bytes, as cache misses on a large fused buffer do).
 * Fused responses of B* = sqrt(ALPHA / GAMMA) = 1 MiB move a step fastest,
 * so with many small tensors the best fusion threshold is 1M. The data is
 * left as it is (one rank: the sum is the data). */
#include <string.h>

#include "common.h"

#define ALPHA 100e-6
#define BETA 1e-9
#define GAMMA (ALPHA / (1048576.0 * 1048576.0))

static double virtual_now; /* seconds; advanced only by the coordinator thread */

/* The clock the test hands to the tuner (plait_ls_test_clock). */
FX_EXPORT double costmodel_now(void) { return virtual_now; }

static plait_result_t cm_init(const plait_transport_init_args_t *a, void **state) {
  if (a->nranks != 1) return PLAIT_ERR_UNSUPPORTED;
  virtual_now = 0;
  *state = (void *)a;
  return PLAIT_SUCCESS;
}

static plait_result_t cm_allreduce(void *s, void *b, size_t n, plait_dtype_t d, plait_op_t o) {
  (void)s, (void)b, (void)o;
  double bytes = (double)n * (d == PLAIT_FLOAT64 || d == PLAIT_INT64 ? 8 : 4);
  virtual_now += ALPHA + BETA * bytes + GAMMA * bytes * bytes;
  return PLAIT_SUCCESS;
}

static plait_result_t cm_barrier(void *s) {
  (void)s;
  return PLAIT_SUCCESS;
}

static plait_result_t cm_copy(void *s, void *d, const void *src, size_t n, plait_copy_kind_t k) {
  (void)s, (void)k;
  memmove(d, src, n);
  return PLAIT_SUCCESS;
}

FX_EXPORT const plait_transport_v1_t plait_transport_v1 = {
    PLAIT_TRANSPORT_V1_ABI_VERSION, PLAIT_TRANSPORT_V1_MIN_SIZE, "costmodel",
    PLAIT_CAP_HOST_MEMORY, 0, 0, cm_init,
    fx_finalize, fx_last_error, cm_allreduce, fx_allgatherv, fx_broadcast,
    fx_alltoallv, fx_reducescatter, cm_barrier, fx_alloc, fx_free, cm_copy, NULL, NULL};
