/* float32 kernels for the transport benchmark: see f32_kernels.h. dst may
 * equal an input but never partly overlaps one, so the loops carry no
 * dependence (GCC ivdep: no runtime alias check; vectorised at -O3, the
 * Release build ci/bench transport makes). */
#include "f32_kernels.h"

#if defined(__GNUC__) && !defined(__clang__)
#define BENCH_IVDEP _Pragma("GCC ivdep")
#else
#define BENCH_IVDEP
#endif

#define BENCH_LOOP(expr)                                                       \
  do {                                                                         \
    BENCH_IVDEP for (size_t i = 0; i < count; i++) d[i] = (expr);               \
  } while (0)

plait_result_t bench_f32_reduce(plait_dtype_t dtype, plait_op_t op, void *dst, const void *a,
                                const void *b, size_t count) {
  if (dtype != PLAIT_FLOAT32) return PLAIT_ERR_UNSUPPORTED;
  float *d = dst;
  const float *x = a, *y = b;
  switch (op) {
    case PLAIT_OP_SUM:
    case PLAIT_OP_AVERAGE: BENCH_LOOP(x[i] + y[i]); break;
    case PLAIT_OP_PRODUCT: BENCH_LOOP(x[i] * y[i]); break;
    case PLAIT_OP_MIN: BENCH_LOOP(x[i] < y[i] ? x[i] : y[i]); break;
    case PLAIT_OP_MAX: BENCH_LOOP(x[i] > y[i] ? x[i] : y[i]); break;
    default: return PLAIT_ERR_INVALID_ARGUMENT;
  }
  return PLAIT_SUCCESS;
}

plait_result_t bench_f32_scale(plait_dtype_t dtype, void *dst, const void *src, size_t count,
                               double factor) {
  if (dtype != PLAIT_FLOAT32) return PLAIT_ERR_UNSUPPORTED;
  float *d = dst, f = (float)factor;
  const float *s = src;
  BENCH_LOOP(s[i] * f);
  return PLAIT_SUCCESS;
}

plait_result_t bench_f32_divide(plait_dtype_t dtype, void *dst, const void *src, size_t count,
                                uint32_t divisor) {
  if (dtype != PLAIT_FLOAT32) return PLAIT_ERR_UNSUPPORTED;
  float *d = dst, n = (float)divisor;
  const float *s = src;
  BENCH_LOOP(s[i] / n);
  return PLAIT_SUCCESS;
}
