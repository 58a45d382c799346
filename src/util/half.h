/*
 * Internal: conversions between float32 and the two 16-bit floating types,
 * float16 (IEEE 754 binary16) and bfloat16. Not exported from libplait.so.
 *
 * Every conversion to a 16-bit type rounds to nearest, ties to even. Inf
 * keeps its sign; NaN stays NaN (made quiet; the top payload bits are kept);
 * finite values too large for the type become Inf of the same sign. float16
 * subnormals are exact in both directions.
 *
 * The functions are branch-free (each path is computed and one is selected
 * with a bit mask) so that a loop over them vectorises. Plain ?: is not
 * enough: GCC turns it back into a branch around the float operation of the
 * path it selects, and then will not vectorise the loop.
 *
 * They assume IEEE 754 binary32 floats (checked below) and, for float16
 * results below 2^-14 in magnitude, the default rounding mode (round to
 * nearest even); flush-to-zero and denormals-are-zero modes do not change
 * any result.
 *
 * Pure functions of their argument: thread-safe, no state.
 */
#ifndef PLAIT_HALF_H
#define PLAIT_HALF_H

#include <float.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
#define PLAIT_HALF_STATIC_ASSERT static_assert
#else
#define PLAIT_HALF_STATIC_ASSERT _Static_assert
#endif
PLAIT_HALF_STATIC_ASSERT(sizeof(float) == 4 && FLT_MANT_DIG == 24 &&
                             FLT_MAX_EXP == 128,
                         "plait needs IEEE 754 binary32 floats");
#undef PLAIT_HALF_STATIC_ASSERT

static inline uint32_t plait_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float plait_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* cond ? t : f for cond 0 or 1, without a branch. */
static inline uint32_t plait_select_u32(uint32_t cond, uint32_t t, uint32_t f) {
  const uint32_t mask = 0u - cond;
  return (t & mask) | (f & ~mask);
}

/* float16 bits -> float32. Exact for every value (float32 holds them all). */
static inline float plait_half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu; /* exponent and mantissa */
  /* Normal numbers: move exponent and mantissa into place and rebias the
   * exponent from 15 to 127 ((127 - 15) << 23 == 0x38000000). */
  uint32_t bits = (em << 13) + 0x38000000u;
  /* Inf and NaN: exponent 31 must become 255, so add the bias once more. */
  bits = plait_select_u32(em >= 0x7c00u, bits + 0x38000000u, bits);
  /* Zero and subnormals: em * 2^-24, exact in float32. */
  const uint32_t sub = plait_f32_bits((float)(int32_t)em * 0x1p-24f);
  bits = plait_select_u32(em < 0x0400u, sub, bits);
  return plait_f32_from_bits(bits | sign);
}

/* float32 -> float16 bits, rounding to nearest even. */
static inline uint16_t plait_float_to_half(float f) {
  const uint32_t x = plait_f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu; /* |f| */
  /* Normal results (2^-14 <= |f| < 65520): rebias the exponent, then round
   * the 13 dropped mantissa bits: adding 0xfff plus the lowest kept bit
   * carries into the kept bits exactly when the dropped part is above half,
   * or is half and the kept part is odd. A carry out of the mantissa bumps
   * the exponent, which is right, and 65520 and up carry into Inf. */
  const uint32_t normal =
      (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  /* Subnormal results (|f| < 2^-14): 0.5f has an ulp of 2^-24, the float16
   * subnormal step, so the float addition rounds |f| to a multiple of 2^-24
   * (to nearest even) and the low bits of the sum are the float16 bits. A
   * result of 0x400 is the smallest normal, which is right. */
  const uint32_t sub = plait_f32_bits(plait_f32_from_bits(a) + 0.5f) -
                       0x3f000000u; /* bits of 0.5f */
  /* NaN: quiet, with the top 9 payload bits kept. */
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x01ffu);
  /* a < 2^31, so signed comparisons (which SSE2 has) give the same answer. */
  const int32_t sa = (int32_t)a;
  uint32_t r = plait_select_u32(sa < 0x38800000, sub, normal); /* < 2^-14 */
  r = plait_select_u32(sa >= 0x47800000, 0x7c00u, r); /* >= 65536, Inf */
  r = plait_select_u32(sa > 0x7f800000, nan, r);
  return (uint16_t)(r | sign);
}

/* bfloat16 bits -> float32. Exact. */
static inline float plait_bf16_to_float(uint16_t h) {
  return plait_f32_from_bits((uint32_t)h << 16);
}

/* float32 -> bfloat16 bits, rounding to nearest even. */
static inline uint16_t plait_float_to_bf16(float f) {
  const uint32_t x = plait_f32_bits(f);
  /* Same carry trick as above on the 16 dropped bits; the largest finite
   * values carry into Inf, which is right. */
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  /* NaN: must not round into Inf (0x7f800001 would), so keep the high half
   * and set the quiet bit. */
  const uint32_t nan = (x >> 16) | 0x0040u;
  return (uint16_t)plait_select_u32((x & 0x7fffffffu) > 0x7f800000u, nan,
                                    rounded);
}

#endif /* PLAIT_HALF_H */
