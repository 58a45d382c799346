/*
 * GPU test: the nccl plugin's allreduce, every op x dtype x a few counts,
 * against host references (values.h), at size 1 on one GPU and, where the
 * machine has more, at one rank per GPU. Skips (77) without a GPU.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "values.h"
#include "../../harness/transport_calls.h"

static const size_t counts[] = {1, 1000, (1u << 20) + 3};

static void one_case(tally_t *ty, const plait_transport_t *t, void *st, int n,
                     plait_dtype_t d, plait_op_t op, size_t count) {
  size_t es = plait_dtype_size_inline(d), bytes = count * es;
  char *host = malloc(bytes);
  void *dev = NULL;
  if (!host) {
    EXPECT(ty, 0, "out of host memory");
    return;
  }
  for (size_t i = 0; i < count; i++) ops_put(d, host, i, nv_value(d, op, ty->rank, n, i));
  cudaError_t e = cudaMalloc(&dev, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    EXPECT(ty, 0, "cudaMalloc/cudaMemcpy: %s", cudaGetErrorString(e));
    cudaFree(dev);
    free(host);
    return;
  }
  plait_result_t rc = tc_allreduce(t, st, dev, count, d, op);
  const char *dn = plait_dtype_name_inline(d), *on = plait_op_name_inline(op);
  if (d == PLAIT_INT16 || d == PLAIT_UINT16) {
    EXPECT(ty, rc == PLAIT_ERR_UNSUPPORTED && strstr(t->last_error(st), "16-bit"),
           "%s %s: want PLAIT_ERR_UNSUPPORTED naming the 16-bit integers, got %s: %s", on, dn,
           plait_result_name_inline(rc), t->last_error(st));
  } else if (d == PLAIT_BOOL && op == PLAIT_OP_AVERAGE) {
    EXPECT(ty, rc == PLAIT_ERR_INVALID_ARGUMENT, "average bool: want INVALID_ARGUMENT, got %s",
           plait_result_name_inline(rc));
  } else if (rc != PLAIT_SUCCESS) {
    EXPECT(ty, 0, "%s %s x %zu: %s: %s", on, dn, count, plait_result_name_inline(rc),
           t->last_error(st));
  } else if ((e = cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess) {
    EXPECT(ty, 0, "cudaMemcpy back: %s", cudaGetErrorString(e));
  } else {
    size_t bad = 0, first = 0;
    double tol = nv_tolerance(d, n), got = 0, want = 0;
    for (size_t i = 0; i < count; i++) {
      double g = ops_get(d, host, i), w = nv_reference(d, op, n, i);
      if (d == PLAIT_BOOL) g = g != 0;
      if (!(fabs(g - w) <= tol) && bad++ == 0) first = i, got = g, want = w;
    }
    EXPECT(ty, bad == 0, "%s %s x %zu at %d ranks: %zu wrong, first [%zu] = %g, want %g", on,
           dn, count, n, bad, first, got, want);
  }
  cudaFree(dev);
  free(host);
}

static int body(int rank, int n, const plait_transport_t *t, void *st, void *arg) {
  (void)arg;
  tally_t ty = {rank, 0, 0};
  for (int d = 0; d < PLAIT_DTYPE_COUNT_; d++)
    for (int op = 0; op < PLAIT_OP_COUNT_; op++)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        one_case(&ty, t, st, n, (plait_dtype_t)d, (plait_op_t)op, counts[c]);
  nt_say(rank, "allreduce at %d rank(s): %d checks, %d failed", n, ty.checks, ty.failed);
  return ty.failed != 0;
}

int main(void) {
  char why[256];
  int gpus = nt_device_count(why, sizeof why);
  if (gpus < 1) {
    printf("SKIP: no GPU here: %s\n", why);
    return NT_SKIP;
  }
  int failed = nt_run(1, 600, body, NULL);
  if (gpus > 1) failed |= nt_run(gpus < NT_MAX_RANKS ? gpus : NT_MAX_RANKS, 600, body, NULL);
  else printf("one GPU: the multi-rank run needs two or more (NCCL refuses two ranks on one GPU)\n");
  printf("nccl_allreduce: %s\n", failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
