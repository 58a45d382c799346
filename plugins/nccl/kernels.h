/*
 * The plugin's one CUDA kernel, called from C: batch_copy's copy / scale /
 * fill over many spans in one launch (kernels.cu, compiled by nvcc; the rest
 * of the plugin is C).
 */
#ifndef PLAIT_NCCL_KERNELS_H
#define PLAIT_NCCL_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues one launch on stream over the n spans of tab (device memory,
 * nc_span_ent_t, first_chunk increasing from 0, every span's bytes > 0),
 * `chunks` chunks in all. A span with src 0 is filled with the element bits
 * `fill` (low element-size bytes); the others are copied (factor 1.0: bytes,
 * bit for bit; dst == src then writes nothing) or scaled as elem.h does it.
 * With divisor != 0 every span is instead divided by it (src set on every
 * span; factor unused), as elem.h's nc_div_*. dtype is a plait dtype (bool
 * only with factor 1.0 and no divisor). Returns the launch's CUDA error
 * (cudaSuccess once enqueued). Clears the thread's last error first. */
cudaError_t nc_launch_batch(const nc_span_ent_t *tab, uint32_t n, uint64_t chunks, int dtype,
                            double factor, uint32_t divisor, uint64_t fill, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
