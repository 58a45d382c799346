/* The version-1 shapes of the one allreduce entry (plait_transport_t
 * .allreduce over spans), for the tests that drive a plugin's table
 * directly: a buffer in place, send into recv with a postscale, or spans. */
#ifndef PLAIT_TEST_TRANSPORT_CALLS_H
#define PLAIT_TEST_TRANSPORT_CALLS_H

#include "plait/transport.h"

/* In place, unscaled: what every plugin takes. */
static inline plait_result_t tc_allreduce(const plait_transport_t *t, void *st, void *buf,
                                          size_t count, plait_dtype_t d, plait_op_t op) {
  plait_span_t s = {buf, buf, count};
  return t->allreduce(st, &s, 1, d, op, 1.0, 1.0);
}

/* send into recv, scaled by post (PLAIT_ALLREDUCE_SCALED). */
static inline plait_result_t tc_allreduce_scaled(const plait_transport_t *t, void *st,
                                                 const void *send, void *recv, size_t count,
                                                 plait_dtype_t d, plait_op_t op, double post) {
  plait_span_t s = {recv, send, count};
  return t->allreduce(st, &s, 1, d, op, 1.0, post);
}

/* n spans, scaled by post (PLAIT_ALLREDUCE_SPANS). */
static inline plait_result_t tc_allreduce_spans(const plait_transport_t *t, void *st,
                                                const plait_span_t *spans, size_t n,
                                                plait_dtype_t d, plait_op_t op, double post) {
  return t->allreduce(st, spans, n, d, op, 1.0, post);
}

static inline int tc_scaled(const plait_transport_t *t) {
  return (t->allreduce_flags & PLAIT_ALLREDUCE_SCALED) != 0;
}
static inline int tc_spans(const plait_transport_t *t) {
  return (t->allreduce_flags & PLAIT_ALLREDUCE_SPANS) != 0;
}

#endif
