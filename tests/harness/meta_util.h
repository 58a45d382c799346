/* Metadata for the core's unit tests (cache, epoch, negotiation): a sum
 * over one dimension of count elements, no scaling, host memory; f32 is a
 * float32 allreduce's. */
#ifndef PLAIT_TEST_META_UTIL_H
#define PLAIT_TEST_META_UTIL_H

#include <stdint.h>
#include <string.h>

#include "engine/submit/entry.h"

static inline plait_meta_t meta(plait_coll_t coll, plait_dtype_t dt, int64_t count) {
  plait_meta_t m;
  memset(&m, 0, sizeof m);
  m.coll = (uint8_t)coll;
  m.dtype = (uint8_t)dt;
  m.op = PLAIT_OP_SUM;
  m.device = -1;
  m.prescale = m.postscale = 1.0;
  m.ndim = 1;
  m.shape[0] = count;
  return m;
}

static inline plait_meta_t f32(int64_t count) {
  return meta(PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, count);
}

#endif
