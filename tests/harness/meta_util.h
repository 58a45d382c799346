/* A float32 allreduce's metadata for the core's unit tests (cache, epoch, negotiation):
 * a sum over one dimension of count elements, no scaling, host memory. */
#ifndef PLAIT_TEST_META_UTIL_H
#define PLAIT_TEST_META_UTIL_H

#include <stdint.h>
#include <string.h>

#include "engine/submit/entry.h"

static inline plait_meta_t f32(int64_t count) {
  plait_meta_t m;
  memset(&m, 0, sizeof m);
  m.coll = PLAIT_COLL_ALLREDUCE;
  m.dtype = PLAIT_FLOAT32;
  m.op = PLAIT_OP_SUM;
  m.device = -1;
  m.prescale = m.postscale = 1.0;
  m.ndim = 1;
  m.shape[0] = count;
  return m;
}

#endif
