/*
 * plait_reduce_scale (util/reduce.h), the kernel transports fold AVERAGE and
 * postscale into: bit for bit plait_reduce followed by plait_scale, for
 * every dtype x op x factor, at sizes around its block (4096 elements), with
 * dst separate, dst == a and dst == b; its errors.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/reduce.h"

static const plait_reduce_scale_fn type_check = plait_reduce_scale;

static const size_t kSizes[] = {0, 1, 255, 4095, 4096, 4097, 10001};
static const double kFactors[] = {1.0, 0.5, 1.0 / 3, 3.0, -0.25};

/* Small-integer-ish values plus fractions, in the dtype's own bits. */
static void fill(plait_dtype_t d, unsigned char *buf, size_t n, unsigned seed) {
  size_t es = plait_dtype_size(d);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    double v = (double)((int)(seed >> 16) % 61 - 30) / ((seed >> 8) % 2 ? 1.0 : 7.0);
    unsigned char *p = buf + i * es;
    switch (d) {
    case PLAIT_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case PLAIT_FLOAT64: memcpy(p, &v, 8); break;
    case PLAIT_FLOAT16: case PLAIT_BFLOAT16: { /* any bit pattern but NaN/Inf */
      uint16_t h = (uint16_t)(seed >> 3);
      if (d == PLAIT_FLOAT16) h &= 0xBBFF; else h &= 0xBF7F;
      memcpy(p, &h, 2);
      break;
    }
    case PLAIT_BOOL: p[0] = (unsigned char)(seed >> 20 & 1); break;
    default: { int64_t k = (int64_t)(seed >> 16) % 61 - 30; memcpy(p, &k, es); break; } /* LE */
    }
  }
}

static void check(plait_dtype_t d, plait_op_t op, size_t n, double factor, int alias) {
  size_t es = plait_dtype_size(d), bytes = n * es + 1;
  unsigned char *a = malloc(bytes), *b = malloc(bytes), *want = malloc(bytes),
                *dst = malloc(bytes);
  cr_assert(a && b && want && dst);
  fill(d, a, n, 1u + (unsigned)n);
  fill(d, b, n, 7u + (unsigned)op);
  cr_assert_eq(plait_reduce(d, op, want, a, b, n), PLAIT_SUCCESS);
  cr_assert_eq(plait_scale(d, want, want, n, factor), PLAIT_SUCCESS);
  unsigned char *out = alias == 0 ? dst : alias == 1 ? a : b;
  cr_assert_eq(plait_reduce_scale(d, op, out, a, b, n, factor), PLAIT_SUCCESS,
               "%s op %d x%zu factor %g", plait_dtype_name(d), (int)op, n, factor);
  for (size_t i = 0; i < n * es; i++)
    cr_assert_eq(out[i], want[i], "%s op %d x%zu factor %g alias %d: element %zu differs "
                 "from plait_reduce then plait_scale", plait_dtype_name(d), (int)op, n, factor,
                 alias, i / es);
  free(a), free(b), free(want), free(dst);
}

Test(reduce_scale, bit_for_bit_reduce_then_scale) {
  (void)type_check;
  for (int d = 0; d < PLAIT_DTYPE_COUNT_; d++)
    for (int op = 0; op < PLAIT_OP_COUNT_; op++) {
      if (d == PLAIT_BOOL) continue; /* not scaled: see errors */
      for (size_t s = 0; s < sizeof kSizes / sizeof kSizes[0]; s++)
        for (size_t f = 0; f < sizeof kFactors / sizeof kFactors[0]; f++)
          check((plait_dtype_t)d, (plait_op_t)op, kSizes[s], kFactors[f], (int)((s + f) % 3));
    }
}

Test(reduce_scale, factor_one_is_plain_reduce_bool_included) {
  uint8_t a[3] = {0, 1, 1}, b[3] = {0, 0, 1}, out[3];
  cr_assert_eq(plait_reduce_scale(PLAIT_BOOL, PLAIT_OP_SUM, out, a, b, 3, 1.0), PLAIT_SUCCESS);
  cr_assert(out[0] == 0 && out[1] == 1 && out[2] == 1);
}

Test(reduce_scale, errors) {
  uint8_t a[2] = {1, 0}, out[2];
  float f[2] = {1, 2};
  cr_assert_eq(plait_reduce_scale(PLAIT_BOOL, PLAIT_OP_SUM, out, a, a, 2, 0.5),
               PLAIT_ERR_INVALID_ARGUMENT, "bool is not scaled");
  cr_assert_eq(plait_reduce_scale(PLAIT_BOOL, PLAIT_OP_AVERAGE, out, a, a, 2, 1.0),
               PLAIT_ERR_INVALID_ARGUMENT, "AVERAGE on bool");
  cr_assert_eq(plait_reduce_scale(PLAIT_DTYPE_COUNT_, PLAIT_OP_SUM, f, f, f, 2, 0.5),
               PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_eq(plait_reduce_scale(PLAIT_FLOAT32, PLAIT_OP_COUNT_, f, f, f, 2, 0.5),
               PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_eq(plait_reduce_scale(PLAIT_FLOAT32, PLAIT_OP_SUM, NULL, f, f, 2, 0.5),
               PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_eq(plait_reduce_scale(PLAIT_FLOAT32, PLAIT_OP_SUM, NULL, NULL, NULL, 0, 0.5),
               PLAIT_SUCCESS, "nothing to do");
}
