/* Executing responses: dispatch, the allreduce paths (single in place, and
 * fused through the fusion buffer), identities for joined ranks. */
#include "engine/execute/execute.h"
#include "engine/execute/execute_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "engine/submit/handle.h"
#include "util/log.h"
#include "engine/negotiate/fusion.h"
#include "engine/transport/transport_defaults.h"
#include "engine/execute/pending.h"
#include "engine/transport/process_set.h"
#include "util/clock.h"
#include "util/reduce.h"
#include "engine/observe/stats.h"
#include "engine/observe/timeline.h"

void plait_exec_init(plait_exec_t *x, int rank, int size, const plait_transport_t *t, void *ts,
                     plait_table_t *table, plait_namemap_t *local) {
  memset(x, 0, sizeof *x);
  x->rank = rank;
  x->size = size;
  x->t = t;
  x->ts = ts;
  x->ts0 = ts;
  x->table = table;
  x->local = local;
  x->piece = (size_t)plait_transport_fusion_piece(t);
  if (t->caps & PLAIT_CAP_DEVICE_MEMORY) x->devmem = plait_devmem_new(t, ts);
  for (int c = 1; c <= PLAIT_COLL_MAX_; c++) {
    plait_tl_op_name(x->activity[c], sizeof x->activity[c], t->name,
                     plait_coll_name((plait_coll_t)c));
  }
}

void plait_exec_free(plait_exec_t *x) {
  /* the coordinator settled pending work (plait_exec_settle); what never
   * finished after an interrupt may still use the buffer: it is left */
  int busy = x->pending && (x->interrupted ? plait_pending_outstanding(x->pending) > 0
                                           : plait_exec_quiesce(x, "the fusion buffer is freed"));
  if (x->fusion && !busy) x->t->mem_free(x->ts, x->fusion);
  x->fusion = NULL;
  x->fusion_cap = 0;
  plait_devmem_close(x->devmem);
  x->devmem = NULL;
  plait_pending_destroy(x->pending);
  x->pending = NULL;
}



/* A transport call failed: its message, with the operation's context. */
static plait_result_t transport_error(plait_exec_t *x, plait_result_t rc, const char *what,
                                      const char *name) {
  const char *msg = x->hier_msg[0] ? x->hier_msg : x->t->last_error(x->ts);
  return plait_error(rc, "%s '%s' failed in transport '%s': %s", what, name, x->t->name,
                     msg && *msg ? msg : plait_strerror(rc));
}

/* The element that leaves others unchanged under op, for joined ranks. */
static void fill_identity(plait_dtype_t dt, plait_op_t op, void *dst, size_t count) {
  size_t es = plait_dtype_size_inline(dt);
  if (op == PLAIT_OP_SUM || op == PLAIT_OP_AVERAGE) {
    memset(dst, 0, count * es);
    return;
  }
  unsigned char v[8];
  int lo = op == PLAIT_OP_MAX; /* max: the smallest value; min: the largest */
  switch (dt) {
#define INT_ID(T, MINV, MAXV) { T t = op == PLAIT_OP_PRODUCT ? 1 : lo ? MINV : MAXV; memcpy(v, &t, sizeof t); break; }
  case PLAIT_UINT8: INT_ID(uint8_t, 0, UINT8_MAX)
  case PLAIT_INT8: INT_ID(int8_t, INT8_MIN, INT8_MAX)
  case PLAIT_UINT16: INT_ID(uint16_t, 0, UINT16_MAX)
  case PLAIT_INT16: INT_ID(int16_t, INT16_MIN, INT16_MAX)
  case PLAIT_INT32: INT_ID(int32_t, INT32_MIN, INT32_MAX)
  case PLAIT_INT64: INT_ID(int64_t, INT64_MIN, INT64_MAX)
  case PLAIT_BOOL: INT_ID(uint8_t, 0, 1)
  case PLAIT_FLOAT32: { float f = op == PLAIT_OP_PRODUCT ? 1.0f : lo ? -__builtin_inff() : __builtin_inff(); memcpy(v, &f, 4); break; }
  case PLAIT_FLOAT64: { double d = op == PLAIT_OP_PRODUCT ? 1.0 : lo ? -__builtin_inf() : __builtin_inf(); memcpy(v, &d, 8); break; }
  case PLAIT_FLOAT16: INT_ID(uint16_t, 0xFC00, 0x7C00)
  case PLAIT_BFLOAT16: INT_ID(uint16_t, 0xFF80, 0x7F80)
  default: memset(v, 0, sizeof v);
#undef INT_ID
  }
  if (op == PLAIT_OP_PRODUCT && dt == PLAIT_FLOAT16) v[0] = 0x00, v[1] = 0x3C;
  if (op == PLAIT_OP_PRODUCT && dt == PLAIT_BFLOAT16) v[0] = 0x80, v[1] = 0x3F;
  for (size_t i = 0; i < count; i++) memcpy((char *)dst + i * es, v, es);
}

/* Whether the transport folds the copy and the postscale into its own
 * passes (PLAIT_ALLREDUCE_SCALED); otherwise the core copies and scales. */
static int folds(const plait_exec_t *x) {
  return (x->t->allreduce_flags & PLAIT_ALLREDUCE_SCALED) != 0;
}

/* The transport's one allreduce entry over n spans; the core's own copy-in
 * pass has prescaled already, so it passes prescale 1.0. */
static plait_result_t call_allreduce(plait_exec_t *x, const plait_meta_t *m,
                                     const plait_span_t *spans, size_t n, double postscale);

/* AVERAGE and postscale: dst = src scaled, one pass (dst may be src). */
static plait_result_t finish_values(plait_exec_t *x, const plait_meta_t *m, void *dst,
                                    const void *src, size_t count) {
  double post = plait_exec_postscale(m, x->size);
  if (!count || post == 1.0) return PLAIT_SUCCESS;
  return plait_scale((plait_dtype_t)m->dtype, dst, src, count, post);
}

static plait_op_t wire_op(const plait_meta_t *m) {
  return m->op == PLAIT_OP_AVERAGE ? PLAIT_OP_SUM : (plait_op_t)m->op;
}

static void add_times(plait_exec_t *x, double in, double tr, double out, uint64_t bytes,
                      int fused, int n, uint64_t cap) {
  plait_stats_t *s = plait_stats_lock(x->stats);
  s->copy_in_s += in;
  s->transport_s += tr;
  s->copy_out_s += out;
  s->responses++;
  s->bytes += bytes;
  if (fused) {
    s->fused_responses++;
    s->fused_tensors += (uint64_t)n;
    s->fusion_bytes += bytes;
    s->fusion_capacity += cap;
  }
  plait_stats_unlock(x->stats);
}

/* The transport's allreduce of count elements from in into out (in place
 * when in == out), with AVERAGE and postscale folded in where the transport
 * can (then *scaled is set); otherwise out must already hold the input. */
static plait_result_t transport_allreduce(plait_exec_t *x, const plait_meta_t *m, const void *in,
                                          void *out, size_t count, int *scaled) {
  if (plait_exec_hier_wanted(x, m, count)) { /* ranks share hosts: hier_plan.h */
    *scaled = 1;
    return plait_exec_hier_allreduce(x, m, wire_op(m), in, out, count,
                                     plait_exec_postscale(m, x->size));
  }
  *scaled = folds(x);
  plait_span_t s = {out, *scaled ? in : out, count};
  return call_allreduce(x, m, &s, 1, *scaled ? plait_exec_postscale(m, x->size) : 1.0);
}

static plait_result_t call_allreduce(plait_exec_t *x, const plait_meta_t *m,
                                     const plait_span_t *spans, size_t n, double postscale) {
  return x->t->allreduce(x->ts, spans, n, (plait_dtype_t)m->dtype, wire_op(m), 1.0, postscale);
}

int plait_exec_carries(const plait_exec_t *x, const plait_meta_t *m) {
  size_t count = (size_t)plait_meta_elements(m);
  return PLAIT_TRANSPORT_HAS(x->t, vote_allreduce) && m->coll == PLAIT_COLL_ALLREDUCE &&
         m->pset == 0 && !plait_exec_on_device(m) && m->prescale == 1.0 &&
         plait_meta_bytes(m) <= PLAIT_EXEC_CARRY_MAX_BYTES && !plait_exec_hier_wanted(x, m, count);
}

/* The carried allreduce (x->carry): send and recv this rank's tensors, or
 * NULL when it votes 0; what came of it in x->carry. */
static plait_result_t carried_call(plait_exec_t *x, const plait_meta_t *m, const void *send,
                                   void *recv, const char *name) {
  plait_exec_carry_t *k = x->carry;
  uint8_t got = 0;
  plait_result_t rc = x->t->vote_allreduce(x->ts, k->mine, send, recv,
                                           (size_t)plait_meta_elements(m),
                                           (plait_dtype_t)m->dtype, wire_op(m),
                                           plait_exec_postscale(m, x->size), &got, k->wait_s);
  k->pending = rc == PLAIT_ERR_TIMEOUT && k->wait_s >= 0;
  k->agreed = rc == PLAIT_SUCCESS && got != 0;
  if (rc == PLAIT_SUCCESS || k->pending) return PLAIT_SUCCESS;
  return transport_error(x, rc, "the cached round (its allreduce carrying the vote) of", name);
}

plait_result_t plait_exec_carry_absent(plait_exec_t *x, const plait_meta_t *m) {
  return carried_call(x, m, NULL, NULL, "a tensor this rank does not hold yet");
}

/* One tensor whose allreduce carries the vote: the transport reads the
 * input and writes the output only where every rank voted 1. */
static plait_result_t carried_single(plait_exec_t *x, plait_entry_t *e) {
  const plait_meta_t *m = &e->meta;
  double t0 = plait_now();
  plait_tl_begin(x->tl, e->name, x->activity[PLAIT_COLL_ALLREDUCE]);
  plait_result_t rc = carried_call(x, m, e->input.data, e->output.data, e->name);
  plait_tl_end(x->tl, e->name, x->activity[PLAIT_COLL_ALLREDUCE]);
  if (rc == PLAIT_SUCCESS && x->carry->agreed)
    add_times(x, 0, plait_now() - t0, 0, plait_meta_bytes(m), 0, 1, 0);
  return rc;
}

/* One tensor: reduced in its output, no fusion buffer. The input reaches the
 * output in one pass: the prescaling copy, or (without prescale) the
 * transport's own reads when it folds (allreduce_scaled), else one copy. */
static plait_result_t allreduce_single(plait_exec_t *x, plait_entry_t *e) {
  const plait_meta_t *m = &e->meta;
  size_t count = (size_t)plait_meta_elements(m), bytes = count * plait_dtype_size_inline(m->dtype);
  void *out = e->output.data;
  const void *in = e->input.data;
  double t0 = plait_now();
  int dev = plait_exec_on_device(m) && plait_exec_has_batch(x);
  plait_tl_begin(x->tl, e->name, plait_tl_name(PLAIT_TL_MEMCPY_IN));
  if (dev && (m->prescale != 1.0 || (out != in && count && !folds(x)))) {
    plait_span_t s = {out, in, count}; /* device memory: the transport's pass */
    PLAIT_CHECK(plait_exec_batch(x, m, &s, 1, m->prescale, "copy of", e->name));
    in = out;
  } else if (m->prescale != 1.0) {
    PLAIT_CHECK(plait_scale((plait_dtype_t)m->dtype, out, in, count, m->prescale));
    in = out;
  } else if (out != in && bytes && !folds(x)) {
    PLAIT_CHECK(x->t->mem_copy(x->ts, out, in, bytes,
                               m->device < 0 ? PLAIT_COPY_HOST_TO_HOST : PLAIT_COPY_DEVICE_TO_DEVICE));
    in = out;
  }
  plait_tl_end(x->tl, e->name, plait_tl_name(PLAIT_TL_MEMCPY_IN));
  double t1 = plait_now();
  int scaled = 0;
  plait_tl_begin(x->tl, e->name, x->activity[PLAIT_COLL_ALLREDUCE]);
  plait_result_t rc = transport_allreduce(x, m, in, out, count, &scaled);
  plait_tl_end(x->tl, e->name, x->activity[PLAIT_COLL_ALLREDUCE]);
  if (rc) return transport_error(x, rc, "allreduce", e->name);
  double t2 = plait_now();
  double post = plait_exec_postscale(m, x->size);
  if (!scaled && dev && count && post != 1.0) {
    plait_span_t s = {out, out, count};
    plait_tl_begin(x->tl, e->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
    PLAIT_CHECK(plait_exec_batch(x, m, &s, 1, post, "scaling of", e->name));
    plait_tl_end(x->tl, e->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
  } else if (!scaled && !dev) {
    plait_tl_begin(x->tl, e->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
    PLAIT_CHECK(finish_values(x, m, out, out, count));
    plait_tl_end(x->tl, e->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
  }
  add_times(x, t1 - t0, t2 - t1, plait_now() - t2, bytes, 0, 1, 0);
  return PLAIT_SUCCESS;
}

/* The fusion buffer holds at least need bytes. It is kept between
 * responses and grows at least twofold (up to the threshold), so a job whose
 * fused responses grow a little at a time does not reallocate, and fault in
 * fresh pages, on every step. */
static plait_result_t ensure_fusion(plait_exec_t *x, size_t need) {
  if (need <= x->fusion_cap) return PLAIT_SUCCESS;
  size_t want = x->fusion_cap * 2;
  if (want > x->threshold) want = (size_t)x->threshold;
  if (want < need) want = need;
  /* device work still enqueued may use the old buffer (pending.h) */
  if (x->fusion) PLAIT_CHECK(plait_exec_quiesce(x, "the fusion buffer grows"));
  if (x->fusion) x->t->mem_free(x->ts, x->fusion);
  x->fusion = NULL;
  x->fusion_cap = 0;
  plait_result_t rc = x->t->mem_alloc(x->ts, want, &x->fusion);
  if (rc) return plait_error(rc, "cannot allocate a fusion buffer of %zu bytes: %s", want,
                             x->t->last_error(x->ts));
  x->fusion_cap = want;
  return PLAIT_SUCCESS;
}

/* Members [lo, hi) of a fused response: one piece of it (allreduce_fused). */
typedef struct {
  uint32_t lo, hi;
  size_t base; /* offs[lo]: the piece starts at the buffer's start */
} piece_t;

/* Copies (with prescale) the piece's members into the buffer; joined:
 * identities. */
static plait_result_t copy_in(plait_exec_t *x, const plait_response_t *r, plait_entry_t **es,
                              const plait_meta_t *m, size_t *offs, piece_t p) {
  if (m->device >= 0 && plait_exec_has_batch(x)) /* never in pieces */
    return plait_exec_copy_in_device(x, r, es, m, offs);
  size_t es_size = plait_dtype_size_inline(m->dtype);
  for (uint32_t i = p.lo; i < p.hi; i++) {
    const plait_meta_t *mi = es[i] ? &es[i]->meta : &r->e[i].meta;
    size_t count = (size_t)plait_meta_elements(mi), bytes = count * es_size;
    char *dst = (char *)x->fusion + (offs[i] - p.base);
    if (!es[i] && m->device >= 0) {
      return plait_error(PLAIT_ERR_UNSUPPORTED, "'%s': this rank has joined and must contribute "
                         "identities in device memory, which transport '%s' cannot fill (it "
                         "has no batch_copy)", r->e[i].name, x->t->name);
    } else if (!es[i]) {
      fill_identity((plait_dtype_t)m->dtype, (plait_op_t)m->op, dst, count);
    } else {
      plait_tl_begin(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_MEMCPY_IN));
      if (m->prescale != 1.0)
        PLAIT_CHECK(plait_scale((plait_dtype_t)m->dtype, dst, es[i]->input.data, count, m->prescale));
      else if (bytes && m->device < 0)
        memcpy(dst, es[i]->input.data, bytes);
      else if (bytes) /* device memory: only the transport can copy it */
        PLAIT_CHECK(x->t->mem_copy(x->ts, dst, es[i]->input.data, bytes,
                                   PLAIT_COPY_DEVICE_TO_DEVICE));
      plait_tl_end(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_MEMCPY_IN));
    }
    size_t pad = offs[i + 1] - offs[i] - bytes; /* keep padding defined */
    if (pad && m->device < 0) memset(dst + bytes, 0, pad);
  }
  return PLAIT_SUCCESS;
}

/* One member's result, count elements at src, into dst with post applied
 * on the way: one pass in host memory. */
static plait_result_t copy_out_one(plait_exec_t *x, const plait_meta_t *m, void *dst, void *src,
                                   size_t count, double post) {
  size_t bytes = count * plait_dtype_size_inline(m->dtype);
  if (m->device < 0 && post != 1.0)
    return plait_scale((plait_dtype_t)m->dtype, dst, src, count, post);
  if (m->device < 0) {
    memcpy(dst, src, bytes);
    return PLAIT_SUCCESS;
  }
  if (post != 1.0) /* device memory: only the transport can copy it */
    PLAIT_CHECK(plait_scale((plait_dtype_t)m->dtype, src, src, count, post));
  return x->t->mem_copy(x->ts, dst, src, bytes, PLAIT_COPY_DEVICE_TO_DEVICE);
}

/* Each of the piece's members' results into its output, AVERAGE and
 * postscale (unless the transport already scaled) applied on the way. */
static plait_result_t copy_out(plait_exec_t *x, const plait_response_t *r, plait_entry_t **es,
                               const plait_meta_t *m, size_t *offs, int scaled, piece_t p) {
  double post = scaled ? 1.0 : plait_exec_postscale(m, x->size);
  if (m->device >= 0 && plait_exec_has_batch(x))
    return plait_exec_copy_out_device(x, r, es, m, offs, post);
  for (uint32_t i = p.lo; i < p.hi; i++) {
    size_t count = es[i] ? (size_t)plait_meta_elements(&es[i]->meta) : 0;
    if (!count) continue;
    plait_tl_begin(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
    PLAIT_CHECK(copy_out_one(x, m, es[i]->output.data, (char *)x->fusion + (offs[i] - p.base),
                             count, post));
    plait_tl_end(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
  }
  return PLAIT_SUCCESS;
}

/* The piece that starts at member lo: the members after it while the piece
 * stays within `piece` bytes (at least one member). */
static piece_t piece_from(const size_t *offs, uint32_t n, uint32_t lo, size_t piece) {
  uint32_t hi = lo + 1;
  while (hi < n && offs[hi + 1] - offs[lo] <= piece) hi++;
  return (piece_t){lo, hi, offs[lo]};
}

/* One piece: copied in, reduced in the buffer, copied out; the times of
 * each phase added to t[0..2]. */
static plait_result_t run_piece(plait_exec_t *x, const plait_response_t *r, plait_entry_t **es,
                                const plait_meta_t *m, size_t *offs, piece_t p, double *t) {
  double t0 = plait_now();
  PLAIT_CHECK(copy_in(x, r, es, m, offs, p));
  double t1 = plait_now();
  int scaled = 0;
  for (uint32_t i = p.lo; i < p.hi; i++)
    if (es[i]) plait_tl_begin(x->tl, es[i]->name, x->activity[PLAIT_COLL_ALLREDUCE]);
  plait_result_t rc = transport_allreduce(x, m, x->fusion, x->fusion,
                                          (offs[p.hi] - p.base) / plait_dtype_size_inline(m->dtype),
                                          &scaled);
  for (uint32_t i = p.lo; i < p.hi; i++)
    if (es[i]) plait_tl_end(x->tl, es[i]->name, x->activity[PLAIT_COLL_ALLREDUCE]);
  if (rc) return transport_error(x, rc, "fused allreduce of", r->e[0].name);
  double t2 = plait_now();
  PLAIT_CHECK(copy_out(x, r, es, m, offs, scaled, p));
  t[0] += t1 - t0, t[1] += t2 - t1, t[2] += plait_now() - t2;
  return PLAIT_SUCCESS;
}

static int cmp_range(const void *a, const void *b) {
  const uintptr_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Whether a fused response goes to the transport as spans
 * (PLAIT_ALLREDUCE_SPANS): when it takes them, in host memory, without prescale.
 * A function of the response and the transport only, never of this rank's
 * tensors, so that every rank makes the same transport call: a joined rank
 * (no tensors: identities) and one whose tensors overlap reduce the same
 * spans through the fusion buffer (allreduce_spans_buffered), where an
 * allreduce of the padded fusion layout would not match what the others
 * send (ofi: "Truncation error"). */
static int spans_wire(const plait_exec_t *x, const plait_response_t *r, const plait_meta_t *m) {
  return (x->t->allreduce_flags & PLAIT_ALLREDUCE_SPANS) && folds(x) && m->device < 0 &&
         !(x->t->caps & PLAIT_CAP_DEVICE_MEMORY) && m->prescale == 1.0 && r->n >= 2;
}

/* The members of a fused response as spans reduced where they are
 * (spans_wire): only with every member this rank's own and no two of the
 * memory ranges overlapping (a tensor given twice: the buffer's copies keep
 * that defined). Returns the spans (free them) or NULL. */
static plait_span_t *as_spans(const plait_response_t *r, plait_entry_t **es,
                              const plait_meta_t *m) {
  for (uint32_t i = 0; i < r->n; i++)
    if (!es[i]) return NULL;
  plait_span_t *spans = malloc(r->n * sizeof *spans);
  uintptr_t *rg = malloc(4 * r->n * sizeof *rg);
  size_t nr = 0, es_size = plait_dtype_size_inline(m->dtype);
  int ok = spans && rg;
  for (uint32_t i = 0; ok && i < r->n; i++) {
    size_t count = (size_t)plait_meta_elements(&es[i]->meta), bytes = count * es_size;
    spans[i] = (plait_span_t){es[i]->output.data, es[i]->input.data, count};
    if (!bytes) continue;
    rg[2 * nr] = (uintptr_t)spans[i].src, rg[2 * nr + 1] = (uintptr_t)spans[i].src + bytes, nr++;
    if (spans[i].dst != spans[i].src)
      rg[2 * nr] = (uintptr_t)spans[i].dst, rg[2 * nr + 1] = (uintptr_t)spans[i].dst + bytes, nr++;
  }
  if (ok) qsort(rg, nr, 2 * sizeof *rg, cmp_range);
  for (size_t i = 1; ok && i < nr; i++) ok = rg[2 * i] >= rg[2 * i - 1];
  free(rg);
  if (!ok) free(spans);
  return ok ? spans : NULL;
}

/* A fused response reduced where its tensors are (as_spans): no copies in
 * or out, the transport's passes only. */
static plait_result_t allreduce_in_place(plait_exec_t *x, const plait_response_t *r,
                                         plait_entry_t **es, const plait_meta_t *m,
                                         const plait_span_t *spans) {
  size_t data = 0, es_size = plait_dtype_size_inline(m->dtype);
  for (uint32_t i = 0; i < r->n; i++) data += spans[i].count * es_size;
  double t0 = plait_now();
  for (uint32_t i = 0; i < r->n; i++) /* es[i] NULL: a joined rank's identity */
    if (es[i]) plait_tl_begin(x->tl, es[i]->name, x->activity[PLAIT_COLL_ALLREDUCE]);
  plait_result_t rc = call_allreduce(x, m, spans, r->n, plait_exec_postscale(m, x->size));
  for (uint32_t i = 0; i < r->n; i++)
    if (es[i]) plait_tl_end(x->tl, es[i]->name, x->activity[PLAIT_COLL_ALLREDUCE]);
  if (rc) return transport_error(x, rc, "fused allreduce of", r->e[0].name);
  add_times(x, 0, plait_now() - t0, 0, data, 1, (int)r->n,
            x->threshold > data ? x->threshold : data);
  return PLAIT_SUCCESS;
}

/* A fused response as spans (spans_wire) that this rank cannot reduce where
 * they are (as_spans): its members, or a joined rank's identities, side by
 * side in the fusion buffer without padding, one span each: the same
 * spans, counts and order as every other rank's, so the transport cuts and
 * sends them alike. */
static plait_result_t allreduce_spans_buffered(plait_exec_t *x, const plait_response_t *r,
                                               plait_entry_t **es, const plait_meta_t *m) {
  size_t es_size = plait_dtype_size_inline(m->dtype);
  size_t *offs = malloc(sizeof *offs * (r->n + 1));
  plait_span_t *spans = malloc(sizeof *spans * r->n);
  plait_result_t rc = offs && spans ? PLAIT_SUCCESS
                                    : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  size_t at = 0;
  for (uint32_t i = 0; rc == PLAIT_SUCCESS && i <= r->n; i++) {
    offs[i] = at;
    if (i < r->n) at += (size_t)plait_meta_elements(es[i] ? &es[i]->meta : &r->e[i].meta) * es_size;
  }
  if (rc == PLAIT_SUCCESS) rc = ensure_fusion(x, offs[r->n]);
  piece_t all = {0, r->n, 0};
  double t0 = plait_now(), t1 = t0, t2 = t0;
  if (rc == PLAIT_SUCCESS) rc = copy_in(x, r, es, m, offs, all);
  for (uint32_t i = 0; rc == PLAIT_SUCCESS && i < r->n; i++) {
    char *p = x->fusion ? (char *)x->fusion + offs[i] : NULL; /* NULL: nothing to reduce */
    spans[i] = (plait_span_t){p, p, (offs[i + 1] - offs[i]) / es_size};
  }
  if (rc == PLAIT_SUCCESS) {
    t1 = plait_now();
    rc = allreduce_in_place(x, r, es, m, spans);
    t2 = plait_now();
  }
  if (rc == PLAIT_SUCCESS) rc = copy_out(x, r, es, m, offs, 1, all);
  if (rc == PLAIT_SUCCESS) {
    plait_stats_t *s = plait_stats_lock(x->stats);
    s->copy_in_s += t1 - t0;
    s->copy_out_s += plait_now() - t2;
    plait_stats_unlock(x->stats);
  }
  free(offs);
  free(spans);
  return rc;
}

/* Several tensors (or a joined rank's identity): one response, reduced in
 * the fusion buffer. Over a transport with a piece size (x->piece) its
 * members go through the buffer a piece at a time, each piece copied in,
 * reduced and copied out while it is still in cache, from the buffer's
 * start; otherwise, and in device memory, all at once. */
static plait_result_t allreduce_fused(plait_exec_t *x, const plait_response_t *r,
                                      plait_entry_t **es, const plait_meta_t *m) {
  size_t *offs = malloc(sizeof *offs * (r->n + 1));
  if (!offs) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  size_t es_size = plait_dtype_size_inline(m->dtype), data = 0; /* without the padding */
  plait_fusion_layout_t layout = {0}; /* the one rank 0 planned with (fusion.h) */
  for (uint32_t i = 0; i < r->n; i++) {
    size_t b = (size_t)plait_meta_elements(es[i] ? &es[i]->meta : &r->e[i].meta) * es_size;
    offs[i] = (size_t)plait_fusion_layout_add(&layout, b);
    data += b;
  }
  size_t total = offs[r->n] = (size_t)layout.size, need = 0;
  /* hierarchical: whole, one reduce-scatter of it within the host */
  int whole = plait_exec_hier_wanted(x, m, total / es_size);
  size_t piece = m->device < 0 && x->piece && !whole ? x->piece : total;
  for (piece_t p = {0, 0, 0}; p.hi < r->n;) {
    p = piece_from(offs, r->n, p.hi, piece);
    if (offs[p.hi] - p.base > need) need = offs[p.hi] - p.base;
  }
  double t[3] = {0, 0, 0};
  plait_result_t rc = ensure_fusion(x, need);
  for (piece_t p = {0, 0, 0}; rc == PLAIT_SUCCESS && p.hi < r->n;) {
    p = piece_from(offs, r->n, p.hi, piece);
    rc = run_piece(x, r, es, m, offs, p, t);
  }
  if (rc == PLAIT_SUCCESS)
    add_times(x, t[0], t[1], t[2], data, r->n > 1, (int)r->n,
              x->threshold > total ? x->threshold : total);
  free(offs);
  return rc;
}

/* Whether a fused response runs hierarchically as a whole (its members
 * packed in the fusion buffer) rather than as spans. */
static int hier_whole(const plait_exec_t *x, const plait_response_t *r, plait_entry_t **es,
                      const plait_meta_t *m) {
  size_t count = 0;
  for (uint32_t i = 0; x->hier && i < r->n; i++)
    count += (size_t)plait_meta_elements(es[i] ? &es[i]->meta : &r->e[i].meta);
  return x->hier && plait_exec_hier_wanted(x, m, count);
}

static plait_result_t run_allreduce(plait_exec_t *x, const plait_response_t *r, plait_entry_t **es) {
  const plait_meta_t *m = NULL;
  for (uint32_t i = 0; i < r->n && !m; i++) m = es[i] ? &es[i]->meta : r->e[i].has_meta ? &r->e[i].meta : NULL;
  if (!m) return plait_error(PLAIT_ERR_PROTOCOL, "allreduce response without metadata");
  if (r->n == 1 && es[0] && x->carry) return carried_single(x, es[0]);
  if (r->n == 1 && es[0]) return allreduce_single(x, es[0]);
  if (!spans_wire(x, r, m) || hier_whole(x, r, es, m)) return allreduce_fused(x, r, es, m);
  plait_span_t *spans = as_spans(r, es, m);
  if (!spans) return allreduce_spans_buffered(x, r, es, m);
  plait_result_t rc = allreduce_in_place(x, r, es, m, spans);
  free(spans);
  return rc;
}

/* The local entries of r, in order; NULL where this rank has none (a joined
 * rank, or an error for an operation this rank never submitted). */
static plait_result_t gather_entries(plait_exec_t *x, const plait_response_t *r, plait_entry_t **es) {
  for (uint32_t i = 0; i < r->n; i++) {
    char key[PLAIT_OP_KEY_MAX];
    es[i] = plait_namemap_get(x->local, plait_op_key(key, r->pset, r->e[i].name));
    if (es[i]) {
      plait_tl_end(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_QUEUE));
      continue;
    }
    int stands_in = x->joined && r->e[i].has_meta &&
                    (r->coll == PLAIT_COLL_ALLREDUCE || r->coll == PLAIT_COLL_ALLGATHER ||
                     r->coll == PLAIT_COLL_BARRIER);
    if (!r->status && !stands_in)
      return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 scheduled %s '%s', which rank %d never "
                         "submitted", plait_coll_name((plait_coll_t)r->coll), r->e[i].name, x->rank);
    if (!r->status && r->coll == PLAIT_COLL_BARRIER) plait_table_count_barrier(x->table);
  }
  return PLAIT_SUCCESS;
}

static plait_result_t run_kind(plait_exec_t *x, const plait_response_t *r, plait_entry_t **es) {
  plait_entry_t *e = es[0];
  plait_result_t rc = PLAIT_SUCCESS;
  double t0 = plait_now();
  switch ((plait_coll_t)r->coll) {
  case PLAIT_COLL_ALLREDUCE: return run_allreduce(x, r, es);
  case PLAIT_COLL_ALLGATHER: return plait_exec_allgather(x, r, e);
  case PLAIT_COLL_ALLTOALL: return plait_exec_alltoall(x, r, e);
  case PLAIT_COLL_REDUCESCATTER: return plait_exec_reducescatter(x, e);
  case PLAIT_COLL_BROADCAST: {
    size_t bytes = plait_meta_bytes(&e->meta);
    int root = e->meta.root; /* a rank of the job: its place in the set */
    const plait_pset_t *s = r->pset ? plait_psets_get(x->psets, r->pset) : NULL;
    for (int i = 0; s && i < s->n; i++)
      if (s->ranks[i] == e->meta.root) root = i;
    plait_tl_begin(x->tl, e->name, x->activity[r->coll]);
    rc = x->t->broadcast(x->ts, e->output.data, bytes, root);
    plait_tl_end(x->tl, e->name, x->activity[r->coll]);
    if (rc) return transport_error(x, rc, "broadcast", e->name);
    plait_handle_set_output(e->handle, &e->output, NULL, NULL, 0);
    add_times(x, 0, plait_now() - t0, 0, bytes, 0, 1, 0);
    return PLAIT_SUCCESS;
  }
  case PLAIT_COLL_BARRIER: /* a joined rank (e NULL) takes part too */
    plait_tl_begin(x->tl, r->e[0].name, x->activity[r->coll]);
    rc = x->t->barrier(x->ts);
    plait_tl_end(x->tl, r->e[0].name, x->activity[r->coll]);
    if (rc) return transport_error(x, rc, "barrier", r->e[0].name);
    add_times(x, 0, plait_now() - t0, 0, 0, 0, 1, 0);
    return PLAIT_SUCCESS;
  case PLAIT_COLL_JOIN:
    plait_handle_set_join_rank(e->handle, r->join_rank);
    x->joined = 0;
    return PLAIT_SUCCESS;
  case PLAIT_COLL_PSET_ADD: {
    int32_t id = 0;
    PLAIT_CHECK(plait_psets_apply_add(x->psets, e->meta.splits, (int)e->meta.nsplits, &id));
    plait_handle_set_join_rank(e->handle, id); /* the id plait_process_set_add reports */
    return PLAIT_SUCCESS;
  }
  case PLAIT_COLL_PSET_REMOVE: /* its sub-state and buffer go: nothing may still use them */
    PLAIT_CHECK(plait_exec_quiesce(x, "a process set is removed"));
    return plait_psets_apply_remove(x->psets, e->meta.root);
  }
  return plait_error(PLAIT_ERR_PROTOCOL, "response of unknown kind %u", r->coll);
}

/* The executor as the members of set r->pset see it: their rank and number,
 * the set's transport state and fusion buffer. *set NULL when this rank is
 * not a member (it runs nothing), or for the error response of a set that
 * no longer exists; an unknown set is otherwise a protocol error. */
static plait_result_t set_view(plait_exec_t *x, const plait_response_t *r, plait_exec_t *view,
                               plait_pset_t **set) {
  *set = NULL;
  if (r->pset == 0) {
    *view = *x;
    return PLAIT_SUCCESS;
  }
  plait_pset_t *s = plait_psets_get(x->psets, r->pset);
  if (!s && r->status) return PLAIT_SUCCESS; /* e.g. an operation on a set removed meanwhile */
  if (!s) return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 scheduled %s '%s' on process set %d, "
                             "which does not exist here", plait_coll_name((plait_coll_t)r->coll),
                             r->n ? r->e[0].name : "", (int)r->pset);
  if (s->index < 0) return PLAIT_SUCCESS;
  *view = *x;
  view->rank = s->index;
  view->size = s->n;
  view->ts = s->ts;
  view->fusion = s->fusion;
  view->fusion_cap = s->fusion_cap;
  view->joined = 0; /* join is the global set's only */
  view->hier = NULL; /* the sub-states are the global set's */
  *set = s;
  return PLAIT_SUCCESS;
}

static plait_result_t run_response(plait_exec_t *x, const plait_response_t *r);

plait_result_t plait_exec_run(plait_exec_t *x, const plait_response_t *r) {
  if (r->pset == 0) return run_response(x, r);
  plait_exec_t view;
  plait_pset_t *set = NULL;
  PLAIT_CHECK(set_view(x, r, &view, &set));
  if (!set) { /* not a member: nothing of it is ours (an error came to a member only) */
    for (uint32_t i = 0; i < r->n; i++) {
      char key[PLAIT_OP_KEY_MAX];
      plait_entry_t *e = plait_namemap_get(x->local, plait_op_key(key, r->pset, r->e[i].name));
      if (e && r->status)
        plait_exec_finish(x, e, (plait_result_t)r->status, r->message);
    }
    return PLAIT_SUCCESS;
  }
  plait_result_t rc = run_response(&view, r);
  set->fusion = view.fusion; /* the set's buffer, grown or made here */
  set->fusion_cap = view.fusion_cap;
  return rc;
}

/* Whether r runs on device memory (its local entries', or for a joined
 * rank the announced metadata's). */
static int on_device(const plait_response_t *r, plait_entry_t *const *es) {
  if (r->coll > PLAIT_COLL_REDUCESCATTER) return 0;
  for (uint32_t i = 0; i < r->n; i++) /* one device for all: the fusion key has it */
    if (es[i] || r->e[i].has_meta)
      return plait_exec_on_device(es[i] ? &es[i]->meta : &r->e[i].meta);
  return 0;
}

/* A response's local entries live on the stack up to this many (a lone
 * operation's response, most fused ones): no allocation per response. */
#define FEW_ENTRIES 16

static plait_result_t run_response(plait_exec_t *x, const plait_response_t *r) {
  plait_entry_t *few[FEW_ENTRIES] = {0};
  plait_entry_t **es = r->n <= FEW_ENTRIES ? few : calloc(r->n, sizeof *es);
  if (!es) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory running a response");
  plait_result_t rc = gather_entries(x, r, es);
  PLAIT_TRACE("exec", "%s '%s' (%u tensors, status %u, %u dims)",
              plait_coll_name((plait_coll_t)r->coll), r->n ? r->e[0].name : "", r->n, r->status,
              r->ndims);
  if (rc == PLAIT_SUCCESS && r->status) { /* agreed to fail: not a failure of the job */
    for (uint32_t i = 0; i < r->n; i++)
      if (es[i]) plait_exec_finish(x, es[i], (plait_result_t)r->status, r->message);
    if (es != few) free(es);
    return PLAIT_SUCCESS;
  }
  int dev = on_device(r, es);
  /* a barrier on a device-only transport is device work too (nccl: an
   * allreduce of one word on its stream) */
  int async = x->pending && (dev || (r->coll == PLAIT_COLL_BARRIER &&
                                     !(x->t->caps & PLAIT_CAP_HOST_MEMORY)));
  double t0 = plait_now();
  if (rc == PLAIT_SUCCESS && dev) rc = plait_exec_ready(x, es, r->n);
  if (rc == PLAIT_SUCCESS && r->n && (es[0] || r->coll == PLAIT_COLL_ALLREDUCE ||
                                      r->coll == PLAIT_COLL_ALLGATHER ||
                                      r->coll == PLAIT_COLL_BARRIER))
    rc = run_kind(x, r, es);
  if (rc == PLAIT_SUCCESS && async) { /* enqueued: pending.h finishes them */
    rc = plait_pending_add(x->pending, x, r, es, t0);
    if (es != few) free(es);
    return rc;
  }
  if (rc && async) x->scratch = NULL; /* enqueued work may use them: kept */
  plait_exec_scratch_release(x, NULL);
  if (rc || (x->carry && !x->carry->agreed)) { /* the job failed: the coordinator fails
                                                 * these with everything else; or the
                                                 * carried vote was 0 or is still on */
    if (es != few) free(es);
    return rc;
  }
  for (uint32_t i = 0; i < r->n; i++) {
    if (!es[i]) continue;
    if (r->coll == PLAIT_COLL_ALLREDUCE)
      plait_handle_set_output(es[i]->handle, &es[i]->output, NULL, NULL, 0);
    plait_exec_finish(x, es[i], PLAIT_SUCCESS, NULL);
  }
  if (es != few) free(es);
  return PLAIT_SUCCESS;
}
