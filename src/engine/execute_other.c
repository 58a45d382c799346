/* Executing allgather, alltoall and reducescatter: outputs whose size only
 * negotiation tells, allocated here and handed to the handle. */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "engine/execute.h"
#include "engine/handle.h"
#include "util/clock.h"
#include "util/reduce.h"
#include "engine/stats.h"
#include "engine/timeline.h"

/* Bytes of one first-dimension row. */
static size_t row_bytes(const plait_meta_t *m) {
  size_t b = plait_dtype_size((plait_dtype_t)m->dtype);
  for (int i = 1; i < m->ndim; i++) b *= (size_t)m->shape[i];
  return b;
}

static void add(plait_exec_t *x, double transport_s, uint64_t bytes) {
  plait_stats_t *s = plait_stats_lock(x->stats);
  s->transport_s += transport_s;
  s->responses++;
  s->bytes += bytes;
  plait_stats_unlock(x->stats);
}

static plait_result_t fail(plait_exec_t *x, plait_result_t rc, const char *what, const char *name) {
  const char *m = x->t->last_error(x->ts);
  return plait_error(rc, "%s '%s' failed in transport '%s': %s", what, name, x->t->name,
                     m && *m ? m : plait_strerror(rc));
}

plait_result_t plait_exec_allgather(plait_exec_t *x, const plait_response_t *r, plait_entry_t *e) {
  const plait_meta_t *m = e ? &e->meta : &r->e[0].meta;
  const char *name = r->e[0].name;
  if (r->ndims != (uint32_t)x->size)
    return plait_error(PLAIT_ERR_PROTOCOL, "allgather '%s': %u first dimensions for %d ranks",
                       name, r->ndims, x->size);
  size_t rb = row_bytes(m), total = 0;
  size_t *bytes = malloc(sizeof *bytes * (size_t)x->size);
  if (!bytes) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  int64_t rows = 0, before = 0;
  for (int q = 0; q < x->size; q++) {
    bytes[q] = (size_t)r->dims[q] * rb;
    if (q < x->rank) before += r->dims[q];
    rows += r->dims[q];
    total += bytes[q];
  }
  void *out = plait_exec_alloc_host(total);
  plait_result_t rc = out ? PLAIT_SUCCESS : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for "
                                                         "a %zu-byte allgather output", total);
  if (rc == PLAIT_SUCCESS && e && bytes[x->rank])
    memcpy((char *)out + (size_t)before * rb, e->input.data, bytes[x->rank]);
  double t0 = plait_now();
  if (rc == PLAIT_SUCCESS) {
    if (e) plait_tl_begin(x->tl, name, x->activity[PLAIT_COLL_ALLGATHER]);
    rc = x->t->allgatherv(x->ts, out, bytes);
    if (e) plait_tl_end(x->tl, name, x->activity[PLAIT_COLL_ALLGATHER]);
    if (rc) rc = fail(x, rc, "allgather", name);
  }
  free(bytes);
  if (rc == PLAIT_SUCCESS) add(x, plait_now() - t0, total);
  if (rc || !e) {
    free(out);
    return rc;
  }
  plait_tensor_t t = e->input;
  t.data = out;
  t.shape[0] = rows;
  plait_handle_set_output(e->handle, &t, out, NULL, 0);
  return PLAIT_SUCCESS;
}

plait_result_t plait_exec_alltoall(plait_exec_t *x, const plait_response_t *r, plait_entry_t *e) {
  int n = x->size;
  if (r->ndims != (uint32_t)(n * n))
    return plait_error(PLAIT_ERR_PROTOCOL, "alltoall '%s': split matrix of %u for %d ranks",
                       e->name, r->ndims, n);
  size_t rb = row_bytes(&e->meta);
  size_t *send = malloc(sizeof *send * (size_t)n), *recv = malloc(sizeof *recv * (size_t)n);
  int64_t *splits = malloc(sizeof *splits * (size_t)n);
  size_t total = 0;
  int64_t rows = 0;
  plait_result_t rc = PLAIT_SUCCESS;
  if (!send || !recv || !splits) rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  for (int q = 0; q < n && rc == PLAIT_SUCCESS; q++) {
    send[q] = (size_t)r->dims[(size_t)x->rank * n + q] * rb;
    splits[q] = r->dims[(size_t)q * n + x->rank];
    recv[q] = (size_t)splits[q] * rb;
    rows += splits[q];
    total += recv[q];
  }
  void *out = rc ? NULL : plait_exec_alloc_host(total);
  if (rc == PLAIT_SUCCESS && !out) rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  double t0 = plait_now();
  if (rc == PLAIT_SUCCESS) {
    plait_tl_begin(x->tl, e->name, x->activity[PLAIT_COLL_ALLTOALL]);
    rc = x->t->alltoallv(x->ts, e->input.data, send, out, recv);
    plait_tl_end(x->tl, e->name, x->activity[PLAIT_COLL_ALLTOALL]);
    if (rc) rc = fail(x, rc, "alltoall", e->name);
  }
  free(send);
  free(recv);
  if (rc) {
    free(out);
    free(splits);
    return rc;
  }
  add(x, plait_now() - t0, total);
  plait_tensor_t t = e->input;
  t.data = out;
  t.shape[0] = rows;
  plait_handle_set_output(e->handle, &t, out, splits, n);
  return PLAIT_SUCCESS;
}

plait_result_t plait_exec_reducescatter(plait_exec_t *x, plait_entry_t *e) {
  const plait_meta_t *m = &e->meta;
  int n = x->size;
  int64_t rows = m->shape[0], base = rows / n, extra = rows % n;
  size_t row_elems = row_bytes(m) / plait_dtype_size((plait_dtype_t)m->dtype);
  size_t *counts = malloc(sizeof *counts * (size_t)n);
  if (!counts) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  for (int q = 0; q < n; q++) counts[q] = (size_t)(base + (q < extra)) * row_elems;
  size_t mine = counts[x->rank], total = (size_t)plait_meta_elements(m);
  size_t es = plait_dtype_size((plait_dtype_t)m->dtype);
  void *out = plait_exec_alloc_host(mine * es), *scaled = NULL;
  const void *send = e->input.data;
  plait_result_t rc = out ? PLAIT_SUCCESS : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  if (rc == PLAIT_SUCCESS && m->prescale != 1.0) { /* never touch the caller's input */
    scaled = plait_exec_alloc_host(total * es);
    rc = scaled ? plait_scale((plait_dtype_t)m->dtype, scaled, send, total, m->prescale)
                : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
    send = scaled;
  }
  double t0 = plait_now();
  plait_op_t op = m->op == PLAIT_OP_AVERAGE ? PLAIT_OP_SUM : (plait_op_t)m->op;
  if (rc == PLAIT_SUCCESS) {
    plait_tl_begin(x->tl, e->name, x->activity[PLAIT_COLL_REDUCESCATTER]);
    rc = x->t->reducescatter(x->ts, send, out, counts, (plait_dtype_t)m->dtype, op);
    plait_tl_end(x->tl, e->name, x->activity[PLAIT_COLL_REDUCESCATTER]);
    if (rc) rc = fail(x, rc, "reducescatter", e->name);
  }
  double post = plait_exec_postscale(m, n);
  if (rc == PLAIT_SUCCESS && mine && post != 1.0)
    rc = plait_scale((plait_dtype_t)m->dtype, out, out, mine, post);
  free(scaled);
  free(counts);
  if (rc) {
    free(out);
    return rc;
  }
  add(x, plait_now() - t0, total * es);
  plait_tensor_t t = e->input;
  t.data = out;
  t.shape[0] = base + (x->rank < extra);
  plait_handle_set_output(e->handle, &t, out, NULL, 0);
  return PLAIT_SUCCESS;
}
