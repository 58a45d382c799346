/*
 * The dtype oracle every test checks reductions against (core, plugins, the
 * nccl GPU programs): the tests' own float16 / bfloat16 converters (round to
 * nearest even, written apart from src/util/half.h so they check it rather
 * than repeat it), element access by dtype through double (exact for the
 * small integers the tests use), the list of dtypes and ops, Horovod's
 * scaling arithmetic, test data every dtype holds exactly, and the expected
 * result of each reduction computed from rank and index.
 *
 * Header-only: every function is static inline, so a file that does not use
 * one gets no warning. Data are small integers (and their quotients for
 * AVERAGE), so every result is exact or rounded in a way the test reproduces
 * bit for bit.
 */
#ifndef PLAIT_TEST_DTYPE_ORACLE_H
#define PLAIT_TEST_DTYPE_ORACLE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "plait/plait.h"
#include "ranks.h" /* PLAIT_TEST_MAX_RANKS */

static inline int ops_is_float(plait_dtype_t d) {
  return d == PLAIT_FLOAT16 || d == PLAIT_BFLOAT16 || d == PLAIT_FLOAT32 || d == PLAIT_FLOAT64;
}
static inline int ops_is_unsigned(plait_dtype_t d) {
  return d == PLAIT_UINT8 || d == PLAIT_UINT16 || d == PLAIT_BOOL;
}
static inline int ops_is_half(plait_dtype_t d) {
  return d == PLAIT_FLOAT16 || d == PLAIT_BFLOAT16;
}

/* ------------------------------------------------------------------------ */
/* The test's own float16 / bfloat16 converters (round to nearest even)      */
/* ------------------------------------------------------------------------ */

static inline uint16_t ops_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u, fexp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (fexp == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int exp = (int)fexp - 127 + 15;
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) { /* a float16 subnormal, or zero */
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    unsigned shift = (unsigned)(14 - exp);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* may carry into Inf: right */
  return (uint16_t)(sign | h);
}

static inline float ops_f16_to_f32(uint16_t h) {
  unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float v = e == 0 ? ldexpf((float)m, -24)
            : e == 31 ? (m ? NAN : INFINITY)
                      : ldexpf((float)(m | 0x400u), (int)e - 25);
  return (h & 0x8000u) ? -v : v;
}

static inline uint16_t ops_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

static inline float ops_bf16_to_f32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

/* ------------------------------------------------------------------------ */
/* Elements                                                                  */
/* ------------------------------------------------------------------------ */

static inline void ops_put(plait_dtype_t d, void *buf, size_t i, double v) {
  switch (d) {
  case PLAIT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  case PLAIT_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
  case PLAIT_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
  case PLAIT_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
  case PLAIT_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case PLAIT_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
  case PLAIT_FLOAT16: ((uint16_t *)buf)[i] = ops_f32_to_f16((float)v); break;
  case PLAIT_BFLOAT16: ((uint16_t *)buf)[i] = ops_f32_to_bf16((float)v); break;
  case PLAIT_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case PLAIT_FLOAT64: ((double *)buf)[i] = v; break;
  case PLAIT_BOOL: ((uint8_t *)buf)[i] = v != 0; break;
  default: break;
  }
}

static inline double ops_get(plait_dtype_t d, const void *buf, size_t i) {
  switch (d) {
  case PLAIT_UINT8: return ((const uint8_t *)buf)[i];
  case PLAIT_INT8: return ((const int8_t *)buf)[i];
  case PLAIT_UINT16: return ((const uint16_t *)buf)[i];
  case PLAIT_INT16: return ((const int16_t *)buf)[i];
  case PLAIT_INT32: return ((const int32_t *)buf)[i];
  case PLAIT_INT64: return (double)((const int64_t *)buf)[i];
  case PLAIT_FLOAT16: return ops_f16_to_f32(((const uint16_t *)buf)[i]);
  case PLAIT_BFLOAT16: return ops_bf16_to_f32(((const uint16_t *)buf)[i]);
  case PLAIT_FLOAT32: return ((const float *)buf)[i];
  case PLAIT_FLOAT64: return ((const double *)buf)[i];
  case PLAIT_BOOL: return ((const uint8_t *)buf)[i];
  default: return NAN;
  }
}

/* ------------------------------------------------------------------------ */
/* dtypes and ops                                                            */
/* ------------------------------------------------------------------------ */

#define OPS_DTYPE_ENTRY_(name, value, text, bytes) name,
static const plait_dtype_t ops_dtypes[] = {PLAIT_DTYPE_LIST(OPS_DTYPE_ENTRY_)};
#undef OPS_DTYPE_ENTRY_
#define OPS_N_DTYPES ((int)(sizeof ops_dtypes / sizeof ops_dtypes[0]))

#define OPS_OP_ENTRY_(name, value, text) name,
static const plait_op_t ops_ops[] = {PLAIT_OP_LIST(OPS_OP_ENTRY_)};
#undef OPS_OP_ENTRY_
#define OPS_N_OPS ((int)(sizeof ops_ops / sizeof ops_ops[0]))

/* The value a float32 result f reads back as once stored in d. */
static inline double ops_round_float(plait_dtype_t d, float f) {
  if (d == PLAIT_FLOAT16) return ops_f16_to_f32(ops_f32_to_f16(f));
  if (d == PLAIT_BFLOAT16) return ops_bf16_to_f32(ops_f32_to_bf16(f));
  return f;
}

/* x * factor as plait_op_options_t scales an element of d (Horovod 0.28's
 * CPU scaling): integers in double, truncated toward zero; float32 and the
 * 16-bit floats in float, by the factor rounded to float (16-bit floats then
 * rounded to their type); float64 in double. */
static inline double ops_scale(plait_dtype_t d, double x, double factor) {
  if (factor == 1.0) return x;
  if (d == PLAIT_FLOAT64) return x * factor;
  if (ops_is_float(d)) {
    volatile float p = (float)factor * (float)x; /* a float product, nothing wider */
    return ops_round_float(d, p);
  }
  return trunc(x * factor);
}

/* ------------------------------------------------------------------------ */
/* Data and expected reductions                                              */
/* ------------------------------------------------------------------------ */

/*
 * Rank r's element i of a reduction test. Sums over up to 4 ranks stay in
 * [-32, 64] and products within [-16, 81]: exact in every dtype. Signed
 * types get negatives, so that AVERAGE truncation toward zero and MIN/MAX
 * of negatives are exercised. salt varies the data between tensors.
 */
static inline double ops_value(plait_dtype_t d, plait_op_t op, int r, size_t i, unsigned salt) {
  size_t k = i * 7 + (size_t)r * 5 + salt;
  if (d == PLAIT_BOOL) return (double)(((i * 7 + salt + 3) >> (r % 4)) & 1u);
  if (op == PLAIT_OP_PRODUCT) {
    static const double s[6] = {1, -1, 2, 1, -2, 1}, u[4] = {1, 2, 3, 1};
    return ops_is_unsigned(d) ? u[k % 4] : s[k % 6];
  }
  double v = (double)(k % 17);
  return ops_is_unsigned(d) ? v : v - 8;
}

/*
 * The result of reducing vals[0..n) (each already prescaled) with op in
 * dtype d, before postscale (AVERAGE: the sum; its 1/n is part of the
 * postscale factor, see ops_postscale).
 */
static inline double ops_reduce(plait_dtype_t d, plait_op_t op, const double *vals, int n) {
  double acc = vals[0];
  for (int r = 1; r < n; r++) {
    double v = vals[r];
    switch (op) {
    case PLAIT_OP_SUM:
    case PLAIT_OP_AVERAGE: acc = d == PLAIT_BOOL ? (double)(acc != 0 || v != 0) : acc + v; break;
    case PLAIT_OP_MIN: acc = d == PLAIT_BOOL ? (double)(acc != 0 && v != 0) : v < acc ? v : acc; break;
    case PLAIT_OP_MAX: acc = d == PLAIT_BOOL ? (double)(acc != 0 || v != 0) : v > acc ? v : acc; break;
    case PLAIT_OP_PRODUCT: acc = d == PLAIT_BOOL ? (double)(acc != 0 && v != 0) : acc * v; break;
    default: break;
    }
  }
  return acc;
}

/* The factor the reduced values are scaled by: AVERAGE divides the postscale
 * factor by the number of ranks, in double (Horovod's arithmetic). */
static inline double ops_postscale(plait_op_t op, int n, double post) {
  return op == PLAIT_OP_AVERAGE ? post / n : post;
}

/* Expected element i of an allreduce of ops_value data over n ranks. */
static inline double ops_expect(plait_dtype_t d, plait_op_t op, int n, size_t i, unsigned salt,
                                double pre, double post) {
  double vals[PLAIT_TEST_MAX_RANKS];
  if (n < 1 || n > PLAIT_TEST_MAX_RANKS) return NAN;
  for (int r = 0; r < n; r++) vals[r] = ops_scale(d, ops_value(d, op, r, i, salt), pre);
  return ops_scale(d, ops_reduce(d, op, vals, n), ops_postscale(op, n, post));
}

static inline void ops_fill(plait_dtype_t d, plait_op_t op, int r, void *buf, size_t count,
                            unsigned salt) {
  for (size_t i = 0; i < count; i++) ops_put(d, buf, i, ops_value(d, op, r, i, salt));
}

/* Index of the first wrong element of an allreduce result, or -1. */
static inline long ops_check(plait_dtype_t d, plait_op_t op, int n, const void *buf,
                             size_t count, unsigned salt, double pre, double post,
                             double *got, double *want) {
  for (size_t i = 0; i < count; i++) {
    double g = ops_get(d, buf, i), w = ops_expect(d, op, n, i, salt, pre, post);
    if (g != w) {
      *got = g;
      *want = w;
      return (long)i;
    }
  }
  return -1;
}

/* Bytes of a 1-D tensor of count elements. */
static inline size_t ops_bytes(plait_dtype_t d, size_t count) {
  return count * plait_dtype_size(d);
}

#endif
