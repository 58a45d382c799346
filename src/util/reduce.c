/*
 * The core's element-wise kernels: reduce (a op b), scale (x * factor),
 * divide (x / n), and reduce-then-scale in one pass. Semantics are in reduce.h.
 *
 * How the loops are built. Each (dtype, op) pair gets one kernel from a macro:
 * an always-inline block function with one element-wise loop, called with the
 * constant PLAIT_BLOCK for every full block and once more for the tail. The
 * constant trip count lets GCC vectorise at -O2 (whose "very cheap" cost
 * model refuses loops that need a scalar epilogue or alias checks); at -O3
 * the tail vectorises too. dst may equal an input but never partly overlaps
 * one, so no iteration reads what an earlier one wrote: PLAIT_IVDEP tells the
 * compiler so, and it skips the runtime alias check. (restrict would be a
 * lie when dst == a.)
 *
 * float16 and bfloat16 are converted to float32, combined, and rounded back
 * element by element in the same kind of loop; the conversions in half.h are
 * branch-free so the whole loop vectorises.
 *
 * Signed SUM and PRODUCT run the unsigned kernel of the same width: two's
 * complement wrap-around is exactly unsigned arithmetic, which C defines
 * (signed overflow it does not). Narrow types are widened to unsigned int,
 * not int, before multiplying (65535 * 65535 overflows int).
 */
#include "util/reduce.h"

#include <stdint.h>

#include "plait/dtypes.h"
#include "util/half.h"

/* Clang has no plain ivdep: "vectorize(assume_safety)" also forces
 * vectorisation and warns (-Wpass-failed) wherever it cannot, e.g. int64 MIN
 * without SSE4.2 or at -O1. Clang vectorises these loops at -O2 anyway,
 * with its own runtime alias check. */
#if defined(__GNUC__) && !defined(__clang__)
#define PLAIT_IVDEP _Pragma("GCC ivdep")
#else
#define PLAIT_IVDEP
#endif

#if defined(__GNUC__)
#define PLAIT_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define PLAIT_ALWAYS_INLINE inline
#endif

/* Each kernel is also built for AVX2, and the loader picks that clone on a
 * CPU that has it (GCC's target_clones: an ifunc, resolved once). The
 * default build targets baseline x86-64 (SSE2, 16-byte vectors), and the
 * reductions of data in cache (ofi/shm's direct reads reduce 256 KiB chunks
 * while they are in L2) run at the vector width. Measured on 2 ranks over
 * ofi/shm, 200 x 64 KiB a step, interleaved launches: the transport's time
 * per step fell from 2.15 to 1.93 ms (-march=native: 1.89). An AVX-512
 * clone (512-bit vectors, unrolled) was slower than AVX2 there (2.00 ms).
 * Every clone computes the same IEEE operation element by element, so the
 * results are the same bit for bit on every CPU; reduce.c is built with
 * -ffp-contract=off, so no multiply and add are ever fused into one.
 * Sanitizer builds have no clones: the clones' resolver runs while the
 * program is relocated, before the sanitizer's runtime is set up, and
 * ThreadSanitizer's instrumentation of it crashed there. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && \
    !defined(PLAIT_NO_KERNEL_CLONES) && !defined(__SANITIZE_THREAD__) &&                 \
    !defined(__SANITIZE_ADDRESS__)
#define PLAIT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PLAIT_CLONES
#endif

/* Elements per block: a multiple of every vector width. */
#define PLAIT_BLOCK 256

_Static_assert(PLAIT_DTYPE_COUNT_ == 11 && PLAIT_OP_COUNT_ == 5,
               "a dtype or op was added: extend the kernel tables in reduce.c");

/* ------------------------------------------------------------------------ */
/* Kernel generators                                                         */
/* ------------------------------------------------------------------------ */

typedef void (*plait_binary_kernel_t)(void *dst, const void *a, const void *b,
                                      size_t n);

/* dst[i] = EXPR, where EXPR reads the elements x = a[i] and y = b[i]. */
#define PLAIT_BINARY_KERNEL(name, T, EXPR)                                     \
  static PLAIT_ALWAYS_INLINE void name##_block(T *dst, const T *a,            \
                                               const T *b, size_t n) {         \
    PLAIT_IVDEP                                                                \
    for (size_t i = 0; i < n; i++) {                                           \
      const T x = a[i];                                                        \
      const T y = b[i];                                                        \
      dst[i] = (T)(EXPR);                                                      \
    }                                                                          \
  }                                                                            \
  static PLAIT_CLONES void name(void *dst, const void *a, const void *b,      \
                                size_t n) {                                    \
    T *pd = dst;                                                               \
    const T *pa = a;                                                           \
    const T *pb = b;                                                           \
    size_t i = 0;                                                              \
    for (; n - i >= PLAIT_BLOCK; i += PLAIT_BLOCK)                             \
      name##_block(pd + i, pa + i, pb + i, PLAIT_BLOCK);                       \
    name##_block(pd + i, pa + i, pb + i, n - i);                               \
  }

/* dst[i] = EXPR, where EXPR reads x = src[i] and the parameter p (type P). */
#define PLAIT_UNARY_KERNEL(name, T, P, EXPR)                                   \
  static PLAIT_ALWAYS_INLINE void name##_block(T *dst, const T *src,          \
                                               size_t n, P p) {                \
    PLAIT_IVDEP                                                                \
    for (size_t i = 0; i < n; i++) {                                           \
      const T x = src[i];                                                      \
      dst[i] = (T)(EXPR);                                                      \
    }                                                                          \
  }                                                                            \
  static PLAIT_CLONES void name(void *dst, const void *src, size_t n, P p) {   \
    T *pd = dst;                                                               \
    const T *ps = src;                                                         \
    size_t i = 0;                                                              \
    for (; n - i >= PLAIT_BLOCK; i += PLAIT_BLOCK)                             \
      name##_block(pd + i, ps + i, PLAIT_BLOCK, p);                            \
    name##_block(pd + i, ps + i, n - i, p);                                    \
  }

/* ------------------------------------------------------------------------ */
/* Element operations                                                        */
/* ------------------------------------------------------------------------ */

/* Wrapping arithmetic in the unsigned type W (unsigned int for <= 32 bits). */
#define PLAIT_WRAP_ADD(W) ((W)x + (W)y)
#define PLAIT_WRAP_MUL(W) ((W)x * (W)y)
/* Exact MIN/MAX; equal inputs give x. */
#define PLAIT_INT_MIN (y < x ? y : x)
#define PLAIT_INT_MAX (y > x ? y : x)
/* bool: any nonzero byte is true; results are 0 or 1. */
#define PLAIT_BOOL_OR (((unsigned)x | (unsigned)y) != 0u)
#define PLAIT_BOOL_AND ((x != 0) & (y != 0))

/* Floating MIN/MAX: a NaN x fails the comparison and falls through to x, a
 * NaN y is picked explicitly, so either NaN gives NaN. Equal inputs (+0 and
 * -0) give x. Two statements, not a nested ?:, which GCC 12 turns into a
 * branch (and then does not vectorise) in the float16 kernels. */
#define PLAIT_FLOAT_MIN_MAX(T, suffix)                                         \
  static inline T plait_min_##suffix(T x, T y) {                               \
    const T m = y < x ? y : x;                                                 \
    return y != y ? y : m;                                                     \
  }                                                                            \
  static inline T plait_max_##suffix(T x, T y) {                               \
    const T m = y > x ? y : x;                                                 \
    return y != y ? y : m;                                                     \
  }
PLAIT_FLOAT_MIN_MAX(float, f32)
PLAIT_FLOAT_MIN_MAX(double, f64)

/* ------------------------------------------------------------------------ */
/* Reduce kernels                                                            */
/* ------------------------------------------------------------------------ */

/* SUM and PRODUCT, also used for the signed types of the same width. */
PLAIT_BINARY_KERNEL(plait_u8_sum, uint8_t, PLAIT_WRAP_ADD(unsigned))
PLAIT_BINARY_KERNEL(plait_u16_sum, uint16_t, PLAIT_WRAP_ADD(unsigned))
PLAIT_BINARY_KERNEL(plait_u32_sum, uint32_t, PLAIT_WRAP_ADD(uint32_t))
PLAIT_BINARY_KERNEL(plait_u64_sum, uint64_t, PLAIT_WRAP_ADD(uint64_t))
PLAIT_BINARY_KERNEL(plait_u8_prod, uint8_t, PLAIT_WRAP_MUL(unsigned))
PLAIT_BINARY_KERNEL(plait_u16_prod, uint16_t, PLAIT_WRAP_MUL(unsigned))
PLAIT_BINARY_KERNEL(plait_u32_prod, uint32_t, PLAIT_WRAP_MUL(uint32_t))
PLAIT_BINARY_KERNEL(plait_u64_prod, uint64_t, PLAIT_WRAP_MUL(uint64_t))

PLAIT_BINARY_KERNEL(plait_u8_min, uint8_t, PLAIT_INT_MIN)
PLAIT_BINARY_KERNEL(plait_u8_max, uint8_t, PLAIT_INT_MAX)
PLAIT_BINARY_KERNEL(plait_i8_min, int8_t, PLAIT_INT_MIN)
PLAIT_BINARY_KERNEL(plait_i8_max, int8_t, PLAIT_INT_MAX)
PLAIT_BINARY_KERNEL(plait_u16_min, uint16_t, PLAIT_INT_MIN)
PLAIT_BINARY_KERNEL(plait_u16_max, uint16_t, PLAIT_INT_MAX)
PLAIT_BINARY_KERNEL(plait_i16_min, int16_t, PLAIT_INT_MIN)
PLAIT_BINARY_KERNEL(plait_i16_max, int16_t, PLAIT_INT_MAX)
PLAIT_BINARY_KERNEL(plait_i32_min, int32_t, PLAIT_INT_MIN)
PLAIT_BINARY_KERNEL(plait_i32_max, int32_t, PLAIT_INT_MAX)
PLAIT_BINARY_KERNEL(plait_i64_min, int64_t, PLAIT_INT_MIN)
PLAIT_BINARY_KERNEL(plait_i64_max, int64_t, PLAIT_INT_MAX)

PLAIT_BINARY_KERNEL(plait_f32_sum, float, x + y)
PLAIT_BINARY_KERNEL(plait_f32_prod, float, x * y)
PLAIT_BINARY_KERNEL(plait_f32_min, float, plait_min_f32(x, y))
PLAIT_BINARY_KERNEL(plait_f32_max, float, plait_max_f32(x, y))
PLAIT_BINARY_KERNEL(plait_f64_sum, double, x + y)
PLAIT_BINARY_KERNEL(plait_f64_prod, double, x * y)
PLAIT_BINARY_KERNEL(plait_f64_min, double, plait_min_f64(x, y))
PLAIT_BINARY_KERNEL(plait_f64_max, double, plait_max_f64(x, y))

/* float16 / bfloat16: widen both, combine in float32, round back. */
#define PLAIT_H(OPEXPR)                                                        \
  plait_float_to_half(OPEXPR(plait_half_to_float(x), plait_half_to_float(y)))
#define PLAIT_BF(OPEXPR)                                                       \
  plait_float_to_bf16(OPEXPR(plait_bf16_to_float(x), plait_bf16_to_float(y)))
#define PLAIT_ADDF(u, v) ((u) + (v))
#define PLAIT_MULF(u, v) ((u) * (v))

PLAIT_BINARY_KERNEL(plait_f16_sum, uint16_t, PLAIT_H(PLAIT_ADDF))
PLAIT_BINARY_KERNEL(plait_f16_prod, uint16_t, PLAIT_H(PLAIT_MULF))
PLAIT_BINARY_KERNEL(plait_f16_min, uint16_t, PLAIT_H(plait_min_f32))
PLAIT_BINARY_KERNEL(plait_f16_max, uint16_t, PLAIT_H(plait_max_f32))
PLAIT_BINARY_KERNEL(plait_bf16_sum, uint16_t, PLAIT_BF(PLAIT_ADDF))
PLAIT_BINARY_KERNEL(plait_bf16_prod, uint16_t, PLAIT_BF(PLAIT_MULF))
PLAIT_BINARY_KERNEL(plait_bf16_min, uint16_t, PLAIT_BF(plait_min_f32))
PLAIT_BINARY_KERNEL(plait_bf16_max, uint16_t, PLAIT_BF(plait_max_f32))

PLAIT_BINARY_KERNEL(plait_bool_or, uint8_t, PLAIT_BOOL_OR)
PLAIT_BINARY_KERNEL(plait_bool_and, uint8_t, PLAIT_BOOL_AND)

/* Indexed [dtype][op]; NULL where the pair is not defined. */
#define PLAIT_ROW(sum, min, max, prod)                                         \
  {[PLAIT_OP_SUM] = sum, [PLAIT_OP_AVERAGE] = sum, [PLAIT_OP_MIN] = min,       \
   [PLAIT_OP_MAX] = max, [PLAIT_OP_PRODUCT] = prod}

static const plait_binary_kernel_t
    plait_reduce_kernels[PLAIT_DTYPE_COUNT_][PLAIT_OP_COUNT_] = {
        [PLAIT_UINT8] = PLAIT_ROW(plait_u8_sum, plait_u8_min, plait_u8_max,
                                  plait_u8_prod),
        [PLAIT_INT8] = PLAIT_ROW(plait_u8_sum, plait_i8_min, plait_i8_max,
                                 plait_u8_prod),
        [PLAIT_UINT16] = PLAIT_ROW(plait_u16_sum, plait_u16_min,
                                   plait_u16_max, plait_u16_prod),
        [PLAIT_INT16] = PLAIT_ROW(plait_u16_sum, plait_i16_min, plait_i16_max,
                                  plait_u16_prod),
        [PLAIT_INT32] = PLAIT_ROW(plait_u32_sum, plait_i32_min, plait_i32_max,
                                  plait_u32_prod),
        [PLAIT_INT64] = PLAIT_ROW(plait_u64_sum, plait_i64_min, plait_i64_max,
                                  plait_u64_prod),
        [PLAIT_FLOAT16] = PLAIT_ROW(plait_f16_sum, plait_f16_min,
                                    plait_f16_max, plait_f16_prod),
        [PLAIT_BFLOAT16] = PLAIT_ROW(plait_bf16_sum, plait_bf16_min,
                                     plait_bf16_max, plait_bf16_prod),
        [PLAIT_FLOAT32] = PLAIT_ROW(plait_f32_sum, plait_f32_min,
                                    plait_f32_max, plait_f32_prod),
        [PLAIT_FLOAT64] = PLAIT_ROW(plait_f64_sum, plait_f64_min,
                                    plait_f64_max, plait_f64_prod),
        /* AVERAGE on bool is not defined. */
        [PLAIT_BOOL] = {[PLAIT_OP_SUM] = plait_bool_or,
                        [PLAIT_OP_MIN] = plait_bool_and,
                        [PLAIT_OP_MAX] = plait_bool_or,
                        [PLAIT_OP_PRODUCT] = plait_bool_and},
};

/* ------------------------------------------------------------------------ */
/* Scale kernels                                                             */
/* ------------------------------------------------------------------------ */

typedef void (*plait_scale_kernel_t)(void *dst, const void *src, size_t n,
                                     double factor);

/* r clamped to [lo, hi], NaN to 0; the kernel's cast to the integer type
 * then truncates toward zero, always in range. lo and hi must be exact in
 * double (true up to 32-bit types). */
static inline double plait_sat(double r, double lo, double hi) {
  r = r != r ? 0.0 : r;
  r = r < lo ? lo : r;
  return r > hi ? hi : r;
}

/* int64: 2^63 is a double but INT64_MAX is not, so compare against powers of
 * two; -2^63 itself converts exactly. */
static inline int64_t plait_sat_i64(double r) {
  if (r != r) return 0;
  if (r >= 0x1p63) return INT64_MAX;
  if (r < -0x1p63) return INT64_MIN;
  return (int64_t)r;
}

/*
 * Horovod 0.28's CPU scaling (ScaleBufferCPUImpl), bit for bit: integers are
 * multiplied in double and truncated toward zero; float32 and float16 are
 * multiplied in float by the factor rounded to float (float16 converted to
 * float and rounded back to nearest even), float64 in double. bfloat16 (which
 * Horovod cannot scale on the CPU) follows float16. Where Horovod's integer
 * cast would overflow (undefined behaviour in C++), plait saturates.
 */
#define PLAIT_SCALE_INT(LO, HI) plait_sat((double)x * p, LO, HI)
#define PLAIT_SCALE_H(TO_F, FROM_F) FROM_F((float)p * TO_F(x))

PLAIT_UNARY_KERNEL(plait_u8_scale, uint8_t, double,
                   PLAIT_SCALE_INT(0.0, UINT8_MAX))
PLAIT_UNARY_KERNEL(plait_i8_scale, int8_t, double,
                   PLAIT_SCALE_INT(INT8_MIN, INT8_MAX))
PLAIT_UNARY_KERNEL(plait_u16_scale, uint16_t, double,
                   PLAIT_SCALE_INT(0.0, UINT16_MAX))
PLAIT_UNARY_KERNEL(plait_i16_scale, int16_t, double,
                   PLAIT_SCALE_INT(INT16_MIN, INT16_MAX))
PLAIT_UNARY_KERNEL(plait_i32_scale, int32_t, double,
                   PLAIT_SCALE_INT(INT32_MIN, INT32_MAX))
PLAIT_UNARY_KERNEL(plait_i64_scale, int64_t, double,
                   plait_sat_i64((double)x * p))
PLAIT_UNARY_KERNEL(plait_f16_scale, uint16_t, double,
                   PLAIT_SCALE_H(plait_half_to_float, plait_float_to_half))
PLAIT_UNARY_KERNEL(plait_bf16_scale, uint16_t, double,
                   PLAIT_SCALE_H(plait_bf16_to_float, plait_float_to_bf16))
PLAIT_UNARY_KERNEL(plait_f32_scale, float, double, (float)p * x)
PLAIT_UNARY_KERNEL(plait_f64_scale, double, double, x * p)

static const plait_scale_kernel_t plait_scale_kernels[PLAIT_DTYPE_COUNT_] = {
    [PLAIT_UINT8] = plait_u8_scale,     [PLAIT_INT8] = plait_i8_scale,
    [PLAIT_UINT16] = plait_u16_scale,   [PLAIT_INT16] = plait_i16_scale,
    [PLAIT_INT32] = plait_i32_scale,    [PLAIT_INT64] = plait_i64_scale,
    [PLAIT_FLOAT16] = plait_f16_scale,  [PLAIT_BFLOAT16] = plait_bf16_scale,
    [PLAIT_FLOAT32] = plait_f32_scale,  [PLAIT_FLOAT64] = plait_f64_scale,
    [PLAIT_BOOL] = NULL, /* not defined */
};

/* ------------------------------------------------------------------------ */
/* Divide kernels                                                            */
/* ------------------------------------------------------------------------ */

typedef void (*plait_divide_kernel_t)(void *dst, const void *src, size_t n,
                                      uint32_t divisor);

/*
 * Integers up to 32 bits divide in double, which vectorises where integer
 * division does not, and is exact after truncation: with |x| < 2^32 and
 * 1 <= d < 2^32, a quotient that is not an integer lies at least 1/d from
 * every integer, while the double's rounding error is at most
 * |x/d| * 2^-53 < 2^-21 / d, so truncating the double gives trunc(x/d). An
 * integer quotient is exact. int64 needs real integer division.
 */
#define PLAIT_DIV_EXACT ((double)x / (double)p)
#define PLAIT_DIV_H(TO_F, FROM_F) FROM_F(TO_F(x) / (float)p)

PLAIT_UNARY_KERNEL(plait_u8_div, uint8_t, uint32_t, PLAIT_DIV_EXACT)
PLAIT_UNARY_KERNEL(plait_i8_div, int8_t, uint32_t, PLAIT_DIV_EXACT)
PLAIT_UNARY_KERNEL(plait_u16_div, uint16_t, uint32_t, PLAIT_DIV_EXACT)
PLAIT_UNARY_KERNEL(plait_i16_div, int16_t, uint32_t, PLAIT_DIV_EXACT)
PLAIT_UNARY_KERNEL(plait_i32_div, int32_t, uint32_t, PLAIT_DIV_EXACT)
PLAIT_UNARY_KERNEL(plait_i64_div, int64_t, uint32_t, x / (int64_t)p)
PLAIT_UNARY_KERNEL(plait_f16_div, uint16_t, uint32_t,
                   PLAIT_DIV_H(plait_half_to_float, plait_float_to_half))
PLAIT_UNARY_KERNEL(plait_bf16_div, uint16_t, uint32_t,
                   PLAIT_DIV_H(plait_bf16_to_float, plait_float_to_bf16))
PLAIT_UNARY_KERNEL(plait_f32_div, float, uint32_t, x / (float)p)
PLAIT_UNARY_KERNEL(plait_f64_div, double, uint32_t, x / (double)p)

static const plait_divide_kernel_t plait_divide_kernels[PLAIT_DTYPE_COUNT_] = {
    [PLAIT_UINT8] = plait_u8_div,     [PLAIT_INT8] = plait_i8_div,
    [PLAIT_UINT16] = plait_u16_div,   [PLAIT_INT16] = plait_i16_div,
    [PLAIT_INT32] = plait_i32_div,    [PLAIT_INT64] = plait_i64_div,
    [PLAIT_FLOAT16] = plait_f16_div,  [PLAIT_BFLOAT16] = plait_bf16_div,
    [PLAIT_FLOAT32] = plait_f32_div,  [PLAIT_FLOAT64] = plait_f64_div,
    [PLAIT_BOOL] = NULL, /* not defined */
};

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

static int plait_dtype_ok(plait_dtype_t dtype) {
  return (unsigned)dtype < (unsigned)PLAIT_DTYPE_COUNT_;
}

plait_result_t plait_reduce(plait_dtype_t dtype, plait_op_t op, void *dst,
                            const void *a, const void *b, size_t count) {
  if (!plait_dtype_ok(dtype) || (unsigned)op >= (unsigned)PLAIT_OP_COUNT_)
    return PLAIT_ERR_INVALID_ARGUMENT;
  const plait_binary_kernel_t kernel = plait_reduce_kernels[dtype][op];
  if (kernel == NULL) return PLAIT_ERR_INVALID_ARGUMENT;
  if (count == 0) return PLAIT_SUCCESS;
  if (dst == NULL || a == NULL || b == NULL) return PLAIT_ERR_INVALID_ARGUMENT;
  kernel(dst, a, b, count);
  return PLAIT_SUCCESS;
}

plait_result_t plait_scale(plait_dtype_t dtype, void *dst, const void *src,
                           size_t count, double factor) {
  if (!plait_dtype_ok(dtype)) return PLAIT_ERR_INVALID_ARGUMENT;
  const plait_scale_kernel_t kernel = plait_scale_kernels[dtype];
  if (kernel == NULL) return PLAIT_ERR_INVALID_ARGUMENT;
  if (count == 0) return PLAIT_SUCCESS;
  if (dst == NULL || src == NULL) return PLAIT_ERR_INVALID_ARGUMENT;
  kernel(dst, src, count, factor);
  return PLAIT_SUCCESS;
}

plait_result_t plait_divide(plait_dtype_t dtype, void *dst, const void *src,
                            size_t count, uint32_t divisor) {
  if (!plait_dtype_ok(dtype)) return PLAIT_ERR_INVALID_ARGUMENT;
  const plait_divide_kernel_t kernel = plait_divide_kernels[dtype];
  if (kernel == NULL || divisor == 0) return PLAIT_ERR_INVALID_ARGUMENT;
  if (count == 0) return PLAIT_SUCCESS;
  if (dst == NULL || src == NULL) return PLAIT_ERR_INVALID_ARGUMENT;
  kernel(dst, src, count, divisor);
  return PLAIT_SUCCESS;
}

/* Elements per reduce-then-scale step: the block is reduced into dst and
 * scaled there while it is still in L1 (16 KiB of float32). */
#define PLAIT_FUSED_STEP 4096

plait_result_t plait_reduce_scale(plait_dtype_t dtype, plait_op_t op,
                                  void *dst, const void *a, const void *b,
                                  size_t count, double factor) {
  if (factor == 1.0) return plait_reduce(dtype, op, dst, a, b, count);
  if (!plait_dtype_ok(dtype) || (unsigned)op >= (unsigned)PLAIT_OP_COUNT_)
    return PLAIT_ERR_INVALID_ARGUMENT;
  const plait_binary_kernel_t kernel = plait_reduce_kernels[dtype][op];
  const plait_scale_kernel_t scale = plait_scale_kernels[dtype];
  if (kernel == NULL || scale == NULL) return PLAIT_ERR_INVALID_ARGUMENT;
  if (count == 0) return PLAIT_SUCCESS;
  if (dst == NULL || a == NULL || b == NULL) return PLAIT_ERR_INVALID_ARGUMENT;
  const size_t es = plait_dtype_size_inline(dtype);
  char *pd = dst;
  const char *pa = a, *pb = b;
  for (size_t i = 0; i < count; i += PLAIT_FUSED_STEP) {
    const size_t n = count - i < PLAIT_FUSED_STEP ? count - i : PLAIT_FUSED_STEP;
    kernel(pd + i * es, pa + i * es, pb + i * es, n);
    scale(pd + i * es, pd + i * es, n, factor);
  }
  return PLAIT_SUCCESS;
}
