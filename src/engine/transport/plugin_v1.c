/*
 * The one adapter of an older plugin ABI: a version-1 table
 * (include/plait/transport_v1.h, frozen) served as the current one. Every
 * entry but allreduce has the same signature in both versions and is taken
 * as it is; allreduce maps onto version 1's three entries exactly as the core
 * called them while version 1 was current:
 *
 *   one span, in place, factors 1.0, no allreduce_scaled -> allreduce
 *   one span, with allreduce_scaled                       -> allreduce_scaled
 *   several spans, with allreduce_spans                   -> allreduce_spans
 *
 * and the traits are what the core then decided by the entries present
 * (PLAIT_ALLREDUCE_SCALED: allreduce_scaled; PLAIT_ALLREDUCE_SPANS:
 * allreduce_spans too, in host memory). Version 1 declares no other traits:
 * a v1 plugin is never a candidate of PLAIT_TRANSPORT=auto and keeps the
 * configuration's fusion defaults.
 *
 * A C function pointer carries no context, so each loaded v1 plugin takes
 * one of a few slots, each with its own allreduce and last_error.
 */
#include "engine/transport/plugin.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/reduce.h"

#define V1_SLOTS 8 /* v1 plugins loaded at once */

typedef struct {
  plait_transport_t table; /* what the core sees */
  const plait_transport_v1_t *v1;
  int used;
  char err[256]; /* the adapter's own refusal, when the last call ended there */
  int err_set;
} v1_slot_t;

static v1_slot_t slots[V1_SLOTS];
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;

plait_result_t plait_plugin_check_table_v1(const plait_transport_v1_t *t, const char *path) {
  return plait_plugin_check_head(path, PLAIT_TRANSPORT_SYMBOL_V1, t->abi_version, t->struct_size,
                                 PLAIT_TRANSPORT_V1_ABI_VERSION, PLAIT_TRANSPORT_V1_MIN_SIZE);
}

static plait_result_t refuse(v1_slot_t *a, const char *fmt, const char *what) {
  snprintf(a->err, sizeof a->err, fmt, a->v1->name, what);
  a->err_set = 1;
  return PLAIT_ERR_INVALID_ARGUMENT;
}

static plait_result_t adapt_allreduce(v1_slot_t *a, void *state, const plait_span_t *s, size_t n,
                                      plait_dtype_t dtype, plait_op_t op, double prescale,
                                      double postscale) {
  const plait_transport_v1_t *v1 = a->v1;
  a->err_set = 0;
  if (!s || !n) return refuse(a, "transport '%s' (ABI v1): allreduce of %s", "no spans");
  if (n > 1) {
    if (!(a->table.allreduce_flags & PLAIT_ALLREDUCE_SPANS))
      return refuse(a, "transport '%s' (ABI v1): allreduce of %s: it has no allreduce_spans",
                    "several spans");
    if (prescale != 1.0)
      return refuse(a, "transport '%s' (ABI v1): allreduce of %s", "spans with a prescale");
    return v1->allreduce_spans(state, s, n, dtype, op, postscale);
  }
  if (a->table.allreduce_flags & PLAIT_ALLREDUCE_SCALED) {
    const void *src = s->src;
    if (prescale != 1.0) { /* never asked by the core: its own copy-in pass prescales */
      if (v1->caps & PLAIT_CAP_DEVICE_MEMORY)
        return refuse(a, "transport '%s' (ABI v1): allreduce %s", "with a prescale in device memory");
      plait_result_t rc = plait_scale(dtype, s->dst, s->src, s->count, prescale);
      if (rc) return refuse(a, "transport '%s' (ABI v1): allreduce %s", "with this prescale");
      src = s->dst;
    }
    return v1->allreduce_scaled(state, src, s->dst, s->count, dtype, op, postscale);
  }
  if (s->src != s->dst || prescale != 1.0 || postscale != 1.0)
    return refuse(a, "transport '%s' (ABI v1): allreduce %s: it has no allreduce_scaled",
                  "out of place or scaled");
  return v1->allreduce(state, s->dst, s->count, dtype, op);
}

static const char *adapt_last_error(v1_slot_t *a, void *state) {
  return state && a->err_set ? a->err : a->v1->last_error(state);
}

#define SLOT_FNS(i)                                                                            \
  static plait_result_t allreduce_##i(void *st, const plait_span_t *s, size_t n,               \
                                      plait_dtype_t d, plait_op_t o, double pre, double post) { \
    return adapt_allreduce(&slots[i], st, s, n, d, o, pre, post);                              \
  }                                                                                            \
  static const char *last_error_##i(void *st) { return adapt_last_error(&slots[i], st); }
SLOT_FNS(0) SLOT_FNS(1) SLOT_FNS(2) SLOT_FNS(3) SLOT_FNS(4) SLOT_FNS(5) SLOT_FNS(6) SLOT_FNS(7)
#undef SLOT_FNS

static const struct {
  plait_result_t (*allreduce)(void *, const plait_span_t *, size_t, plait_dtype_t, plait_op_t,
                              double, double);
  const char *(*last_error)(void *);
} slot_fns[V1_SLOTS] = {{allreduce_0, last_error_0}, {allreduce_1, last_error_1},
                        {allreduce_2, last_error_2}, {allreduce_3, last_error_3},
                        {allreduce_4, last_error_4}, {allreduce_5, last_error_5},
                        {allreduce_6, last_error_6}, {allreduce_7, last_error_7}};

/* The current table for v1's entries: same signatures, same state. */
static void fill(plait_transport_t *t, const plait_transport_v1_t *v1) {
  memset(t, 0, sizeof *t);
  t->abi_version = PLAIT_TRANSPORT_ABI_VERSION;
  t->struct_size = sizeof *t;
  t->name = v1->name;
  t->caps = v1->caps;
  t->dtypes = v1->dtypes;
  t->ops = v1->ops;
  int scaled = PLAIT_TRANSPORT_V1_HAS(v1, allreduce_scaled);
  t->allreduce_flags = scaled ? PLAIT_ALLREDUCE_SCALED : 0;
  if (scaled && PLAIT_TRANSPORT_V1_HAS(v1, allreduce_spans) &&
      !(v1->caps & PLAIT_CAP_DEVICE_MEMORY))
    t->allreduce_flags |= PLAIT_ALLREDUCE_SPANS;
  t->init = v1->init;
  t->finalize = v1->finalize;
  t->allgatherv = v1->allgatherv;
  t->broadcast = v1->broadcast;
  t->alltoallv = v1->alltoallv;
  t->reducescatter = v1->reducescatter;
  t->barrier = v1->barrier;
  t->mem_alloc = v1->mem_alloc;
  t->mem_free = v1->mem_free;
  t->mem_copy = v1->mem_copy;
#define OPT(f) t->f = PLAIT_TRANSPORT_V1_HAS(v1, f) ? v1->f : NULL
  OPT(algorithm);
  OPT(subset);
  OPT(probe);
  OPT(device);
  OPT(batch_copy);
  OPT(ready);
  OPT(notify);
  OPT(interrupt);
#undef OPT
}

plait_result_t plait_plugin_adapt_v1(const plait_transport_v1_t *v1, const char *path,
                                     const plait_transport_t **out, void **slot) {
  PLAIT_CHECK(plait_plugin_check_table_v1(v1, path));
  pthread_mutex_lock(&slots_mu);
  int i = 0;
  while (i < V1_SLOTS && slots[i].used) i++;
  if (i == V1_SLOTS) {
    pthread_mutex_unlock(&slots_mu);
    return plait_error(PLAIT_ERR_PLUGIN, "%s: more than %d plugins of transport ABI version 1 "
                       "loaded at once; rebuild it against include/plait/transport.h", path,
                       V1_SLOTS);
  }
  v1_slot_t *a = &slots[i];
  fill(&a->table, v1);
  a->table.allreduce = v1->allreduce ? slot_fns[i].allreduce : NULL;
  a->table.last_error = v1->last_error ? slot_fns[i].last_error : NULL;
  a->v1 = v1;
  a->err_set = 0;
  a->used = 1;
  pthread_mutex_unlock(&slots_mu);
  *out = &a->table;
  *slot = a;
  return PLAIT_SUCCESS;
}

void plait_plugin_release_v1(void *slot) {
  if (!slot) return;
  pthread_mutex_lock(&slots_mu);
  v1_slot_t *a = slot;
  a->used = 0;
  a->v1 = NULL;
  pthread_mutex_unlock(&slots_mu);
}
