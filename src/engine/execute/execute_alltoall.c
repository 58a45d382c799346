/* Executing an alltoall: rows to every rank as the split matrix says, into
 * an output allocated here and handed to the handle with the splits. */
#include <stdlib.h>
#include <string.h>

#include "engine/execute/execute_internal.h"
#include "engine/submit/handle.h"
#include "engine/observe/timeline.h"
#include "util/clock.h"
#include "util/error.h"

plait_result_t plait_exec_alltoall(plait_exec_t *x, const plait_response_t *r, plait_entry_t *e) {
  int n = x->size;
  if (r->ndims != (uint32_t)(n * n))
    return plait_error(PLAIT_ERR_PROTOCOL, "alltoall '%s': split matrix of %u for %d ranks",
                       e->name, r->ndims, n);
  size_t rb = plait_exec_row_bytes(&e->meta);
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
  int dev = plait_exec_on_device(&e->meta); /* the output, in the transport's memory */
  void *out = NULL;
  if (rc == PLAIT_SUCCESS && dev)
    rc = plait_exec_dev_alloc(x, total, 1, "an alltoall output", &out);
  else if (rc == PLAIT_SUCCESS && !(out = plait_exec_alloc_host(total)))
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  double t0 = plait_now();
  if (rc == PLAIT_SUCCESS) {
    plait_tl_begin(x->tl, e->name, x->activity[PLAIT_COLL_ALLTOALL]);
    rc = x->t->alltoallv(x->ts, e->input.data, send, out, recv);
    plait_tl_end(x->tl, e->name, x->activity[PLAIT_COLL_ALLTOALL]);
    if (rc) rc = plait_exec_transport_error(x, rc, "alltoall", e->name);
  }
  free(send);
  free(recv);
  if (rc) {
    if (dev) plait_exec_dev_free(x, out);
    else free(out);
    free(splits);
    return rc;
  }
  plait_exec_count(x, plait_now() - t0, total);
  plait_tensor_t t = e->input;
  t.data = out;
  t.shape[0] = rows;
  if (dev) plait_exec_set_device_output(x, e->handle, &t, out, splits, n);
  else plait_handle_set_output(e->handle, &t, out, splits, n);
  return PLAIT_SUCCESS;
}
