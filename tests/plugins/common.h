/* Shared by the test plugins: a complete, valid table whose collectives only
 * report PLAIT_ERR_UNSUPPORTED. Each plugin file breaks one thing. Most are
 * built against the frozen version-1 header (plait_transport_v1_t,
 * FX_TABLE_REST): the core serves them through its v1 adapter, so the
 * loader's checks run on that path too; fakeofi is a version-2 table
 * (fx_allreduce_v2). */
#ifndef PLAIT_TEST_PLUGIN_COMMON_H
#define PLAIT_TEST_PLUGIN_COMMON_H

#include <stdlib.h>

#include "plait/transport.h"

#pragma GCC diagnostic ignored "-Wunused-function"
/* Fields appended to the table later are left out (zero: not provided). */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static const char *fx_last_error(void *state) {
  (void)state;
  return "test plugin: nothing to report";
}
static plait_result_t fx_finalize(void *state) {
  (void)state;
  return PLAIT_SUCCESS;
}
static plait_result_t fx_allreduce(void *s, void *b, size_t n, plait_dtype_t d, plait_op_t o) {
  (void)s, (void)b, (void)n, (void)d, (void)o;
  return PLAIT_ERR_UNSUPPORTED;
}
static plait_result_t fx_allreduce_v2(void *s, const plait_span_t *sp, size_t n, plait_dtype_t d,
                                      plait_op_t o, double pre, double post) {
  (void)s, (void)sp, (void)n, (void)d, (void)o, (void)pre, (void)post;
  return PLAIT_ERR_UNSUPPORTED;
}
static plait_result_t fx_allgatherv(void *s, void *b, const size_t *n) {
  (void)s, (void)b, (void)n;
  return PLAIT_ERR_UNSUPPORTED;
}
static plait_result_t fx_broadcast(void *s, void *b, size_t n, int r) {
  (void)s, (void)b, (void)n, (void)r;
  return PLAIT_ERR_UNSUPPORTED;
}
static plait_result_t fx_alltoallv(void *s, const void *a, const size_t *b, void *c,
                                   const size_t *d) {
  (void)s, (void)a, (void)b, (void)c, (void)d;
  return PLAIT_ERR_UNSUPPORTED;
}
static plait_result_t fx_reducescatter(void *s, const void *a, void *b, const size_t *c,
                                       plait_dtype_t d, plait_op_t o) {
  (void)s, (void)a, (void)b, (void)c, (void)d, (void)o;
  return PLAIT_ERR_UNSUPPORTED;
}
static plait_result_t fx_barrier(void *s) {
  (void)s;
  return PLAIT_ERR_UNSUPPORTED;
}
static plait_result_t fx_alloc(void *s, size_t n, void **p) {
  (void)s;
  *p = malloc(n ? n : 1);
  return *p ? PLAIT_SUCCESS : PLAIT_ERR_NO_MEMORY;
}
static plait_result_t fx_free(void *s, void *p) {
  (void)s;
  free(p);
  return PLAIT_SUCCESS;
}
static plait_result_t fx_copy(void *s, void *d, const void *src, size_t n, plait_copy_kind_t k) {
  (void)s, (void)d, (void)src, (void)n, (void)k;
  return PLAIT_ERR_UNSUPPORTED;
}

#define FX_TABLE_REST                                                          \
  fx_finalize, fx_last_error, fx_allreduce, fx_allgatherv, fx_broadcast,       \
      fx_alltoallv, fx_reducescatter, fx_barrier, fx_alloc, fx_free, fx_copy, NULL, NULL, NULL

#define FX_EXPORT __attribute__((visibility("default")))

#endif
