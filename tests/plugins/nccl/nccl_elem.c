/*
 * The host side of batch_copy's kernel, without a GPU: the element
 * arithmetic the kernel runs (plugins/nccl/elem.h, compiled here as C)
 * against the core's plait_scale and plait_divide bit for bit (every
 * float16 and bfloat16 value, float32/float64 and integer edge cases,
 * several factors and rank counts); the
 * identity bit patterns against the values they must encode; the fill
 * pattern; and the span table (batch_plan.c) with the kernel's chunk lookup:
 * every byte of every span covered exactly once, empty spans left out, bad
 * spans refused. The same elem.h is what nvcc compiles into the kernel.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_plan.h"
#include "elem.h"
#include "plait/dtypes.h"
#include "util/reduce.h"

static int checks, failed;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      if (failed++ < 20) {                                                     \
        printf("FAILED line %d: ", __LINE__);                                  \
        printf(__VA_ARGS__);                                                   \
        printf("\n");                                                          \
      }                                                                        \
    }                                                                          \
  } while (0)

static const double factors[] = {0.5, 1.0 / 3.0, 0.125, 2.0, -1.5, 1e-3, 7.0, 1e30, -0.0,
                                 1.0000001};
#define NF (sizeof factors / sizeof factors[0])

/* The kernel's per-element result for dtype, as bytes into out. */
static void elem_scale(plait_dtype_t d, const void *in, void *out, double p) {
  float pf = (float)p;
  switch (d) {
#define CASE(DT, T, FN, ARG)                                                   \
  case DT: {                                                                   \
    T x, r;                                                                    \
    memcpy(&x, in, sizeof x);                                                  \
    r = FN(x, ARG);                                                            \
    memcpy(out, &r, sizeof r);                                                 \
    break;                                                                     \
  }
    CASE(PLAIT_UINT8, uint8_t, nc_scale_u8, p)
    CASE(PLAIT_INT8, int8_t, nc_scale_i8, p)
    CASE(PLAIT_UINT16, uint16_t, nc_scale_u16, p)
    CASE(PLAIT_INT16, int16_t, nc_scale_i16, p)
    CASE(PLAIT_INT32, int32_t, nc_scale_i32, p)
    CASE(PLAIT_INT64, int64_t, nc_scale_i64, p)
    CASE(PLAIT_FLOAT16, uint16_t, nc_scale_f16, pf)
    CASE(PLAIT_BFLOAT16, uint16_t, nc_scale_bf16, pf)
    CASE(PLAIT_FLOAT32, float, nc_scale_f32, pf)
    CASE(PLAIT_FLOAT64, double, nc_scale_f64, p)
#undef CASE
    default: break;
  }
}

static void elem_divide(plait_dtype_t d, const void *in, void *out, uint32_t q) {
  switch (d) {
#define CASE(DT, T, FN)                                                        \
  case DT: {                                                                   \
    T x, r;                                                                    \
    memcpy(&x, in, sizeof x);                                                  \
    r = FN(x, q);                                                              \
    memcpy(out, &r, sizeof r);                                                 \
    break;                                                                     \
  }
    CASE(PLAIT_UINT8, uint8_t, nc_div_u8)
    CASE(PLAIT_INT8, int8_t, nc_div_i8)
    CASE(PLAIT_UINT16, uint16_t, nc_div_u16)
    CASE(PLAIT_INT16, int16_t, nc_div_i16)
    CASE(PLAIT_INT32, int32_t, nc_div_i32)
    CASE(PLAIT_INT64, int64_t, nc_div_i64)
    CASE(PLAIT_FLOAT16, uint16_t, nc_div_f16)
    CASE(PLAIT_BFLOAT16, uint16_t, nc_div_bf16)
    CASE(PLAIT_FLOAT32, float, nc_div_f32)
    CASE(PLAIT_FLOAT64, double, nc_div_f64)
#undef CASE
    default: break;
  }
}

/* The same values divided by several rank counts, against plait_divide. */
static void compare_div(plait_dtype_t d, const void *buf, size_t n) {
  static const uint32_t divisors[] = {1, 2, 3, 7, 8, 1000, 4294967295u};
  size_t es = plait_dtype_size_inline(d), bad = 0;
  unsigned char *want = malloc(n * es), got[8];
  for (size_t k = 0; k < sizeof divisors / sizeof divisors[0]; k++) {
    if (plait_divide(d, want, buf, n, divisors[k]) != PLAIT_SUCCESS) {
      CHECK(0, "plait_divide %s failed", plait_dtype_name_inline(d));
      break;
    }
    for (size_t i = 0; i < n; i++) {
      elem_divide(d, (const unsigned char *)buf + i * es, got, divisors[k]);
      if (memcmp(got, want + i * es, es) != 0 && bad++ < 3)
        printf("  %s element %zu / %u: kernel bits differ from plait_divide's\n",
               plait_dtype_name_inline(d), i, divisors[k]);
    }
  }
  CHECK(bad == 0, "%s: %zu divided elements differ from plait_divide", plait_dtype_name_inline(d),
        bad);
  free(want);
}

/* n values of dtype d (es bytes each) in buf, scaled by every factor both
 * ways; mismatches counted. */
static void compare(plait_dtype_t d, const void *buf, size_t n) {
  size_t es = plait_dtype_size_inline(d);
  unsigned char *want = malloc(n * es), got[8];
  size_t bad = 0;
  for (size_t f = 0; f < NF; f++) {
    if (plait_scale(d, want, buf, n, factors[f]) != PLAIT_SUCCESS) {
      CHECK(0, "plait_scale %s failed", plait_dtype_name_inline(d));
      break;
    }
    for (size_t i = 0; i < n; i++) {
      elem_scale(d, (const unsigned char *)buf + i * es, got, factors[f]);
      if (memcmp(got, want + i * es, es) != 0 && bad++ < 3)
        printf("  %s element %zu x %g: kernel bits differ from plait_scale's\n",
               plait_dtype_name_inline(d), i, factors[f]);
    }
  }
  CHECK(bad == 0, "%s: %zu of %zu scaled elements differ from plait_scale", plait_dtype_name_inline(d),
        bad, n * NF);
  free(want);
  compare_div(d, buf, n);
}

static void scaling(void) {
  uint16_t *h = malloc(65536 * sizeof *h);
  for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  compare(PLAIT_FLOAT16, h, 65536); /* every value: subnormals, Inf, NaN */
  compare(PLAIT_BFLOAT16, h, 65536);
  compare(PLAIT_UINT16, h, 65536);
  compare(PLAIT_INT16, h, 65536);
  uint8_t b[256];
  for (int i = 0; i < 256; i++) b[i] = (uint8_t)i;
  compare(PLAIT_UINT8, b, 256);
  compare(PLAIT_INT8, b, 256);
  free(h);

  enum { N = 4096 };
  int32_t *i32 = malloc(N * sizeof *i32);
  int64_t *i64 = malloc(N * sizeof *i64);
  float *f32 = malloc(N * sizeof *f32);
  double *f64 = malloc(N * sizeof *f64);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: random bit patterns */
    i32[i] = (int32_t)x;
    i64[i] = (int64_t)x;
    uint32_t u = (uint32_t)(x >> 32);
    memcpy(&f32[i], &u, 4);
    memcpy(&f64[i], &x, 8);
  }
  i32[0] = INT32_MIN, i32[1] = INT32_MAX, i64[0] = INT64_MIN, i64[1] = INT64_MAX;
  f32[0] = INFINITY, f32[1] = -0.0f, f32[2] = 1e-45f, f32[3] = NAN;
  f64[0] = -INFINITY, f64[1] = 4.9e-324, f64[2] = NAN;
  compare(PLAIT_INT32, i32, N);
  compare(PLAIT_INT64, i64, N);
  compare(PLAIT_FLOAT32, f32, N);
  compare(PLAIT_FLOAT64, f64, N);
  free(i32), free(i64), free(f32), free(f64);
}

/* The identity's bits read as the dtype's value. */
static double as_value(plait_dtype_t d, uint64_t bits) {
  switch (d) {
    case PLAIT_UINT8: return (uint8_t)bits;
    case PLAIT_INT8: return (int8_t)(uint8_t)bits;
    case PLAIT_UINT16: return (uint16_t)bits;
    case PLAIT_INT16: return (int16_t)(uint16_t)bits;
    case PLAIT_INT32: return (int32_t)(uint32_t)bits;
    case PLAIT_INT64: return (double)(int64_t)bits;
    case PLAIT_FLOAT16: return nc_half_to_float((uint16_t)bits);
    case PLAIT_BFLOAT16: return nc_bf16_to_float((uint16_t)bits);
    case PLAIT_FLOAT32: return nc_f32_from_bits((uint32_t)bits);
    case PLAIT_FLOAT64: {
      double v;
      memcpy(&v, &bits, 8);
      return v;
    }
    default: return (uint8_t)bits;
  }
}

static void identities(void) {
  static const double lows[] = {0, -128, 0, -32768, -2147483648.0, -0x1p63, -INFINITY,
                                -INFINITY, -INFINITY, -INFINITY, 0};
  static const double highs[] = {255, 127, 65535, 32767, 2147483647.0, 0x1p63, INFINITY,
                                 INFINITY, INFINITY, INFINITY, 1};
  for (int d = 0; d < PLAIT_DTYPE_COUNT_; d++) {
    plait_dtype_t dt = (plait_dtype_t)d;
    const char *n = plait_dtype_name_inline(dt);
    CHECK(nc_identity_bits(dt, PLAIT_OP_SUM) == 0 && nc_identity_bits(dt, PLAIT_OP_AVERAGE) == 0,
          "%s: sum/average identity is not 0", n);
    CHECK(as_value(dt, nc_identity_bits(dt, PLAIT_OP_PRODUCT)) == 1.0, "%s: product identity", n);
    double lo = as_value(dt, nc_identity_bits(dt, PLAIT_OP_MAX));
    double hi = as_value(dt, nc_identity_bits(dt, PLAIT_OP_MIN));
    /* int64's highest is 2^63 - 1, which reads as 2^63 in a double */
    CHECK(lo == lows[d] && hi == highs[d], "%s: max identity %g (want %g), min identity %g (want %g)",
          n, lo, lows[d], hi, highs[d]);
    uint64_t b = nc_identity_bits(dt, PLAIT_OP_MIN);
    if (dt == PLAIT_INT64) CHECK(b == (uint64_t)INT64_MAX, "int64 min identity bits");
  }
  CHECK(nc_fill_pattern(0xab, 1) == 0xababababababababull, "fill pattern of 1 byte");
  CHECK(nc_fill_pattern(0xfc00, 2) == 0xfc00fc00fc00fc00ull, "fill pattern of 2 bytes");
  CHECK(nc_fill_pattern(0xff800000u, 4) == 0xff800000ff800000ull, "fill pattern of 4 bytes");
  CHECK(nc_fill_pattern(0x8000000000000000ull, 8) == 0x8000000000000000ull, "8 bytes");
}

/* Every byte of every span covered once by the kernel's chunk walk. */
static void plan_covers(const plait_span_t *spans, size_t n, size_t es, const char *what) {
  nc_span_ent_t *tab = calloc(n ? n : 1, sizeof *tab);
  uint32_t m = 0;
  uint64_t chunks = 0;
  char why[256] = "";
  int rc = nc_plan(spans, n, es, tab, &m, &chunks, why, sizeof why);
  CHECK(rc == 0, "%s: nc_plan refused: %s", what, why);
  size_t nonempty = 0;
  uint64_t want_chunks = 0;
  for (size_t i = 0; i < n; i++)
    if (spans[i].count)
      nonempty++, want_chunks += (spans[i].count * es + NC_CHUNK_BYTES - 1) / NC_CHUNK_BYTES;
  CHECK(m == nonempty && chunks == want_chunks, "%s: %u entries, %llu chunks (want %zu, %llu)",
        what, m, (unsigned long long)chunks, nonempty, (unsigned long long)want_chunks);
  uint64_t *covered = calloc(m ? m : 1, sizeof *covered); /* bytes, checked in order */
  size_t bad = 0;
  for (uint64_t c = 0; c < chunks && m; c++) {
    uint32_t s;
    uint64_t off, len;
    nc_chunk_range(tab, m, c, &s, &off, &len);
    if (off != covered[s] || len == 0 || off + len > tab[s].bytes) bad++;
    covered[s] = off + len;
  }
  for (uint32_t s = 0; s < m; s++)
    if (covered[s] != tab[s].bytes) bad++;
  CHECK(bad == 0, "%s: %zu chunks or spans not covered exactly once", what, bad);
  for (size_t i = 0, k = 0; i < n && k < m; i++) {
    if (!spans[i].count) continue;
    CHECK(tab[k].dst == (uint64_t)(uintptr_t)spans[i].dst &&
              tab[k].src == (uint64_t)(uintptr_t)spans[i].src,
          "%s: entry %zu does not hold span %zu's pointers", what, k, i);
    k++;
  }
  free(covered);
  free(tab);
}

static void plans(void) {
  static char mem[16];
  plait_span_t s[600];
  uint64_t x = 12345;
  for (size_t i = 0; i < 600; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t count = (i % 7 == 0) ? 0 : (size_t)(x % 40000); /* empty spans among them */
    if (i % 97 == 1) count = 3 * NC_CHUNK_BYTES / 4;     /* exactly 3 chunks of float32 */
    s[i].dst = mem + (i % 16);
    s[i].src = (i % 5 == 0) ? NULL : mem;
    s[i].count = count;
  }
  plan_covers(s, 600, 4, "600 spans of float32");
  plan_covers(s, 600, 1, "600 spans of uint8");
  plan_covers(s, 1, 8, "one span of float64");
  plan_covers(s, 0, 2, "no spans");
  plait_span_t one = {mem, mem, 1};
  plan_covers(&one, 1, 2, "one element");

  nc_span_ent_t tab[2];
  uint32_t m;
  uint64_t chunks;
  char why[256] = "";
  plait_span_t nul[2] = {{mem, mem, 4}, {NULL, mem, 4}};
  CHECK(nc_plan(nul, 2, 4, tab, &m, &chunks, why, sizeof why) == -1 &&
            strstr(why, "spans[1].dst is NULL"),
        "a NULL dst: %s", why);
  plait_span_t big = {mem, mem, SIZE_MAX / 2};
  CHECK(nc_plan(&big, 1, 4, tab, &m, &chunks, why, sizeof why) == -1 &&
            strstr(why, "overflows"),
        "an overflowing count: %s", why);
  plait_span_t empty_null = {NULL, NULL, 0};
  CHECK(nc_plan(&empty_null, 1, 4, tab, &m, &chunks, why, sizeof why) == 0 && m == 0,
        "an empty span with NULL pointers is fine");
}

int main(void) {
  scaling();
  identities();
  plans();
  printf("%d passed, %d failed\n", checks - failed, failed);
  return failed ? 1 : 0;
}
