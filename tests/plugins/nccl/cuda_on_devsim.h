/*
 * The few CUDA runtime calls nccl_device_ops.c makes, on the devsim test
 * transport's simulated device (tests/plugins/fixtures/devsim.h) instead of a GPU:
 * nccl_device_ops_devsim builds the same program with NT_ON_DEVSIM, so that
 * without a GPU its arithmetic, its references and its use of the public
 * API are checked against the core's device path (devsim's "device"
 * pointers fault if anything but devsim touches them). Only what the
 * program uses, with CUDA's names; the user stream's 100 ms host function
 * followed by a cudaMemcpyAsync becomes one devsim write delayed by 100 ms
 * on that stream.
 */
#ifndef PLAIT_NCCL_CUDA_ON_DEVSIM_H
#define PLAIT_NCCL_CUDA_ON_DEVSIM_H

#include <stdlib.h>
#include <string.h>

#define DEVSIM_API_LOADER
#include "../fixtures/devsim.h"

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void (*cudaHostFn_t)(void *);
enum { cudaSuccess = 0, cudaErrorDevsim = 1 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
#define cudaStreamNonBlocking 1
#define CUDART_CB

static devsim_api_t nt_dv;
static int nt_dv_hold_ms; /* the delay of the next cudaMemcpyAsync */

static inline const char *cudaGetErrorString(cudaError_t e) {
  return e ? "devsim call failed" : "no error";
}
static inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorDevsim; }
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaMalloc(void **p, size_t bytes) {
  *p = nt_dv.alloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorDevsim;
}
static inline cudaError_t cudaFree(void *p) {
  if (p) nt_dv.free(p);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k) {
  int rc = k == cudaMemcpyHostToDevice ? nt_dv.to_device(dst, src, n) : nt_dv.to_host(dst, src, n);
  return rc ? cudaErrorDevsim : cudaSuccess;
}
static inline cudaError_t cudaMemset(void *p, int v, size_t n) {
  unsigned char *tmp = malloc(n ? n : 1);
  if (!tmp) return cudaErrorDevsim;
  memset(tmp, v, n);
  int rc = nt_dv.to_device(p, tmp, n);
  free(tmp);
  return rc ? cudaErrorDevsim : cudaSuccess;
}
static inline cudaError_t cudaMallocHost(void **p, size_t n) {
  *p = malloc(n);
  return *p ? cudaSuccess : cudaErrorDevsim;
}
static inline cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  (void)flags;
  *s = nt_dv.stream_create();
  return *s ? cudaSuccess : cudaErrorDevsim;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  nt_dv.stream_destroy(s);
  return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  nt_dv.stream_synchronize(s);
  return cudaSuccess;
}
/* Only the program's use: a host function that holds the stream 100 ms. */
static inline cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg) {
  (void)s, (void)fn, (void)arg;
  nt_dv_hold_ms = 100;
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                          enum cudaMemcpyKind k, cudaStream_t s) {
  if (k != cudaMemcpyHostToDevice) return cudaErrorDevsim;
  int rc = nt_dv.stream_enqueue_write(s, dst, src, n, nt_dv_hold_ms);
  nt_dv_hold_ms = 0;
  return rc ? cudaErrorDevsim : cudaSuccess;
}

/* Loads devsim's helpers from the file plait will load, and points plait
 * at it. 0, or -1 with the reason printed. */
static inline int nt_devsim_setup(void) {
  char err[512];
  if (devsim_api_load(PLAIT_DEVSIM_SO, &nt_dv, err, sizeof err)) {
    printf("FAILED: cannot load devsim's helpers: %s\n", err);
    return -1;
  }
  setenv("PLAIT_TRANSPORT", "devsim", 1);
  setenv("PLAIT_PLUGIN_PATH", PLAIT_DEVSIM_DIR, 1);
  return 0;
}

#endif
