/* Executing an allgather: every rank's rows, whose count only negotiation
 * tells, into an output allocated here and handed to the handle. */
#include <stdlib.h>
#include <string.h>

#include "engine/execute/execute_internal.h"
#include "engine/submit/handle.h"
#include "engine/observe/timeline.h"
#include "util/clock.h"
#include "util/error.h"

plait_result_t plait_exec_allgather(plait_exec_t *x, const plait_response_t *r, plait_entry_t *e) {
  const plait_meta_t *m = e ? &e->meta : &r->e[0].meta;
  const char *name = r->e[0].name;
  if (r->ndims != (uint32_t)x->size)
    return plait_error(PLAIT_ERR_PROTOCOL, "allgather '%s': %u first dimensions for %d ranks",
                       name, r->ndims, x->size);
  size_t rb = plait_exec_row_bytes(m), total = 0;
  size_t *bytes = malloc(sizeof *bytes * (size_t)x->size);
  if (!bytes) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  int64_t rows = 0, before = 0;
  for (int q = 0; q < x->size; q++) {
    bytes[q] = (size_t)r->dims[q] * rb;
    if (q < x->rank) before += r->dims[q];
    rows += r->dims[q];
    total += bytes[q];
  }
  int dev = plait_exec_on_device(m); /* the output, in the transport's memory */
  void *out = NULL;
  plait_result_t rc = PLAIT_SUCCESS;
  if (dev) /* a joined rank's (e NULL) is scratch */
    rc = plait_exec_dev_alloc(x, total, e != NULL, "an allgather output", &out);
  else if (!(out = plait_exec_alloc_host(total)))
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for a %zu-byte allgather output", total);
  if (rc == PLAIT_SUCCESS && e && bytes[x->rank] && dev) {
    rc = x->t->mem_copy(x->ts, (char *)out + (size_t)before * rb, e->input.data, bytes[x->rank],
                        PLAIT_COPY_DEVICE_TO_DEVICE);
    if (rc) rc = plait_exec_transport_error(x, rc, "allgather (copying the input) of", name);
  } else if (rc == PLAIT_SUCCESS && e && bytes[x->rank]) {
    memcpy((char *)out + (size_t)before * rb, e->input.data, bytes[x->rank]);
  }
  double t0 = plait_now();
  if (rc == PLAIT_SUCCESS) {
    if (e) plait_tl_begin(x->tl, name, x->activity[PLAIT_COLL_ALLGATHER]);
    x->hier_msg[0] = '\0';
    rc = plait_exec_hier_ag_wanted(x, m, total) ? plait_exec_hier_allgather(x, out, bytes)
                                                : x->t->allgatherv(x->ts, out, bytes);
    if (e) plait_tl_end(x->tl, name, x->activity[PLAIT_COLL_ALLGATHER]);
    if (rc) rc = plait_exec_transport_error(x, rc, "allgather", name);
  }
  free(bytes);
  if (rc == PLAIT_SUCCESS) plait_exec_count(x, plait_now() - t0, total);
  if (rc || !e) {
    if (dev && e) plait_exec_dev_free(x, out); /* e NULL: scratch, freed with the response */
    else if (!dev) free(out);
    return rc;
  }
  plait_tensor_t t = e->input;
  t.data = out;
  t.shape[0] = rows;
  if (dev) plait_exec_set_device_output(x, e->handle, &t, out, NULL, 0);
  else plait_handle_set_output(e->handle, &t, out, NULL, 0);
  return PLAIT_SUCCESS;
}
