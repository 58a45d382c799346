/* The hierarchical allreduce of one contiguous span (hier_plan.h): a
 * reduce-scatter within the host, an allreduce of this rank's shard across
 * hosts, an allgather within the host; on the sub-states made at start
 * (hierarchy.h), over whatever transport the job runs. */
#include "engine/execute/execute_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/transport/hierarchy.h"
#include "util/log.h"
#include "util/reduce.h"

int plait_exec_hier_wanted(const plait_exec_t *x, const plait_meta_t *m, size_t count) {
  const plait_hier_t *h = x->hier;
  if (!h || m->device >= 0) return 0;
  size_t bytes = count * plait_dtype_size_inline((plait_dtype_t)m->dtype);
  return plait_hier_wanted(h->mode, h->threshold, count, bytes, h->per_host);
}

/* A step failed on sub-state ts: the message transport_error reports. */
static plait_result_t step_failed(plait_exec_t *x, void *ts, plait_result_t rc, const char *step) {
  const char *m = x->t->last_error(ts);
  snprintf(x->hier_msg, sizeof x->hier_msg, "hierarchical allreduce, %s: %s", step,
           m && *m ? m : plait_strerror(rc));
  return rc;
}

plait_result_t plait_exec_hier_allreduce(plait_exec_t *x, const plait_meta_t *m, plait_op_t op,
                                         const void *in, void *out, size_t count, double post) {
  plait_hier_t *h = x->hier;
  const plait_transport_t *t = x->t;
  x->hier_msg[0] = '\0';
  plait_dtype_t dt = (plait_dtype_t)m->dtype;
  size_t es = plait_dtype_size_inline(dt);
  int L = h->per_host;
  size_t *counts = malloc(sizeof *counts * (size_t)(2 * L + 1));
  size_t *bytes = malloc(sizeof *bytes * (size_t)L);
  if (!counts || !bytes) {
    free(counts), free(bytes);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory (hierarchical allreduce)");
  }
  size_t *offs = counts + L;
  plait_hier_shards(count, L, counts, offs);
  size_t mine = counts[h->index];
  char *at = (char *)out + offs[h->index] * es;
  /* the reduce-scatter may not write where it reads: in place, a scratch shard */
  char *shard = in == out ? plait_hier_scratch(h, mine * es) : at;
  plait_result_t rc = shard ? PLAIT_SUCCESS : PLAIT_ERR_NO_MEMORY;
  if (rc == PLAIT_SUCCESS && (rc = t->reducescatter(h->local, in, shard, counts, dt, op)))
    rc = step_failed(x, h->local, rc, "the reduce-scatter within the host");
  int folds = (t->allreduce_flags & PLAIT_ALLREDUCE_SCALED) != 0;
  plait_span_t s = {shard, shard, mine};
  if (rc == PLAIT_SUCCESS && (rc = t->allreduce(h->cross, &s, 1, dt, op, 1.0, folds ? post : 1.0)))
    rc = step_failed(x, h->cross, rc, "the allreduce across hosts");
  if (rc == PLAIT_SUCCESS && !folds && post != 1.0)
    rc = plait_scale(dt, shard, shard, mine, post);
  if (rc == PLAIT_SUCCESS && shard != at) memcpy(at, shard, mine * es);
  for (int i = 0; i < L; i++) bytes[i] = counts[i] * es;
  if (rc == PLAIT_SUCCESS && (rc = t->allgatherv(h->local, out, bytes)))
    rc = step_failed(x, h->local, rc, "the allgather within the host");
  PLAIT_DEBUG("hier", "hierarchical allreduce of %zu elements: shard %zu at %zu, rc %d", count,
              mine, offs[h->index], (int)rc);
  free(counts);
  free(bytes);
  return rc;
}
