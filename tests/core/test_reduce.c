/*
 * Tests of the core's reduction kernels (src/util/reduce.c) and the 16-bit float
 * conversions (src/util/half.h).
 *
 * Every kernel result is compared with a plain scalar reference written here,
 * element by element, without the kernels' tricks: float16 goes through
 * frexp/ldexp/nearbyint, bfloat16 through an explicit remainder test,
 * integers through 64-bit arithmetic. Each dtype x op runs over sizes around
 * the kernels' 256-element block, with dst distinct and dst aliasing a, b or
 * both.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/half.h"
#include "util/reduce.h"

/* The kernels are what the transport ABI hands to plugins. */
static const plait_reduce_fn reduce_fn_type_check = plait_reduce;
static const plait_scale_fn scale_fn_type_check = plait_scale;
static const plait_divide_fn divide_fn_type_check = plait_divide;

static const size_t kSizes[] = {0, 1, 7, 255, 256, 257, 1001, 4099};
#define NSIZES (sizeof kSizes / sizeof kSizes[0])

static const plait_dtype_t kDtypes[] = {
    PLAIT_UINT8,   PLAIT_INT8,     PLAIT_UINT16,  PLAIT_INT16,
    PLAIT_INT32,   PLAIT_INT64,    PLAIT_FLOAT16, PLAIT_BFLOAT16,
    PLAIT_FLOAT32, PLAIT_FLOAT64,  PLAIT_BOOL};
#define NDTYPES (sizeof kDtypes / sizeof kDtypes[0])

static const char *dtype_text(plait_dtype_t d) {
  static const char *names[] = {"uint8",   "int8",     "uint16", "int16",
                                "int32",   "int64",    "float16", "bfloat16",
                                "float32", "float64",  "bool"};
  return (unsigned)d < 11 ? names[d] : "?";
}

static const char *op_text(plait_op_t op) {
  static const char *names[] = {"sum", "average", "min", "max", "product"};
  return (unsigned)op < 5 ? names[op] : "?";
}

static size_t dsize(plait_dtype_t d) {
  static const size_t sizes[] = {1, 1, 2, 2, 4, 8, 2, 2, 4, 8, 1};
  return sizes[d];
}

/* ------------------------------------------------------------------------ */
/* Reference conversions, deliberately unlike half.h                         */
/* ------------------------------------------------------------------------ */

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint64_t dbits(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}

static float ref_h2f(uint16_t h) {
  const int e = (h >> 10) & 31;
  const int m = h & 0x3ff;
  float v;
  if (e == 31)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexpf((float)m, -24);
  else
    v = ldexpf((float)(m | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
}

/* Round to nearest even via double arithmetic; NaN gives 0x7e00. */
static uint16_t ref_f2h(float f) {
  const uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isnan(f)) return sign | 0x7e00;
  const double a = fabs((double)f);
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < 0x1p-14) return sign | (uint16_t)nearbyint(a * 0x1p24);
  int e;
  frexp(a, &e); /* 2^(e-1) <= a < 2^e */
  int ex = e - 1;
  double q = nearbyint(ldexp(a, 10 - ex)); /* in [1024, 2048] */
  if (q == 2048.0) {
    q = 1024.0;
    ex++;
  }
  return sign | (uint16_t)((ex + 15) << 10) | (uint16_t)(q - 1024.0);
}

static float ref_bf2f(uint16_t h) { return bitsf((uint32_t)h << 16); }

static uint16_t ref_f2bf(float f) {
  const uint32_t u = fbits(f);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
  uint32_t hi = u >> 16;
  const uint32_t lo = u & 0xffff;
  if (lo > 0x8000 || (lo == 0x8000 && (hi & 1))) hi++;
  return (uint16_t)hi;
}

static int h_isnan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static int bf_isnan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

/* ------------------------------------------------------------------------ */
/* Random data                                                               */
/* ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; }

static const float kFloatSpecials[] = {
    NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f,
    FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f, 65504.0f, 65520.0f, 0x1p-24f, 0x1p-25f};
#define NSPECIALS (sizeof kFloatSpecials / sizeof kFloatSpecials[0])

static float rnd_float(void) {
  const uint64_t r = rnd();
  switch (r & 15) {
    case 0:
      return kFloatSpecials[(r >> 8) % NSPECIALS];
    case 1:
      return bitsf((uint32_t)(r >> 32)); /* any bit pattern */
    default:
      return (float)((rnd_unit() - 0.5) *
                     ldexp(1.0, (int)((r >> 8) % 40) - 20));
  }
}

static void fill(plait_dtype_t d, void *buf, size_t n) {
  for (size_t i = 0; i < n; i++) {
    switch (d) {
      case PLAIT_UINT8:
      case PLAIT_INT8:
      case PLAIT_UINT16:
      case PLAIT_INT16:
      case PLAIT_INT32:
      case PLAIT_INT64: {
        uint64_t r = rnd();
        /* Some small values so that products do not always wrap to 0. */
        if ((r & 3) == 0) r = (uint64_t)((int64_t)(r >> 2) % 9 - 4);
        memcpy((char *)buf + i * dsize(d), &r, dsize(d));
        break;
      }
      case PLAIT_BOOL: {
        const uint64_t r = rnd();
        ((uint8_t *)buf)[i] = (r & 1) ? 0 : (uint8_t)(1 + (r >> 8) % 255);
        break;
      }
      case PLAIT_FLOAT16:
      case PLAIT_BFLOAT16: {
        const uint64_t r = rnd();
        uint16_t h;
        if (r & 1)
          h = (uint16_t)(r >> 16); /* any bit pattern */
        else if (d == PLAIT_FLOAT16)
          h = ref_f2h(rnd_float());
        else
          h = ref_f2bf(rnd_float());
        ((uint16_t *)buf)[i] = h;
        break;
      }
      case PLAIT_FLOAT32:
        ((float *)buf)[i] = rnd_float();
        break;
      case PLAIT_FLOAT64: {
        const uint64_t r = rnd();
        double v = (r & 7) ? (rnd_unit() - 0.5) * ldexp(1.0, (int)(r % 80) - 40)
                           : (double)rnd_float();
        ((double *)buf)[i] = v;
        break;
      }
      default:
        cr_assert_fail("bad dtype");
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Scalar references                                                         */
/* ------------------------------------------------------------------------ */

static int is_signed_int(plait_dtype_t d) {
  return d == PLAIT_INT8 || d == PLAIT_INT16 || d == PLAIT_INT32 ||
         d == PLAIT_INT64;
}

/* Integer element as int64 (signed types sign-extended) or uint64. */
static int64_t load_s(plait_dtype_t d, const void *p) {
  switch (d) {
    case PLAIT_INT8: return *(const int8_t *)p;
    case PLAIT_INT16: return *(const int16_t *)p;
    case PLAIT_INT32: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
  }
}

static uint64_t load_u(plait_dtype_t d, const void *p) {
  switch (d) {
    case PLAIT_UINT8: return *(const uint8_t *)p;
    case PLAIT_UINT16: return *(const uint16_t *)p;
    default: return (uint64_t)load_s(d, p);
  }
}

/* Low bytes of v (little or big endian alike). */
static void store_low(plait_dtype_t d, void *p, uint64_t v) {
  switch (dsize(d)) {
    case 1: { uint8_t t = (uint8_t)v; memcpy(p, &t, 1); break; }
    case 2: { uint16_t t = (uint16_t)v; memcpy(p, &t, 2); break; }
    case 4: { uint32_t t = (uint32_t)v; memcpy(p, &t, 4); break; }
    default: memcpy(p, &v, 8);
  }
}

static float ref_minmax_f(plait_op_t op, float x, float y) {
  if (isnan(x) || isnan(y)) return NAN;
  if (x == y) return x; /* documented: equal inputs give a */
  return op == PLAIT_OP_MIN ? (x < y ? x : y) : (x > y ? x : y);
}

static double ref_minmax_d(plait_op_t op, double x, double y) {
  if (isnan(x) || isnan(y)) return NAN;
  if (x == y) return x;
  return op == PLAIT_OP_MIN ? (x < y ? x : y) : (x > y ? x : y);
}

static float ref_op_f(plait_op_t op, float x, float y) {
  switch (op) {
    case PLAIT_OP_SUM:
    case PLAIT_OP_AVERAGE: return x + y;
    case PLAIT_OP_PRODUCT: return x * y;
    default: return ref_minmax_f(op, x, y);
  }
}

static double ref_op_d(plait_op_t op, double x, double y) {
  switch (op) {
    case PLAIT_OP_SUM:
    case PLAIT_OP_AVERAGE: return x + y;
    case PLAIT_OP_PRODUCT: return x * y;
    default: return ref_minmax_d(op, x, y);
  }
}

static void ref_reduce_elem(plait_dtype_t d, plait_op_t op, const void *pa,
                            const void *pb, void *out) {
  switch (d) {
    case PLAIT_BOOL: {
      const int x = *(const uint8_t *)pa != 0, y = *(const uint8_t *)pb != 0;
      const int r = (op == PLAIT_OP_SUM || op == PLAIT_OP_MAX) ? (x || y)
                                                               : (x && y);
      *(uint8_t *)out = (uint8_t)r;
      return;
    }
    case PLAIT_FLOAT16: {
      const float r = ref_op_f(op, ref_h2f(*(const uint16_t *)pa),
                               ref_h2f(*(const uint16_t *)pb));
      *(uint16_t *)out = ref_f2h(r);
      return;
    }
    case PLAIT_BFLOAT16: {
      const float r = ref_op_f(op, ref_bf2f(*(const uint16_t *)pa),
                               ref_bf2f(*(const uint16_t *)pb));
      *(uint16_t *)out = ref_f2bf(r);
      return;
    }
    case PLAIT_FLOAT32:
      *(float *)out = ref_op_f(op, *(const float *)pa, *(const float *)pb);
      return;
    case PLAIT_FLOAT64:
      *(double *)out = ref_op_d(op, *(const double *)pa, *(const double *)pb);
      return;
    default: break;
  }
  /* Integers: wrap in 64 bits, keep the low bits. */
  const uint64_t ux = load_u(d, pa), uy = load_u(d, pb);
  uint64_t r;
  if (op == PLAIT_OP_SUM || op == PLAIT_OP_AVERAGE) {
    r = ux + uy;
  } else if (op == PLAIT_OP_PRODUCT) {
    r = ux * uy;
  } else if (is_signed_int(d)) {
    const int64_t sx = load_s(d, pa), sy = load_s(d, pb);
    r = (uint64_t)((op == PLAIT_OP_MIN) == (sx < sy) ? sx : sy);
  } else {
    r = (op == PLAIT_OP_MIN) == (ux < uy) ? ux : uy;
  }
  store_low(d, out, r);
}

/* Equal bits, or NaN on both sides for floating types. */
static int elem_equal(plait_dtype_t d, const void *x, const void *y) {
  switch (d) {
    case PLAIT_FLOAT16: {
      const uint16_t a = *(const uint16_t *)x, b = *(const uint16_t *)y;
      return a == b || (h_isnan(a) && h_isnan(b));
    }
    case PLAIT_BFLOAT16: {
      const uint16_t a = *(const uint16_t *)x, b = *(const uint16_t *)y;
      return a == b || (bf_isnan(a) && bf_isnan(b));
    }
    case PLAIT_FLOAT32: {
      const float a = *(const float *)x, b = *(const float *)y;
      return fbits(a) == fbits(b) || (isnan(a) && isnan(b));
    }
    case PLAIT_FLOAT64: {
      const double a = *(const double *)x, b = *(const double *)y;
      return dbits(a) == dbits(b) || (isnan(a) && isnan(b));
    }
    default:
      return memcmp(x, y, dsize(d)) == 0;
  }
}

static void hex(plait_dtype_t d, const void *p, char *out, size_t len) {
  uint64_t v = 0;
  memcpy(&v, p, dsize(d)); /* little-endian display */
  snprintf(out, len, "0x%0*" PRIx64, (int)(2 * dsize(d)), v);
}

/* ------------------------------------------------------------------------ */
/* Drivers                                                                   */
/* ------------------------------------------------------------------------ */

enum alias { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B, ALIAS_ALL, ALIAS_A_B };
static const char *kAliasText[] = {"dst separate", "dst == a", "dst == b",
                                   "dst == a == b", "a == b"};

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  cr_assert_not_null(p);
  return p;
}

static void check_reduce(plait_dtype_t d, plait_op_t op, size_t n,
                         enum alias mode) {
  const size_t es = dsize(d), bytes = n * es;
  char *a = xmalloc(bytes), *b = xmalloc(bytes), *dst = xmalloc(bytes);
  char *want = xmalloc(bytes);
  fill(d, a, n);
  fill(d, b, n);
  fill(d, dst, n);
  if (mode == ALIAS_ALL || mode == ALIAS_A_B) memcpy(b, a, bytes);
  for (size_t i = 0; i < n; i++)
    ref_reduce_elem(d, op, a + i * es, b + i * es, want + i * es);

  const void *pa = a, *pb = b;
  void *pd = dst;
  switch (mode) {
    case ALIAS_NONE: break;
    case ALIAS_DST_A: memcpy(dst, a, bytes); pa = dst; break;
    case ALIAS_DST_B: memcpy(dst, b, bytes); pb = dst; break;
    case ALIAS_ALL: memcpy(dst, a, bytes); pa = pb = dst; break;
    case ALIAS_A_B: pb = a; break;
  }
  const plait_result_t rc = plait_reduce(d, op, pd, pa, pb, n);
  cr_assert_eq(rc, PLAIT_SUCCESS, "%s %s n=%zu %s: rc %d", dtype_text(d),
               op_text(op), n, kAliasText[mode], (int)rc);
  for (size_t i = 0; i < n; i++) {
    if (!elem_equal(d, dst + i * es, want + i * es)) {
      char sa[24], sb[24], sg[24], sw[24];
      hex(d, a + i * es, sa, sizeof sa);
      hex(d, b + i * es, sb, sizeof sb);
      hex(d, dst + i * es, sg, sizeof sg);
      hex(d, want + i * es, sw, sizeof sw);
      cr_assert_fail("%s %s n=%zu %s: [%zu] %s op %s gave %s, want %s",
                     dtype_text(d), op_text(op), n, kAliasText[mode], i, sa,
                     sb, sg, sw);
    }
  }
  free(a);
  free(b);
  free(dst);
  free(want);
}

static void check_all_reduce(plait_dtype_t d) {
  for (int op = 0; op < PLAIT_OP_COUNT_; op++) {
    if (d == PLAIT_BOOL && op == PLAIT_OP_AVERAGE) {
      uint8_t x = 1;
      cr_assert_eq(plait_reduce(d, (plait_op_t)op, &x, &x, &x, 1),
                   PLAIT_ERR_INVALID_ARGUMENT);
      continue;
    }
    for (size_t s = 0; s < NSIZES; s++)
      for (int mode = ALIAS_NONE; mode <= ALIAS_A_B; mode++)
        check_reduce(d, (plait_op_t)op, kSizes[s], (enum alias)mode);
  }
}

/* Reference scale of one element: Horovod 0.28's ScaleBufferCPUImpl (the
 * factor rounded to float for float32 and float16, whose product is a float
 * multiplication; bfloat16 as float16). volatile keeps the float product
 * from being formed in any wider precision. */
static void ref_scale_elem(plait_dtype_t d, const void *p, void *out,
                           double f) {
  volatile float ff = (float)f, prod;
  switch (d) {
    case PLAIT_FLOAT16:
      prod = ff * ref_h2f(*(const uint16_t *)p);
      *(uint16_t *)out = ref_f2h(prod);
      return;
    case PLAIT_BFLOAT16:
      prod = ff * ref_bf2f(*(const uint16_t *)p);
      *(uint16_t *)out = ref_f2bf(prod);
      return;
    case PLAIT_FLOAT32:
      prod = ff * *(const float *)p;
      *(float *)out = prod;
      return;
    case PLAIT_FLOAT64:
      *(double *)out = *(const double *)p * f;
      return;
    default: break;
  }
  const double x =
      is_signed_int(d) ? (double)load_s(d, p) : (double)load_u(d, p);
  const double t = trunc(x * f);
  int64_t lo, hi;
  switch (d) {
    case PLAIT_UINT8: lo = 0; hi = UINT8_MAX; break;
    case PLAIT_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case PLAIT_UINT16: lo = 0; hi = UINT16_MAX; break;
    case PLAIT_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    case PLAIT_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
    default: lo = INT64_MIN; hi = INT64_MAX; break;
  }
  int64_t r;
  if (isnan(t))
    r = 0;
  else if (t >= 0x1p63 || (d != PLAIT_INT64 && t > (double)hi))
    r = hi;
  else if (t < -0x1p63 || (d != PLAIT_INT64 && t < (double)lo))
    r = lo;
  else
    r = (int64_t)t;
  store_low(d, out, (uint64_t)r);
}

static void ref_divide_elem(plait_dtype_t d, const void *p, void *out,
                            uint32_t div) {
  switch (d) {
    case PLAIT_FLOAT16:
      *(uint16_t *)out = ref_f2h(ref_h2f(*(const uint16_t *)p) / (float)div);
      return;
    case PLAIT_BFLOAT16:
      *(uint16_t *)out = ref_f2bf(ref_bf2f(*(const uint16_t *)p) / (float)div);
      return;
    case PLAIT_FLOAT32:
      *(float *)out = *(const float *)p / (float)div;
      return;
    case PLAIT_FLOAT64:
      *(double *)out = *(const double *)p / (double)div;
      return;
    default: break;
  }
  if (is_signed_int(d))
    store_low(d, out, (uint64_t)(load_s(d, p) / (int64_t)div));
  else
    store_low(d, out, load_u(d, p) / div);
}

/* kind 0: scale by f; kind 1: divide by div. */
static void check_unary(plait_dtype_t d, int kind, double f, uint32_t div,
                        size_t n, int in_place) {
  const size_t es = dsize(d), bytes = n * es;
  char *src = xmalloc(bytes), *dst = xmalloc(bytes), *want = xmalloc(bytes);
  fill(d, src, n);
  fill(d, dst, n);
  for (size_t i = 0; i < n; i++) {
    if (kind == 0)
      ref_scale_elem(d, src + i * es, want + i * es, f);
    else
      ref_divide_elem(d, src + i * es, want + i * es, div);
  }
  const void *ps = src;
  if (in_place) {
    memcpy(dst, src, bytes);
    ps = dst;
  }
  const plait_result_t rc = kind == 0 ? plait_scale(d, dst, ps, n, f)
                                      : plait_divide(d, dst, ps, n, div);
  cr_assert_eq(rc, PLAIT_SUCCESS, "%s rc %d", dtype_text(d), (int)rc);
  for (size_t i = 0; i < n; i++) {
    if (!elem_equal(d, dst + i * es, want + i * es)) {
      char ss[24], sg[24], sw[24];
      hex(d, src + i * es, ss, sizeof ss);
      hex(d, dst + i * es, sg, sizeof sg);
      hex(d, want + i * es, sw, sizeof sw);
      if (kind == 0)
        cr_assert_fail("scale %s n=%zu%s: [%zu] %s * %.17g gave %s, want %s",
                       dtype_text(d), n, in_place ? " in place" : "", i, ss,
                       f, sg, sw);
      else
        cr_assert_fail("divide %s n=%zu%s: [%zu] %s / %u gave %s, want %s",
                       dtype_text(d), n, in_place ? " in place" : "", i, ss,
                       div, sg, sw);
    }
  }
  free(src);
  free(dst);
  free(want);
}

static const double kFactors[] = {1.0,  0.5,   2.0,   -1.5, 1.0 / 3.0,
                                  0.0,  -0.0,  1e10,  -1e10, 1e-300,
                                  1e300, NAN, INFINITY, 0.125, 65537.5};
static const uint32_t kDivisors[] = {1,    2,     3,         7,
                                     8,    255,   256,       1000,
                                     65535, 65536, 0x80000000u, UINT32_MAX};

static void check_all_unary(plait_dtype_t d) {
  for (size_t s = 0; s < NSIZES; s++) {
    for (int in_place = 0; in_place < 2; in_place++) {
      for (size_t k = 0; k < sizeof kFactors / sizeof kFactors[0]; k++)
        check_unary(d, 0, kFactors[k], 0, kSizes[s], in_place);
      for (size_t k = 0; k < sizeof kDivisors / sizeof kDivisors[0]; k++)
        check_unary(d, 1, 0.0, kDivisors[k], kSizes[s], in_place);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Every dtype x op against the reference                                    */
/* ------------------------------------------------------------------------ */

#define DTYPE_TESTS(name, dtype)                                               \
  Test(reduce, name) { check_all_reduce(dtype); }                              \
  Test(scale_divide, name) {                                                   \
    if (dtype == PLAIT_BOOL) {                                                 \
      uint8_t x = 1;                                                           \
      cr_assert_eq(plait_scale(dtype, &x, &x, 1, 2.0),                         \
                   PLAIT_ERR_INVALID_ARGUMENT);                                \
      cr_assert_eq(plait_divide(dtype, &x, &x, 1, 2),                          \
                   PLAIT_ERR_INVALID_ARGUMENT);                                \
      cr_assert_eq(x, 1);                                                      \
      return;                                                                  \
    }                                                                          \
    check_all_unary(dtype);                                                    \
  }

DTYPE_TESTS(uint8, PLAIT_UINT8)
DTYPE_TESTS(int8, PLAIT_INT8)
DTYPE_TESTS(uint16, PLAIT_UINT16)
DTYPE_TESTS(int16, PLAIT_INT16)
DTYPE_TESTS(int32, PLAIT_INT32)
DTYPE_TESTS(int64, PLAIT_INT64)
DTYPE_TESTS(float16, PLAIT_FLOAT16)
DTYPE_TESTS(bfloat16, PLAIT_BFLOAT16)
DTYPE_TESTS(float32, PLAIT_FLOAT32)
DTYPE_TESTS(float64, PLAIT_FLOAT64)
DTYPE_TESTS(bool, PLAIT_BOOL)

/* ------------------------------------------------------------------------ */
/* float16 and bfloat16 conversions                                          */
/* ------------------------------------------------------------------------ */

Test(half, float16_known_bits_to_float) {
  static const struct {
    uint16_t h;
    float f;
  } cases[] = {
      {0x3c00, 1.0f},           {0xbc00, -1.0f},
      {0xc000, -2.0f},          {0x7bff, 65504.0f},
      {0xfbff, -65504.0f},      {0x0001, 0x1p-24f},
      {0x03ff, 1023 * 0x1p-24f}, {0x0400, 0x1p-14f},
      {0x3555, 0.333251953125f}, {0x3bff, 1.0f - 0x1p-11f},
      {0x7c00, INFINITY},       {0xfc00, -INFINITY},
      {0x0000, 0.0f},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const float got = plait_half_to_float(cases[i].h);
    cr_assert_eq(fbits(got), fbits(cases[i].f), "0x%04x -> %a, want %a",
                 cases[i].h, (double)got, (double)cases[i].f);
  }
  cr_assert_eq(fbits(plait_half_to_float(0x8000)), 0x80000000u, "-0");
  /* NaN keeps sign and payload. */
  cr_assert_eq(fbits(plait_half_to_float(0x7e00)), 0x7fc00000u);
  cr_assert_eq(fbits(plait_half_to_float(0x7c01)), 0x7f802000u);
  cr_assert_eq(fbits(plait_half_to_float(0xfd55)), 0xffaaa000u);
}

Test(half, float16_known_bits_from_float) {
  static const struct {
    float f;
    uint16_t h;
  } cases[] = {
      {1.0f, 0x3c00},
      {1.0f + 0x1p-11f, 0x3c00},            /* tie: down to even */
      {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01}, /* just above the tie */
      {1.0f + 3 * 0x1p-11f, 0x3c02},        /* tie: up to even */
      {1.0f - 0x1p-12f, 0x3c00},            /* tie below 1: up to even */
      {65504.0f, 0x7bff},
      {65519.99609375f, 0x7bff},            /* largest float below 65520 */
      {65520.0f, 0x7c00},                   /* tie: rounds up into Inf */
      {-65520.0f, 0xfc00},
      {1e6f, 0x7c00},
      {FLT_MAX, 0x7c00},
      {-FLT_MAX, 0xfc00},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {0x1p-14f, 0x0400},                   /* smallest normal */
      {0x1p-24f, 0x0001},                   /* smallest subnormal */
      {0x1p-25f, 0x0000},                   /* tie: down to even 0 */
      {0x1p-25f + 0x1p-40f, 0x0001},
      {-0x1p-25f, 0x8000},
      {3 * 0x1p-25f, 0x0002},               /* tie: up to even */
      {5 * 0x1p-25f, 0x0002},               /* tie: down to even */
      {1023.5f * 0x1p-24f, 0x0400},         /* tie: up into the normals */
      {1023.25f * 0x1p-24f, 0x03ff},
      {0x1p-26f, 0x0000},
      {FLT_MIN, 0x0000},
      {1e-45f, 0x0000},                     /* float subnormal */
      {-1e-45f, 0x8000},
      {0.1f, 0x2e66},
      {-3.14159265f, 0xc248},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uint16_t got = plait_float_to_half(cases[i].f);
    cr_assert_eq(got, cases[i].h, "%a -> 0x%04x, want 0x%04x",
                 (double)cases[i].f, got, cases[i].h);
    cr_assert_eq(ref_f2h(cases[i].f), cases[i].h, "reference: %a",
                 (double)cases[i].f);
  }
  /* NaN stays NaN (never Inf), is quiet, keeps sign and top payload. */
  cr_assert_eq(plait_float_to_half(NAN) & 0x7e00, 0x7e00);
  cr_assert_eq(plait_float_to_half(bitsf(0x7f800001u)), 0x7e00); /* sNaN */
  cr_assert_eq(plait_float_to_half(bitsf(0xff800001u)), 0xfe00);
  cr_assert_eq(plait_float_to_half(bitsf(0x7faaa000u)), 0x7f55);
}

Test(half, float16_every_value_round_trips) {
  for (uint32_t h = 0; h <= 0xffff; h++) {
    const float f = plait_half_to_float((uint16_t)h);
    const float r = ref_h2f((uint16_t)h);
    if (h_isnan((uint16_t)h)) {
      const uint32_t want = ((h & 0x8000u) << 16) | 0x7f800000u |
                            ((h & 0x3ffu) << 13);
      cr_assert_eq(fbits(f), want, "0x%04x", h);
      cr_assert_eq(plait_float_to_half(f), h | 0x0200u, "0x%04x", h);
    } else {
      cr_assert_eq(fbits(f), fbits(r), "0x%04x -> %a, want %a", h, (double)f,
                   (double)r);
      cr_assert_eq(plait_float_to_half(f), h, "0x%04x round trip", h);
    }
  }
}

/* Every tie between neighbouring float16 values, and a float either side. */
Test(half, float16_every_tie) {
  /* Stops below 0x7bff: the tie 65520 above 65504 rounds to Inf, checked in
   * float16_known_bits_from_float. */
  for (uint32_t h = 0; h < 0x7bff; h++) {
    for (uint32_t s = 0; s <= 0x8000; s += 0x8000) {
      const float lo = ref_h2f((uint16_t)(h | s));
      const float hi = ref_h2f((uint16_t)((h + 1) | s));
      const float mid = (lo + hi) / 2; /* exact: 12 significant bits */
      const uint16_t even =
          (h & 1) ? (uint16_t)((h + 1) | s) : (uint16_t)(h | s);
      cr_assert_eq(plait_float_to_half(mid), even, "tie %a", (double)mid);
      cr_assert_eq(ref_f2h(mid), even, "reference tie %a", (double)mid);
      const float below = nextafterf(mid, lo), above = nextafterf(mid, hi);
      cr_assert_eq(plait_float_to_half(below), (uint16_t)(h | s), "%a",
                   (double)below);
      cr_assert_eq(plait_float_to_half(above), (uint16_t)((h + 1) | s), "%a",
                   (double)above);
    }
  }
}

Test(half, float16_sampled_floats) {
  /* A stride through all float bit patterns, then random ones. */
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4093) {
    const float f = bitsf((uint32_t)u);
    const uint16_t got = plait_float_to_half(f), want = ref_f2h(f);
    cr_assert(got == want || (h_isnan(got) && h_isnan(want)),
              "0x%08" PRIx64 " -> 0x%04x, want 0x%04x", u, got, want);
  }
  for (int i = 0; i < 1 << 20; i++) {
    const float f = rnd_float();
    const uint16_t got = plait_float_to_half(f), want = ref_f2h(f);
    cr_assert(got == want || (h_isnan(got) && h_isnan(want)),
              "0x%08x -> 0x%04x, want 0x%04x", fbits(f), got, want);
  }
}

Test(half, bfloat16_known_bits) {
  static const struct {
    uint32_t f;
    uint16_t h;
  } cases[] = {
      {0x3f800000u, 0x3f80}, /* 1.0 */
      {0x3f808000u, 0x3f80}, /* tie: down to even */
      {0x3f818000u, 0x3f82}, /* tie: up to even */
      {0x3f808001u, 0x3f81},
      {0x3f807fffu, 0x3f80},
      {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to Inf */
      {0x7f7f7fffu, 0x7f7f},
      {0xff7fffffu, 0xff80},
      {0x7f800000u, 0x7f80}, /* Inf */
      {0xff800000u, 0xff80},
      {0x7f800001u, 0x7fc0}, /* sNaN with low payload: NaN, not Inf */
      {0xff800001u, 0xffc0},
      {0x7fc00000u, 0x7fc0},
      {0x7fa50000u, 0x7fe5}, /* payload kept, made quiet */
      {0x00000001u, 0x0000}, /* float subnormals */
      {0x00008000u, 0x0000}, /* tie: down to even */
      {0x00018000u, 0x0002}, /* tie: up to even */
      {0x80000000u, 0x8000}, /* -0 */
      {0xc0490fdbu, 0xc049}, /* -pi */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uint16_t got = plait_float_to_bf16(bitsf(cases[i].f));
    cr_assert_eq(got, cases[i].h, "0x%08x -> 0x%04x, want 0x%04x",
                 cases[i].f, got, cases[i].h);
  }
  for (uint32_t h = 0; h <= 0xffff; h++) {
    cr_assert_eq(fbits(plait_bf16_to_float((uint16_t)h)), h << 16);
    const uint16_t back = plait_float_to_bf16(plait_bf16_to_float((uint16_t)h));
    cr_assert_eq(back, bf_isnan((uint16_t)h) ? (h | 0x40u) : h, "0x%04x", h);
  }
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4093) {
    const float f = bitsf((uint32_t)u);
    cr_assert_eq(plait_float_to_bf16(f), ref_f2bf(f), "0x%08" PRIx64, u);
  }
}

/* ------------------------------------------------------------------------ */
/* Edge cases, spelled out                                                   */
/* ------------------------------------------------------------------------ */

#define REDUCE1(T, dtype, op, x, y, want)                                      \
  do {                                                                         \
    const T a_ = (x), b_ = (y);                                                \
    T d_ = 0;                                                                  \
    cr_assert_eq(plait_reduce(dtype, op, &d_, &a_, &b_, 1), PLAIT_SUCCESS);    \
    cr_assert(d_ == (T)(want), "%s %s: got %lld, want %lld",                   \
              dtype_text(dtype), op_text(op), (long long)d_,                   \
              (long long)(T)(want));                                           \
  } while (0)

Test(reduce_edges, integer_overflow_wraps) {
  REDUCE1(uint8_t, PLAIT_UINT8, PLAIT_OP_SUM, 255, 1, 0);
  REDUCE1(uint8_t, PLAIT_UINT8, PLAIT_OP_PRODUCT, 16, 16, 0);
  REDUCE1(int8_t, PLAIT_INT8, PLAIT_OP_SUM, 127, 1, -128);
  REDUCE1(int8_t, PLAIT_INT8, PLAIT_OP_SUM, -128, -1, 127);
  REDUCE1(int8_t, PLAIT_INT8, PLAIT_OP_PRODUCT, -128, -1, -128);
  REDUCE1(int8_t, PLAIT_INT8, PLAIT_OP_MIN, -128, 127, -128);
  REDUCE1(int8_t, PLAIT_INT8, PLAIT_OP_MAX, -128, 127, 127);
  REDUCE1(uint16_t, PLAIT_UINT16, PLAIT_OP_PRODUCT, 65535, 65535, 1);
  REDUCE1(uint16_t, PLAIT_UINT16, PLAIT_OP_SUM, 65535, 65535, 65534);
  REDUCE1(int16_t, PLAIT_INT16, PLAIT_OP_PRODUCT, INT16_MIN, -1, INT16_MIN);
  REDUCE1(int16_t, PLAIT_INT16, PLAIT_OP_SUM, INT16_MAX, 1, INT16_MIN);
  REDUCE1(int32_t, PLAIT_INT32, PLAIT_OP_SUM, INT32_MAX, 1, INT32_MIN);
  REDUCE1(int32_t, PLAIT_INT32, PLAIT_OP_AVERAGE, INT32_MAX, 1, INT32_MIN);
  REDUCE1(int32_t, PLAIT_INT32, PLAIT_OP_PRODUCT, INT32_MIN, -1, INT32_MIN);
  REDUCE1(int32_t, PLAIT_INT32, PLAIT_OP_PRODUCT, 65536, 65536, 0);
  REDUCE1(int32_t, PLAIT_INT32, PLAIT_OP_PRODUCT, 46341, 46341, -2147479015);
  REDUCE1(int64_t, PLAIT_INT64, PLAIT_OP_SUM, INT64_MAX, 1, INT64_MIN);
  REDUCE1(int64_t, PLAIT_INT64, PLAIT_OP_PRODUCT, INT64_MIN, -1, INT64_MIN);
  REDUCE1(int64_t, PLAIT_INT64, PLAIT_OP_PRODUCT, 1ll << 32, 1ll << 32, 0);
  REDUCE1(int64_t, PLAIT_INT64, PLAIT_OP_MIN, INT64_MIN, INT64_MAX, INT64_MIN);
  REDUCE1(int64_t, PLAIT_INT64, PLAIT_OP_MAX, INT64_MIN, INT64_MAX, INT64_MAX);
}

Test(reduce_edges, bool_normalised) {
  const uint8_t a[] = {0, 1, 2, 0x80, 0xff, 0, 7, 0};
  const uint8_t b[] = {0, 0, 0, 0x40, 1, 3, 0, 0xfe};
  const uint8_t want_or[] = {0, 1, 1, 1, 1, 1, 1, 1};
  const uint8_t want_and[] = {0, 0, 0, 1, 1, 0, 0, 0};
  uint8_t d[8];
  cr_assert_eq(plait_reduce(PLAIT_BOOL, PLAIT_OP_SUM, d, a, b, 8), 0);
  cr_assert_arr_eq(d, want_or, 8);
  cr_assert_eq(plait_reduce(PLAIT_BOOL, PLAIT_OP_MAX, d, a, b, 8), 0);
  cr_assert_arr_eq(d, want_or, 8);
  cr_assert_eq(plait_reduce(PLAIT_BOOL, PLAIT_OP_MIN, d, a, b, 8), 0);
  cr_assert_arr_eq(d, want_and, 8);
  cr_assert_eq(plait_reduce(PLAIT_BOOL, PLAIT_OP_PRODUCT, d, a, b, 8), 0);
  cr_assert_arr_eq(d, want_and, 8);
  /* In place, a == b: every nonzero byte becomes 1. */
  memcpy(d, a, 8);
  cr_assert_eq(plait_reduce(PLAIT_BOOL, PLAIT_OP_MIN, d, d, d, 8), 0);
  const uint8_t want_self[] = {0, 1, 1, 1, 1, 0, 1, 0};
  cr_assert_arr_eq(d, want_self, 8);
}

static uint16_t reduce_h(plait_dtype_t d, plait_op_t op, uint16_t x,
                         uint16_t y) {
  uint16_t r = 0;
  cr_assert_eq(plait_reduce(d, op, &r, &x, &y, 1), PLAIT_SUCCESS);
  return r;
}

Test(reduce_edges, float16_rounding) {
  const plait_dtype_t H = PLAIT_FLOAT16;
  /* 1 + 2^-11 is a tie: to even 1.0; 1 + 2^-10 + 2^-11 ties up. */
  cr_assert_eq(reduce_h(H, PLAIT_OP_SUM, 0x3c00, 0x1000), 0x3c00);
  cr_assert_eq(reduce_h(H, PLAIT_OP_SUM, 0x3c01, 0x1000), 0x3c02);
  cr_assert_eq(reduce_h(H, PLAIT_OP_SUM, 0x7bff, 0x4800), 0x7bff); /* +8 */
  cr_assert_eq(reduce_h(H, PLAIT_OP_SUM, 0x7bff, 0x4c00), 0x7c00); /* +16 */
  cr_assert_eq(reduce_h(H, PLAIT_OP_SUM, 0x0001, 0x0001), 0x0002);
  cr_assert_eq(reduce_h(H, PLAIT_OP_SUM, 0x03ff, 0x0001), 0x0400);
  cr_assert_eq(reduce_h(H, PLAIT_OP_SUM, 0x0001, 0x8001), 0x0000);
  cr_assert_eq(reduce_h(H, PLAIT_OP_PRODUCT, 0x0001, 0x3800), 0x0000);
  cr_assert_eq(reduce_h(H, PLAIT_OP_PRODUCT, 0x0003, 0x3800), 0x0002);
  cr_assert_eq(reduce_h(H, PLAIT_OP_PRODUCT, 0x5c00, 0x5c00), 0x7c00);
  cr_assert_eq(reduce_h(H, PLAIT_OP_MIN, 0x0001, 0x8001), 0x8001);
  cr_assert_eq(reduce_h(H, PLAIT_OP_MAX, 0x0001, 0x8001), 0x0001);
}

Test(reduce_edges, bfloat16_rounding) {
  const plait_dtype_t B = PLAIT_BFLOAT16;
  cr_assert_eq(reduce_h(B, PLAIT_OP_SUM, 0x3f80, 0x3b80), 0x3f80); /* tie */
  cr_assert_eq(reduce_h(B, PLAIT_OP_SUM, 0x3f81, 0x3b80), 0x3f82); /* tie */
  cr_assert_eq(reduce_h(B, PLAIT_OP_SUM, 0x7f7f, 0x7f7f), 0x7f80); /* Inf */
  cr_assert_eq(reduce_h(B, PLAIT_OP_PRODUCT, 0x3fc0, 0x3fc0), 0x4010);
}

/* NaN and Inf through each floating dtype, via float32 values. */
static float reduce_via(plait_dtype_t d, plait_op_t op, float x, float y) {
  switch (d) {
    case PLAIT_FLOAT16:
      return ref_h2f(reduce_h(d, op, ref_f2h(x), ref_f2h(y)));
    case PLAIT_BFLOAT16:
      return ref_bf2f(reduce_h(d, op, ref_f2bf(x), ref_f2bf(y)));
    case PLAIT_FLOAT32: {
      float r = 0;
      cr_assert_eq(plait_reduce(d, op, &r, &x, &y, 1), PLAIT_SUCCESS);
      return r;
    }
    default: {
      double dx = x, dy = y, r = 0;
      cr_assert_eq(plait_reduce(d, op, &r, &dx, &dy, 1), PLAIT_SUCCESS);
      return (float)r;
    }
  }
}

Test(reduce_edges, nan_and_inf) {
  const plait_dtype_t fl[] = {PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32,
                              PLAIT_FLOAT64};
  for (size_t i = 0; i < 4; i++) {
    const plait_dtype_t d = fl[i];
    const char *n = dtype_text(d);
    cr_assert(isnan(reduce_via(d, PLAIT_OP_SUM, INFINITY, -INFINITY)), "%s", n);
    cr_assert(isnan(reduce_via(d, PLAIT_OP_SUM, NAN, 1.0f)), "%s", n);
    cr_assert(isnan(reduce_via(d, PLAIT_OP_PRODUCT, INFINITY, 0.0f)), "%s", n);
    cr_assert_eq(reduce_via(d, PLAIT_OP_SUM, INFINITY, 1.0f), INFINITY, "%s",
                 n);
    cr_assert_eq(reduce_via(d, PLAIT_OP_PRODUCT, -INFINITY, 2.0f), -INFINITY,
                 "%s", n);
    for (int op = PLAIT_OP_MIN; op <= PLAIT_OP_MAX; op++) {
      cr_assert(isnan(reduce_via(d, (plait_op_t)op, NAN, 1.0f)), "%s", n);
      cr_assert(isnan(reduce_via(d, (plait_op_t)op, 1.0f, NAN)), "%s", n);
      cr_assert(isnan(reduce_via(d, (plait_op_t)op, NAN, INFINITY)), "%s", n);
      cr_assert(isnan(reduce_via(d, (plait_op_t)op, -INFINITY, NAN)), "%s", n);
      cr_assert(isnan(reduce_via(d, (plait_op_t)op, NAN, NAN)), "%s", n);
    }
    cr_assert_eq(reduce_via(d, PLAIT_OP_MIN, -INFINITY, 1.0f), -INFINITY);
    cr_assert_eq(reduce_via(d, PLAIT_OP_MAX, -INFINITY, 1.0f), 1.0f);
    cr_assert_eq(reduce_via(d, PLAIT_OP_MAX, INFINITY, 1.0f), INFINITY);
    /* Equal inputs give a: the sign of zero follows a. */
    cr_assert(signbit(reduce_via(d, PLAIT_OP_MIN, -0.0f, 0.0f)), "%s", n);
    cr_assert(!signbit(reduce_via(d, PLAIT_OP_MIN, 0.0f, -0.0f)), "%s", n);
    cr_assert(signbit(reduce_via(d, PLAIT_OP_MAX, -0.0f, 0.0f)), "%s", n);
  }
}

/* NaN in the middle of a long buffer, in every lane position. */
Test(reduce_edges, nan_in_vector_lanes) {
  enum { N = 300 };
  float a[N], b[N], d[N];
  for (int pos = 0; pos < 20; pos++) {
    for (int i = 0; i < N; i++) a[i] = b[i] = (float)i;
    a[pos] = NAN;
    b[N - 1 - pos] = NAN;
    for (int op = PLAIT_OP_MIN; op <= PLAIT_OP_MAX; op++) {
      cr_assert_eq(plait_reduce(PLAIT_FLOAT32, (plait_op_t)op, d, a, b, N), 0);
      for (int i = 0; i < N; i++) {
        const int want_nan = i == pos || i == N - 1 - pos;
        cr_assert_eq(isnan(d[i]) != 0, want_nan, "op %d pos %d [%d]", op, pos,
                     i);
      }
    }
  }
}

Test(scale_edges, saturation_and_truncation) {
  {
    const int8_t x[] = {100, -100, 7, -7, 0, 127, -128};
    int8_t d[7];
    const int8_t twice[] = {127, -128, 14, -14, 0, 127, -128};
    const int8_t half[] = {50, -50, 3, -3, 0, 63, -64};
    cr_assert_eq(plait_scale(PLAIT_INT8, d, x, 7, 2.0), 0);
    cr_assert_arr_eq(d, twice, sizeof d);
    cr_assert_eq(plait_scale(PLAIT_INT8, d, x, 7, 0.5), 0);
    cr_assert_arr_eq(d, half, sizeof d);
    cr_assert_eq(plait_scale(PLAIT_INT8, d, x, 7, -1.0), 0);
    cr_assert_eq(d[6], 127); /* -(-128) saturates */
  }
  {
    const uint8_t x[] = {200, 1, 0};
    uint8_t d[3];
    cr_assert_eq(plait_scale(PLAIT_UINT8, d, x, 3, -1.0), 0);
    cr_assert(d[0] == 0 && d[1] == 0 && d[2] == 0);
    cr_assert_eq(plait_scale(PLAIT_UINT8, d, x, 3, 2.0), 0);
    cr_assert(d[0] == 255 && d[1] == 2 && d[2] == 0);
  }
  {
    const int32_t x[] = {0, 1, -1, 3, INT32_MAX, INT32_MIN};
    int32_t d[6];
    cr_assert_eq(plait_scale(PLAIT_INT32, d, x, 6, NAN), 0);
    for (int i = 0; i < 6; i++) cr_assert_eq(d[i], 0);
    cr_assert_eq(plait_scale(PLAIT_INT32, d, x, 6, INFINITY), 0);
    cr_assert_eq(d[0], 0); /* 0 * Inf is NaN */
    cr_assert_eq(d[1], INT32_MAX);
    cr_assert_eq(d[2], INT32_MIN);
    cr_assert_eq(plait_scale(PLAIT_INT32, d, x, 6, -0.5), 0);
    cr_assert(d[3] == -1 && d[4] == -1073741823 && d[5] == 1073741824);
  }
  {
    const int64_t x[] = {1, -1, INT64_MIN, INT64_MAX, 3};
    int64_t d[5];
    cr_assert_eq(plait_scale(PLAIT_INT64, d, x, 5, 1e30), 0);
    cr_assert(d[0] == INT64_MAX && d[1] == INT64_MIN && d[2] == INT64_MIN &&
              d[3] == INT64_MAX);
    cr_assert_eq(plait_scale(PLAIT_INT64, d, x, 5, 1.0), 0);
    cr_assert_eq(d[2], INT64_MIN);     /* -2^63 is exact */
    cr_assert_eq(d[3], INT64_MAX);     /* (double)INT64_MAX is 2^63 */
    cr_assert_eq(plait_scale(PLAIT_INT64, d, x, 5, -0.5), 0);
    cr_assert_eq(d[4], -1);
    cr_assert_eq(d[2], 1ll << 62);
  }
  {
    const uint16_t h[] = {0x3c00, 0x7bff, 0x7e00, 0x0001};
    uint16_t d[4];
    cr_assert_eq(plait_scale(PLAIT_FLOAT16, d, h, 4, 0.5), 0);
    cr_assert(d[0] == 0x3800 && d[1] == 0x77ff && h_isnan(d[2]) &&
              d[3] == 0x0000);
    cr_assert_eq(plait_scale(PLAIT_FLOAT16, d, h, 4, 2.0), 0);
    cr_assert(d[0] == 0x4000 && d[1] == 0x7c00 && d[3] == 0x0002);
  }
}

/* Known values of Horovod 0.28's CPU scaling (the factor rounded to float
 * for float32/float16, a float product; integers truncated in double),
 * where forming the product in double and rounding once would differ. */
Test(scale_edges, horovod_float_factor) {
  {
    const uint32_t xb[] = {0xbf3427feu, 0x3d29456eu};
    const uint32_t want[] = {0xbd901fffu, 0x3b876abfu}; /* double first: ...ffe, ...abe */
    float x[2], d[2];
    memcpy(x, xb, sizeof x);
    cr_assert_eq(plait_scale(PLAIT_FLOAT32, d, x, 2, 0.1), 0);
    for (int i = 0; i < 2; i++) {
      uint32_t got;
      memcpy(&got, &d[i], sizeof got);
      cr_assert_eq(got, want[i], "float32 %08x * 0.1 gave %08x, want %08x", xb[i], got,
                   want[i]);
    }
  }
  {
    const int32_t x[] = {7, -7, 3, 10};
    int32_t d[4];
    cr_assert_eq(plait_scale(PLAIT_INT32, d, x, 4, 0.1), 0);
    /* 7 * 0.1 = 0.7000000000000001 -> 0; 3 * 0.1 -> 0; 10 * 0.1 = 1.0 -> 1 */
    cr_assert(d[0] == 0 && d[1] == 0 && d[2] == 0 && d[3] == 1);
  }
}

Test(divide_edges, integer_hazards) {
  {
    const int8_t x[] = {-128, 127, -7, 7, -1};
    int8_t d[5];
    cr_assert_eq(plait_divide(PLAIT_INT8, d, x, 5, 1), 0);
    cr_assert_arr_eq(d, x, sizeof d);
    const int8_t by2[] = {-64, 63, -3, 3, 0};
    cr_assert_eq(plait_divide(PLAIT_INT8, d, x, 5, 2), 0);
    cr_assert_arr_eq(d, by2, sizeof d);
    const int8_t by128[] = {-1, 0, 0, 0, 0};
    cr_assert_eq(plait_divide(PLAIT_INT8, d, x, 5, 128), 0);
    cr_assert_arr_eq(d, by128, sizeof d);
    const int8_t zeros[5] = {0};
    cr_assert_eq(plait_divide(PLAIT_INT8, d, x, 5, 200), 0);
    cr_assert_arr_eq(d, zeros, sizeof d);
  }
  {
    int16_t x[] = {INT16_MIN, INT16_MAX};
    cr_assert_eq(plait_divide(PLAIT_INT16, x, x, 2, 32768), 0);
    cr_assert(x[0] == -1 && x[1] == 0);
  }
  {
    const int32_t x[] = {INT32_MIN, INT32_MAX, -7, 7};
    int32_t d[4];
    cr_assert_eq(plait_divide(PLAIT_INT32, d, x, 4, UINT32_MAX), 0);
    cr_assert(d[0] == 0 && d[1] == 0 && d[2] == 0 && d[3] == 0);
    cr_assert_eq(plait_divide(PLAIT_INT32, d, x, 4, 0x80000000u), 0);
    cr_assert(d[0] == -1 && d[1] == 0);
    cr_assert_eq(plait_divide(PLAIT_INT32, d, x, 4, 3), 0);
    cr_assert(d[0] == -715827882 && d[1] == 715827882 && d[2] == -2 &&
              d[3] == 2);
    cr_assert_eq(plait_divide(PLAIT_INT32, d, x, 4, 1), 0);
    cr_assert_arr_eq(d, x, sizeof d);
  }
  {
    const int64_t x[] = {INT64_MIN, INT64_MAX, -7};
    int64_t d[3];
    cr_assert_eq(plait_divide(PLAIT_INT64, d, x, 3, 1), 0);
    cr_assert_arr_eq(d, x, sizeof d);
    cr_assert_eq(plait_divide(PLAIT_INT64, d, x, 3, UINT32_MAX), 0);
    cr_assert(d[0] == -2147483648ll && d[1] == 2147483648ll && d[2] == 0);
    cr_assert_eq(plait_divide(PLAIT_INT64, d, x, 3, 2), 0);
    cr_assert(d[0] == -4611686018427387904ll &&
              d[1] == 4611686018427387903ll && d[2] == -3);
  }
  {
    const uint8_t x[] = {255, 1};
    uint8_t d[2];
    cr_assert_eq(plait_divide(PLAIT_UINT8, d, x, 2, 2), 0);
    cr_assert(d[0] == 127 && d[1] == 0);
  }
}

/* The double-precision path for <= 32-bit integers must be exact: try the
 * quotients closest to integers. */
Test(divide_edges, int32_exact_near_integers) {
  enum { N = 4096 };
  static int32_t x[N], d[N];
  const uint32_t divs[] = {3, 7, 1000003, 65537, 0x7fffffffu, 0xfffffffbu};
  for (size_t k = 0; k < sizeof divs / sizeof divs[0]; k++) {
    const int64_t dv = divs[k];
    for (int i = 0; i < N; i++) {
      /* Multiples of dv, one off either way, near the ends of the range. */
      const int64_t q = (int64_t)(rnd() % 2001) - 1000;
      int64_t v = (INT32_MAX / dv - (i % 7)) * dv + (i % 3) - 1;
      if (i & 8) v = q * dv + (i % 3) - 1;
      if (i & 16) v = -v;
      if (v > INT32_MAX) v = INT32_MAX;
      if (v < INT32_MIN) v = INT32_MIN;
      x[i] = (int32_t)v;
    }
    cr_assert_eq(plait_divide(PLAIT_INT32, d, x, N, divs[k]), 0);
    for (int i = 0; i < N; i++)
      cr_assert_eq(d[i], (int32_t)((int64_t)x[i] / dv), "%d / %u",
                   (int)x[i], (unsigned)dv);
  }
}

Test(divide_edges, int16_every_value) {
  static int16_t x[65536], d[65536];
  for (int i = 0; i < 65536; i++) x[i] = (int16_t)(i - 32768);
  for (uint32_t dv = 1; dv < 400; dv = dv < 40 ? dv + 1 : dv * 3 / 2) {
    cr_assert_eq(plait_divide(PLAIT_INT16, d, x, 65536, dv), 0);
    for (int i = 0; i < 65536; i++)
      cr_assert_eq(d[i], x[i] / (int32_t)dv, "%d / %u", x[i], (unsigned)dv);
  }
}

Test(divide_edges, floats) {
  float f = 1.0f;
  cr_assert_eq(plait_divide(PLAIT_FLOAT32, &f, &f, 1, 3), 0);
  cr_assert_eq(fbits(f), fbits(1.0f / 3.0f));
  double g = -1.0;
  cr_assert_eq(plait_divide(PLAIT_FLOAT64, &g, &g, 1, 3), 0);
  cr_assert_eq(dbits(g), dbits(-1.0 / 3.0));
  uint16_t h = 0x3c00; /* 1.0 / 3 = 0x3555 in float16 */
  cr_assert_eq(plait_divide(PLAIT_FLOAT16, &h, &h, 1, 3), 0);
  cr_assert_eq(h, 0x3555);
  h = 0x3f80; /* bfloat16 1.0 / 3 = 0x3eab */
  cr_assert_eq(plait_divide(PLAIT_BFLOAT16, &h, &h, 1, 3), 0);
  cr_assert_eq(h, 0x3eab);
  h = 0x0001; /* smallest subnormal / 2: tie to 0 */
  cr_assert_eq(plait_divide(PLAIT_FLOAT16, &h, &h, 1, 2), 0);
  cr_assert_eq(h, 0x0000);
}

/* ------------------------------------------------------------------------ */
/* Invalid arguments                                                         */
/* ------------------------------------------------------------------------ */

Test(invalid, reduce) {
  const plait_result_t E = PLAIT_ERR_INVALID_ARGUMENT;
  int32_t a = 5, b = 6, d = 77;
  const plait_op_t SUM = PLAIT_OP_SUM;
  cr_assert_eq(plait_reduce(PLAIT_DTYPE_COUNT_, SUM, &d, &a, &b, 1), E);
  cr_assert_eq(plait_reduce((plait_dtype_t)-1, SUM, &d, &a, &b, 1), E);
  cr_assert_eq(plait_reduce((plait_dtype_t)999, SUM, &d, &a, &b, 0), E);
  cr_assert_eq(plait_reduce(PLAIT_INT32, PLAIT_OP_COUNT_, &d, &a, &b, 1), E);
  cr_assert_eq(plait_reduce(PLAIT_INT32, (plait_op_t)-1, &d, &a, &b, 1), E);
  cr_assert_eq(plait_reduce(PLAIT_INT32, (plait_op_t)-1, 0, 0, 0, 0), E);
  cr_assert_eq(plait_reduce(PLAIT_BOOL, PLAIT_OP_AVERAGE, &d, &a, &b, 1), E);
  cr_assert_eq(plait_reduce(PLAIT_BOOL, PLAIT_OP_AVERAGE, 0, 0, 0, 0), E);
  cr_assert_eq(plait_reduce(PLAIT_INT32, SUM, NULL, &a, &b, 1), E);
  cr_assert_eq(plait_reduce(PLAIT_INT32, SUM, &d, NULL, &b, 1), E);
  cr_assert_eq(plait_reduce(PLAIT_INT32, SUM, &d, &a, NULL, 1), E);
  cr_assert_eq(d, 77, "nothing written on error");
  /* count 0 with NULL pointers is fine for every valid pair. */
  for (size_t i = 0; i < NDTYPES; i++)
    for (int op = 0; op < PLAIT_OP_COUNT_; op++)
      if (!(kDtypes[i] == PLAIT_BOOL && op == PLAIT_OP_AVERAGE))
        cr_assert_eq(plait_reduce(kDtypes[i], (plait_op_t)op, NULL, NULL,
                                  NULL, 0),
                     PLAIT_SUCCESS, "%s %s", dtype_text(kDtypes[i]),
                     op_text((plait_op_t)op));
}

Test(invalid, scale_and_divide) {
  const plait_result_t E = PLAIT_ERR_INVALID_ARGUMENT;
  int32_t s = 5, d = 77;
  cr_assert_eq(plait_scale(PLAIT_DTYPE_COUNT_, &d, &s, 1, 2.0), E);
  cr_assert_eq(plait_scale((plait_dtype_t)-1, &d, &s, 1, 2.0), E);
  cr_assert_eq(plait_scale(PLAIT_BOOL, &d, &s, 1, 2.0), E);
  cr_assert_eq(plait_scale(PLAIT_BOOL, NULL, NULL, 0, 2.0), E);
  cr_assert_eq(plait_scale(PLAIT_INT32, NULL, &s, 1, 2.0), E);
  cr_assert_eq(plait_scale(PLAIT_INT32, &d, NULL, 1, 2.0), E);
  cr_assert_eq(plait_divide(PLAIT_DTYPE_COUNT_, &d, &s, 1, 2), E);
  cr_assert_eq(plait_divide(PLAIT_BOOL, &d, &s, 1, 2), E);
  cr_assert_eq(plait_divide(PLAIT_BOOL, NULL, NULL, 0, 2), E);
  cr_assert_eq(plait_divide(PLAIT_INT32, NULL, &s, 1, 2), E);
  cr_assert_eq(plait_divide(PLAIT_INT32, &d, NULL, 1, 2), E);
  cr_assert_eq(d, 77, "nothing written on error");
  for (size_t i = 0; i < NDTYPES; i++) {
    const plait_dtype_t t = kDtypes[i];
    cr_assert_eq(plait_divide(t, &d, &s, 1, 0), E, "%s / 0", dtype_text(t));
    cr_assert_eq(plait_divide(t, NULL, NULL, 0, 0), E, "%s / 0", dtype_text(t));
    if (t == PLAIT_BOOL) continue;
    cr_assert_eq(plait_scale(t, NULL, NULL, 0, 2.0), PLAIT_SUCCESS);
    cr_assert_eq(plait_divide(t, NULL, NULL, 0, 2), PLAIT_SUCCESS);
  }
  cr_assert_eq(d, 77, "nothing written on error");
}

Test(invalid, function_types_match_the_abi) {
  cr_assert_not_null(reduce_fn_type_check);
  cr_assert_not_null(scale_fn_type_check);
  cr_assert_not_null(divide_fn_type_check);
}
