/* tm_allreduce_spans: the plugin's allreduce_spans entry (transport.h),
 * called directly, against allreduce_scaled of the same data packed into
 * one buffer, bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "transport_matrix.h"
#include "util/reduce.h"
#include "transport_calls.h"

#define SAY_FAIL(c, ...)                                                       \
  do {                                                                         \
    plait_test_say((c)->rank, __VA_ARGS__);                                    \
    return 1;                                                                  \
  } while (0)

int tm_spans_one(tm_ctx_t *c, plait_dtype_t d, plait_op_t op, double post,
                     const size_t *counts, size_t n, const char *layout) {
  size_t es = plait_dtype_size(d), total = 0;
  for (size_t i = 0; i < n; i++) total += counts[i];
  unsigned char *want = malloc(total * es + 1), *packed = malloc(total * es + 1);
  plait_span_t *s = calloc(n, sizeof *s);
  unsigned char **src = calloc(n, sizeof *src), **dst = calloc(n, sizeof *dst);
  if (!want || !packed || !s || !src || !dst) SAY_FAIL(c, "out of memory");
  tm_fill(d, op, c->rank, c->nranks, packed, total, 5);
  int fail = 0;
  for (size_t i = 0, at = 0; i < n; at += counts[i], i++) {
    src[i] = malloc(counts[i] * es + 1);
    dst[i] = i % 2 ? malloc(counts[i] * es + 1) : src[i];
    if (!src[i] || !dst[i]) SAY_FAIL(c, "out of memory");
    memcpy(src[i], packed + at * es, counts[i] * es);
    if (dst[i] != src[i]) memset(dst[i], 0xA5, counts[i] * es);
    s[i] = (plait_span_t){dst[i], src[i], counts[i]};
  }
  memcpy(want, packed, total * es);
  plait_result_t rc = tc_allreduce_scaled(c->t, c->st, want, want, total, d, op, post);
  if (rc)
    SAY_FAIL(c, "allreduce_scaled %s %s x%zu: %s: %s", plait_dtype_name(d), plait_op_name(op),
             total, plait_result_name(rc), c->t->last_error(c->st));
  rc = tc_allreduce_spans(c->t, c->st, s, n, d, op, post);
  if (rc)
    SAY_FAIL(c, "allreduce_spans %s %s, %s (%zu spans, %zu elements): %s: %s",
             plait_dtype_name(d), plait_op_name(op), layout, n, total, plait_result_name(rc),
             c->t->last_error(c->st));
  for (size_t i = 0, at = 0; i < n && !fail; at += counts[i], i++) {
    for (size_t b = 0; b < counts[i] * es && !fail; b++)
      if (dst[i][b] != want[at * es + b]) {
        plait_test_say(c->rank, "allreduce_spans %s %s post %g, %s: span %zu (%zu elements, "
                       "%s) element %zu differs from allreduce_scaled of the packed data",
                       plait_dtype_name(d), plait_op_name(op), post, layout, i, counts[i],
                       dst[i] == src[i] ? "in place" : "out of place", b / es);
        fail = 1;
      }
    if (!fail && dst[i] != src[i] && memcmp(src[i], packed + at * es, counts[i] * es)) {
      plait_test_say(c->rank, "allreduce_spans %s, %s: span %zu's src changed",
                     plait_dtype_name(d), layout, i);
      fail = 1;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (dst[i] != src[i]) free(dst[i]);
    free(src[i]);
  }
  free(want), free(packed), free(s), free(src), free(dst);
  return fail;
}

/* Span layouts: equal mid-sized tensors (a fused response of 64 KiB
 * gradients), mixed with empty and tiny ones and one larger than a ring
 * chunk, many tiny ones (packed), one alone. */
int tm_allreduce_spans(tm_ctx_t *c) {
  if (!tc_spans(c->t)) return 0;
  size_t eq[40], mixed[] = {0, 1, 1001, 300001, 0, 7, 131072, 4097, 65536, 3},
                 tiny[500], one[] = {70001};
  for (size_t i = 0; i < 40; i++) eq[i] = 16384 + 3 * i;
  for (size_t i = 0; i < 500; i++) tiny[i] = 1 + i % 200;
  struct {
    const size_t *counts;
    size_t n;
    const char *name;
  } layouts[] = {{eq, 40, "40 of about 64 KiB"},
                 {mixed, 10, "mixed, with empty and tiny spans"},
                 {tiny, 500, "500 tiny spans"},
                 {one, 1, "one span"}};
  struct {
    plait_dtype_t d;
    plait_op_t op;
    double post;
  } kinds[] = {{PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0},    {PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0 / 3},
               {PLAIT_FLOAT32, PLAIT_OP_AVERAGE, 0.5}, {PLAIT_FLOAT16, PLAIT_OP_SUM, 0.25},
               {PLAIT_BFLOAT16, PLAIT_OP_MAX, 1.0},    {PLAIT_INT32, PLAIT_OP_MIN, 1.0},
               {PLAIT_FLOAT64, PLAIT_OP_PRODUCT, 2.0}, {PLAIT_UINT8, PLAIT_OP_SUM, 1.0}};
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
      if (tm_spans_one(c, kinds[k].d, kinds[k].op, kinds[k].post, layouts[l].counts, layouts[l].n,
                    layouts[l].name))
        return 1;
  /* argument errors: nothing communicated, the state still works */
  float a = 1, b = 2;
  plait_span_t bad[] = {{&a, &a, 1}, {NULL, &b, 1}};
  if (tc_allreduce_spans(c->t, c->st, bad, 2, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0) !=
      PLAIT_ERR_INVALID_ARGUMENT)
    SAY_FAIL(c, "allreduce_spans with a NULL dst was not refused");
  if (tc_allreduce_spans(c->t, c->st, bad, 0, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0) !=
      PLAIT_ERR_INVALID_ARGUMENT)
    SAY_FAIL(c, "allreduce_spans of no spans was not refused");
  return tm_spans_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0, eq, 4, "4 after refusals");
}
