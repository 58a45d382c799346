/* Executing a reducescatter: this rank's share of the reduction (prescaled
 * and postscaled), into an output allocated here and handed to the handle. */
#include <stdlib.h>
#include <string.h>

#include "engine/execute/execute_internal.h"
#include "engine/submit/handle.h"
#include "engine/observe/timeline.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/reduce.h"

plait_result_t plait_exec_reducescatter(plait_exec_t *x, plait_entry_t *e) {
  const plait_meta_t *m = &e->meta;
  int n = x->size;
  int64_t rows = m->shape[0], base = rows / n, extra = rows % n;
  size_t row_elems = plait_exec_row_bytes(m) / plait_dtype_size_inline((plait_dtype_t)m->dtype);
  size_t *counts = malloc(sizeof *counts * (size_t)n);
  if (!counts) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  for (int q = 0; q < n; q++) counts[q] = (size_t)(base + (q < extra)) * row_elems;
  size_t mine = counts[x->rank], total = (size_t)plait_meta_elements(m);
  size_t es = plait_dtype_size_inline((plait_dtype_t)m->dtype);
  int dev = plait_exec_on_device(m); /* the output, in the transport's memory */
  void *out = NULL, *scaled = NULL;
  const void *send = e->input.data;
  plait_result_t rc = PLAIT_SUCCESS;
  if (dev) rc = plait_exec_dev_alloc(x, mine * es, 1, "a reducescatter output", &out);
  else if (!(out = plait_exec_alloc_host(mine * es)))
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  if (rc == PLAIT_SUCCESS && m->prescale != 1.0 && dev) { /* scratch: freed with the response */
    rc = plait_exec_dev_alloc(x, total * es, 0, "a prescaled reducescatter input", &scaled);
    plait_span_t sp = {scaled, send, total};
    if (rc == PLAIT_SUCCESS) rc = plait_exec_batch(x, m, &sp, 1, m->prescale, "prescaling of",
                                                   e->name);
    send = scaled;
    scaled = NULL;
  } else if (rc == PLAIT_SUCCESS && m->prescale != 1.0) { /* never touch the caller's input */
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
    if (rc) rc = plait_exec_transport_error(x, rc, "reducescatter", e->name);
  }
  double post = plait_exec_postscale(m, n);
  plait_span_t sp = {out, out, mine};
  if (rc == PLAIT_SUCCESS && mine && post != 1.0)
    rc = dev ? plait_exec_batch(x, m, &sp, 1, post, "postscaling of", e->name)
             : plait_scale((plait_dtype_t)m->dtype, out, out, mine, post);
  free(scaled);
  free(counts);
  if (rc) {
    if (dev) plait_exec_dev_free(x, out);
    else free(out);
    return rc;
  }
  plait_exec_count(x, plait_now() - t0, total * es);
  plait_tensor_t t = e->input;
  t.data = out;
  t.shape[0] = base + (x->rank < extra);
  if (dev) plait_exec_set_device_output(x, e->handle, &t, out, NULL, 0);
  else plait_handle_set_output(e->handle, &t, out, NULL, 0);
  return PLAIT_SUCCESS;
}
