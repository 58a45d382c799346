/*
 * GPU test through the public C API at size 1: PLAIT_TRANSPORT=nccl starts,
 * names itself, and what the core runs on device memory today works: one
 * tensor in place, and many small tensors fused (the core's copies into its
 * device fusion buffer go through the plugin's mem_copy), out of place, for
 * sum, min and max; a host tensor is refused with a message naming host
 * memory. Skips (77) without a GPU.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_ranks.h"
#include "plait/dtypes.h"
#include "plait/plait.h"

#define NT 24   /* tensors in the fused round */
#define LEN 999 /* floats each: odd, so the fusion layout pads */

static int checks, failed;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      failed++;                                                                \
      printf("FAILED line %d: ", __LINE__);                                    \
      printf(__VA_ARGS__);                                                     \
      printf("\n");                                                            \
    }                                                                          \
  } while (0)

static void device_tensor(plait_tensor_t *t, void *data, size_t count) {
  plait_tensor_1d(t, data, count, PLAIT_FLOAT32);
  t->device = 0;
}

/* NT tensors submitted together, each out of place; at size 1 every output
 * must equal its input (any misplaced copy shows). */
static void fused_round(plait_op_t op, float *host) {
  float *in[NT], *out[NT];
  plait_handle_t *h[NT];
  char names[NT][32];
  for (int k = 0; k < NT; k++) {
    in[k] = out[k] = NULL;
    h[k] = NULL;
    for (int i = 0; i < LEN; i++) host[i] = (float)(k * 1000 + i) * (k % 2 ? -1.0f : 0.5f);
    int ok = cudaMalloc((void **)&in[k], LEN * 4) == cudaSuccess &&
             cudaMalloc((void **)&out[k], LEN * 4) == cudaSuccess &&
             cudaMemcpy(in[k], host, LEN * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemset(out[k], 0x7f, LEN * 4) == cudaSuccess;
    CHECK(ok, "device buffers for tensor %d", k);
    plait_tensor_t ti, to;
    device_tensor(&ti, in[k], LEN);
    device_tensor(&to, out[k], LEN);
    snprintf(names[k], sizeof names[k], "%s.%d", plait_op_name_inline(op), k);
    plait_result_t rc = plait_allreduce_async(names[k], &ti, &to, op, NULL, &h[k]);
    CHECK(rc == PLAIT_SUCCESS, "allreduce_async %s: %s", names[k], plait_last_error());
  }
  for (int k = 0; k < NT; k++) {
    if (!h[k]) continue;
    plait_result_t rc = plait_wait(h[k], 120);
    CHECK(rc == PLAIT_SUCCESS, "wait %s: %s", names[k], plait_last_error());
    plait_release(h[k]);
    if (rc != PLAIT_SUCCESS || cudaMemcpy(host, out[k], LEN * 4, cudaMemcpyDeviceToHost))
      continue;
    int bad = 0;
    for (int i = 0; i < LEN; i++) bad += host[i] != (float)(k * 1000 + i) * (k % 2 ? -1.0f : 0.5f);
    CHECK(bad == 0, "%s: %d of %d elements wrong", names[k], bad, LEN);
  }
  for (int k = 0; k < NT; k++) cudaFree(in[k]), cudaFree(out[k]);
}

int main(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    printf("SKIP: no GPU here: cudaGetDeviceCount: %s\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return NT_SKIP;
  }
  nt_api_env();
  plait_result_t rc = plait_init();
  CHECK(rc == PLAIT_SUCCESS, "plait_init: %s", plait_last_error());
  if (rc != PLAIT_SUCCESS) return 1;
  const char *name = NULL;
  CHECK(plait_transport_name(&name) == PLAIT_SUCCESS && name && !strcmp(name, "nccl"),
        "transport name %s", name ? name : "(none)");
  float *host = malloc(LEN * 4), *dev = NULL;
  /* one tensor in place */
  for (int i = 0; i < LEN; i++) host[i] = (float)i;
  CHECK(cudaMalloc((void **)&dev, LEN * 4) == cudaSuccess &&
        cudaMemcpy(dev, host, LEN * 4, cudaMemcpyHostToDevice) == cudaSuccess, "device buffer");
  plait_tensor_t t;
  device_tensor(&t, dev, LEN);
  plait_handle_t *h = NULL;
  rc = plait_allreduce_async("single", &t, &t, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 120);
  CHECK(rc == PLAIT_SUCCESS, "in-place allreduce: %s", plait_last_error());
  plait_release(h);
  memset(host, 0, LEN * 4);
  if (rc == PLAIT_SUCCESS && !cudaMemcpy(host, dev, LEN * 4, cudaMemcpyDeviceToHost)) {
    int bad = 0;
    for (int i = 0; i < LEN; i++) bad += host[i] != (float)i;
    CHECK(bad == 0, "in-place allreduce at size 1 changed %d elements", bad);
  }
  cudaFree(dev);
  fused_round(PLAIT_OP_SUM, host);
  fused_round(PLAIT_OP_MIN, host);
  fused_round(PLAIT_OP_MAX, host);
  /* a host tensor: refused by the plugin, with a message */
  plait_tensor_t ht;
  plait_tensor_1d(&ht, host, LEN, PLAIT_FLOAT32);
  h = NULL;
  rc = plait_allreduce_async("host", &ht, &ht, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 120);
  CHECK(rc != PLAIT_SUCCESS && strstr(plait_last_error(), "host memory"),
        "a host tensor on nccl: want an error naming host memory, got %s: %s",
        plait_result_name_inline(rc), plait_last_error());
  plait_release(h);
  free(host);
  CHECK(plait_shutdown() == PLAIT_SUCCESS, "plait_shutdown: %s", plait_last_error());
  printf("%d passed, %d failed\n", checks - failed, failed);
  return failed ? 1 : 0;
}
