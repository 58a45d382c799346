/*
 * The element arithmetic of batch_copy, shared by the CUDA kernel
 * (kernels.cu, where NC_HD is __host__ __device__) and plain C (batch.c, and
 * the unit test tests/plugins/nccl/nccl_elem.c, which checks it against the core's
 * plait_scale bit for bit without a GPU).
 *
 * Scaling rounds exactly as the core's plait_scale (src/util/reduce.c):
 *  - integers: (double)x * factor, NaN -> 0, clamped to the type's limits,
 *    truncated toward zero;
 *  - float32: (float)factor * x in float;
 *  - float16, bfloat16: to float32, times (float)factor, back to nearest
 *    even (the conversions below are the core's half.h algorithm);
 *  - float64: x * factor in double.
 * Division (AVERAGE after a SUM) rounds exactly as the core's plait_divide.
 * kernels.cu is compiled with -fmad=false so that no multiplication here is
 * fused with an addition (the core's are not).
 *
 * Pure functions: no state, any thread.
 */
#ifndef PLAIT_NCCL_ELEM_H
#define PLAIT_NCCL_ELEM_H

#include <stdint.h>

#include "plait/plait.h"

#if defined(__CUDACC__)
#define NC_HD __host__ __device__ __forceinline__
#else
#define NC_HD static inline
#include <string.h>
#endif

NC_HD uint32_t nc_f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

NC_HD float nc_f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* float16 bits -> float32, exact. */
NC_HD float nc_half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  uint32_t bits = (em << 13) + 0x38000000u;
  if (em >= 0x7c00u) bits += 0x38000000u;                 /* Inf, NaN */
  if (em < 0x0400u) bits = nc_f32_bits((float)(int32_t)em * 0x1p-24f); /* 0, subnormal */
  return nc_f32_from_bits(bits | sign);
}

/* float32 -> float16 bits, to nearest even; NaN quiet with its top payload. */
NC_HD uint16_t nc_float_to_half(float f) {
  const uint32_t x = nc_f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t r;
  if (a > 0x7f800000u)
    r = 0x7e00u | ((a >> 13) & 0x01ffu);
  else if (a >= 0x47800000u)
    r = 0x7c00u;
  else if (a < 0x38800000u) /* subnormal result: 0.5f's ulp is 2^-24 */
    r = nc_f32_bits(nc_f32_from_bits(a) + 0.5f) - 0x3f000000u;
  else
    r = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  return (uint16_t)(r | sign);
}

NC_HD float nc_bf16_to_float(uint16_t h) { return nc_f32_from_bits((uint32_t)h << 16); }

NC_HD uint16_t nc_float_to_bf16(float f) {
  const uint32_t x = nc_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* r clamped to [lo, hi], NaN to 0 (lo, hi exact in double). */
NC_HD double nc_sat(double r, double lo, double hi) {
  r = r != r ? 0.0 : r;
  r = r < lo ? lo : r;
  return r > hi ? hi : r;
}

NC_HD int64_t nc_sat_i64(double r) {
  if (r != r) return 0;
  if (r >= 0x1p63) return INT64_MAX;
  if (r < -0x1p63) return INT64_MIN;
  return (int64_t)r;
}

/* One element scaled, per dtype: p is the factor, pf (float)p. */
NC_HD uint8_t nc_scale_u8(uint8_t x, double p) { return (uint8_t)nc_sat((double)x * p, 0.0, 255.0); }
NC_HD int8_t nc_scale_i8(int8_t x, double p) { return (int8_t)nc_sat((double)x * p, -128.0, 127.0); }
NC_HD uint16_t nc_scale_u16(uint16_t x, double p) {
  return (uint16_t)nc_sat((double)x * p, 0.0, 65535.0);
}
NC_HD int16_t nc_scale_i16(int16_t x, double p) {
  return (int16_t)nc_sat((double)x * p, -32768.0, 32767.0);
}
NC_HD int32_t nc_scale_i32(int32_t x, double p) {
  return (int32_t)nc_sat((double)x * p, -2147483648.0, 2147483647.0);
}
NC_HD int64_t nc_scale_i64(int64_t x, double p) { return nc_sat_i64((double)x * p); }
NC_HD uint16_t nc_scale_f16(uint16_t x, float pf) {
  return nc_float_to_half(pf * nc_half_to_float(x));
}
NC_HD uint16_t nc_scale_bf16(uint16_t x, float pf) {
  return nc_float_to_bf16(pf * nc_bf16_to_float(x));
}
NC_HD float nc_scale_f32(float x, float pf) { return pf * x; }
NC_HD double nc_scale_f64(double x, double p) { return x * p; }

/* One element divided by d >= 1, as the core's plait_divide (how AVERAGE
 * finishes a SUM): integers exactly, truncating toward zero (the core's
 * double division for types up to 32 bits gives the same, as reduce.c
 * shows); float32 x / (float)d; float16, bfloat16 in float32, then rounded
 * to nearest even; float64 x / (double)d. */
NC_HD uint8_t nc_div_u8(uint8_t x, uint32_t d) { return (uint8_t)(x / d); }
NC_HD int8_t nc_div_i8(int8_t x, uint32_t d) { return (int8_t)((int64_t)x / (int64_t)d); }
NC_HD uint16_t nc_div_u16(uint16_t x, uint32_t d) { return (uint16_t)(x / d); }
NC_HD int16_t nc_div_i16(int16_t x, uint32_t d) { return (int16_t)((int64_t)x / (int64_t)d); }
NC_HD int32_t nc_div_i32(int32_t x, uint32_t d) { return (int32_t)((int64_t)x / (int64_t)d); }
NC_HD int64_t nc_div_i64(int64_t x, uint32_t d) { return x / (int64_t)d; }
NC_HD uint16_t nc_div_f16(uint16_t x, uint32_t d) {
  return nc_float_to_half(nc_half_to_float(x) / (float)d);
}
NC_HD uint16_t nc_div_bf16(uint16_t x, uint32_t d) {
  return nc_float_to_bf16(nc_bf16_to_float(x) / (float)d);
}
NC_HD float nc_div_f32(float x, uint32_t d) { return x / (float)d; }
NC_HD double nc_div_f64(double x, uint32_t d) { return x / (double)d; }

/* The identity of op in dtype as the element's bits (low bytes of the
 * result, little-endian): what a span with src NULL is filled with. 0 for
 * SUM/AVERAGE, 1 for PRODUCT, lowest (-inf) for MAX, highest (+inf) for MIN;
 * bool: 0 for SUM/AVERAGE/MAX, 1 for MIN/PRODUCT. */
NC_HD uint64_t nc_identity_bits(plait_dtype_t dtype, plait_op_t op) {
  if (op == PLAIT_OP_SUM || op == PLAIT_OP_AVERAGE) return 0;
  const int hi = op == PLAIT_OP_MIN, one = op == PLAIT_OP_PRODUCT;
  switch (dtype) {
    case PLAIT_UINT8: return one ? 1u : hi ? 0xffu : 0u;
    case PLAIT_INT8: return one ? 1u : hi ? 0x7fu : 0x80u;
    case PLAIT_UINT16: return one ? 1u : hi ? 0xffffu : 0u;
    case PLAIT_INT16: return one ? 1u : hi ? 0x7fffu : 0x8000u;
    case PLAIT_INT32: return one ? 1u : hi ? 0x7fffffffu : 0x80000000u;
    case PLAIT_INT64: return one ? 1u : hi ? 0x7fffffffffffffffull : 0x8000000000000000ull;
    case PLAIT_FLOAT16: return one ? 0x3c00u : hi ? 0x7c00u : 0xfc00u;
    case PLAIT_BFLOAT16: return one ? 0x3f80u : hi ? 0x7f80u : 0xff80u;
    case PLAIT_FLOAT32: return one ? 0x3f800000u : hi ? 0x7f800000u : 0xff800000u;
    case PLAIT_FLOAT64:
      return one ? 0x3ff0000000000000ull : hi ? 0x7ff0000000000000ull : 0xfff0000000000000ull;
    case PLAIT_BOOL: return op == PLAIT_OP_MAX ? 0u : 1u;
    default: return 0;
  }
}

/* The element bits `fill` (es = 1, 2, 4 or 8 bytes) repeated over 8 bytes. */
NC_HD uint64_t nc_fill_pattern(uint64_t fill, unsigned es) {
  uint64_t p = es >= 8 ? fill : fill & ((1ull << (8 * es)) - 1);
  for (unsigned b = es; b < 8; b *= 2) p |= p << (8 * b);
  return p;
}

/* ---- How the kernel's blocks share the spans. Every span is cut into
 * chunks of NC_CHUNK_BYTES (the last one shorter); block b of the grid takes
 * chunks b, b + gridDim, ... and finds each chunk's span by binary search
 * over first_chunk (increasing). ---- */

#define NC_CHUNK_BYTES 32768u

/* One span as the device sees it (the table batch.c stages). */
typedef struct nc_span_ent {
  uint64_t dst, src; /* addresses; src 0: fill with the identity */
  uint64_t bytes;    /* count * element size */
  uint64_t first_chunk;
} nc_span_ent_t;

/* The span holding chunk c: the last i with tab[i].first_chunk <= c. Spans
 * of 0 bytes own no chunk and are never returned for a chunk they share
 * their first_chunk with (the last one wins). n >= 1, tab[0].first_chunk 0. */
NC_HD uint32_t nc_chunk_span(const nc_span_ent_t *tab, uint32_t n, uint64_t c) {
  uint32_t lo = 0, hi = n; /* answer in [lo, hi) */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (tab[mid].first_chunk <= c)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* Chunk c's place: its span *s, the byte offset *off in it and *len bytes. */
NC_HD void nc_chunk_range(const nc_span_ent_t *tab, uint32_t n, uint64_t c, uint32_t *s,
                          uint64_t *off, uint64_t *len) {
  *s = nc_chunk_span(tab, n, c);
  *off = (c - tab[*s].first_chunk) * NC_CHUNK_BYTES;
  const uint64_t left = tab[*s].bytes - *off;
  *len = left < NC_CHUNK_BYTES ? left : NC_CHUNK_BYTES;
}

#endif
