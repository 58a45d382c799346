/*
 * The element-wise kernels a plugin needs (plait_reduce_fn, plait_scale_fn,
 * plait_divide_fn), for float32 only: the benchmark reduces float32 and
 * does not link the core, whose kernels are internal. Any other dtype is
 * PLAIT_ERR_UNSUPPORTED. Thread-safe, no state.
 */
#ifndef BENCH_F32_KERNELS_H
#define BENCH_F32_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "plait/plait.h"

plait_result_t bench_f32_reduce(plait_dtype_t dtype, plait_op_t op, void *dst, const void *a,
                                const void *b, size_t count);
plait_result_t bench_f32_scale(plait_dtype_t dtype, void *dst, const void *src, size_t count,
                               double factor);
plait_result_t bench_f32_divide(plait_dtype_t dtype, void *dst, const void *src, size_t count,
                                uint32_t divisor);

#endif
