/*
 * Test helpers for dtypes, shared by the multi-rank suites: the tests' own
 * float16 / bfloat16 converters (round to nearest even, written apart from
 * src/util/half.h so they check it rather than repeat it) and element access by
 * dtype through double (exact for the small integers the tests use).
 */
#ifndef PLAIT_TEST_DTYPE_UTIL_H
#define PLAIT_TEST_DTYPE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "plait/plait.h"

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

/* The value a float32 result f reads back as once stored in d. */

#endif
