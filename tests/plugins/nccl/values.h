/*
 * Test values and host references for reductions: small numbers every dtype
 * holds exactly, so that integer results are exact and floating ones differ
 * from the host's only by NCCL's order and ncclAvg's premultiplication.
 */
#ifndef PLAIT_NCCL_TEST_VALUES_H
#define PLAIT_NCCL_TEST_VALUES_H

#include <math.h>
#include <stddef.h>

#include "dtype_oracle.h" /* tests/harness: element access, ops_reduce */
#include "plait/plait.h"

/* Rank r's element i. Products stay within +-2 (one rank contributes a 2). */
static inline double nv_value(plait_dtype_t d, plait_op_t op, int r, int n, size_t i) {
  if (d == PLAIT_BOOL) return (double)((i + (size_t)r) % 3 != 0);
  if (op == PLAIT_OP_PRODUCT) {
    double v = (i + (size_t)r) % (size_t)n == 0 ? 2.0 : 1.0;
    return !ops_is_unsigned(d) && (i + 2 * (size_t)r) % 3 == 0 ? -v : v;
  }
  double v = (double)((i * 7 + (size_t)r * 3) % 9);
  return !ops_is_unsigned(d) ? v - 4.0 : v;
}

/* The reduction over n ranks, as plait defines it (bool: sum and max are
 * or, min and product and; average truncates toward zero on integers). */
static inline double nv_reference(plait_dtype_t d, plait_op_t op, int n, size_t i) {
  double vals[PLAIT_TEST_MAX_RANKS];
  if (n < 1 || n > PLAIT_TEST_MAX_RANKS) return NAN;
  for (int r = 0; r < n; r++) vals[r] = nv_value(d, op, r, n, i);
  double acc = ops_reduce(d, op, vals, n);
  if (op == PLAIT_OP_AVERAGE) acc = ops_is_float(d) ? acc / n : trunc(acc / n);
  return acc;
}

/* How far a result may be from the reference. */
static inline double nv_tolerance(plait_dtype_t d, int n) {
  double scale = 4.0 * n; /* the largest partial sum */
  switch (d) {
    case PLAIT_FLOAT16: return scale * 0x1p-10;
    case PLAIT_BFLOAT16: return scale * 0x1p-7;
    case PLAIT_FLOAT32: return scale * 1e-6;
    case PLAIT_FLOAT64: return scale * 1e-12;
    default: return 0.0;
  }
}

#endif
