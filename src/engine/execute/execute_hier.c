/* The hierarchical allreduce of one contiguous span (hier_plan.h): an
 * allreduce within the host, an allreduce of this rank's shard across
 * hosts, an allgather within the host; on the sub-states made at start
 * (hierarchy.h): within the host over shm where it opened, across hosts
 * over whatever transport the job runs. */
#include "engine/execute/execute_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/transport/hierarchy.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/reduce.h"

int plait_exec_hier_wanted(const plait_exec_t *x, const plait_meta_t *m, size_t count) {
  const plait_hier_t *h = x->hier;
  if (!h || m->device >= 0) return 0;
  size_t bytes = count * plait_dtype_size_inline((plait_dtype_t)m->dtype);
  return plait_hier_wanted(h->mode, h->threshold, count, bytes, h->per_host, h->gain,
                           h->min_gain);
}

/* A step failed on sub-state ts of table t: the message transport_error reports. */
static plait_result_t step_failed(plait_exec_t *x, const plait_transport_t *t, void *ts,
                                  plait_result_t rc, const char *step) {
  const char *m = t->last_error(ts);
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
  /* 1. the host's sum on every local rank: the transport's allreduce over
   * the local set (in -> out: a plugin that does not fold reads out, which
   * the caller filled) */
  plait_span_t whole = {out, in, count};
  double t0 = plait_now();
  plait_result_t rc = h->lt->allreduce(h->local, &whole, 1, dt, op, 1.0, 1.0);
  if (rc) rc = step_failed(x, h->lt, h->local, rc, "the allreduce within the host");
  /* 2. this rank's shard of it across hosts, scaled on the way */
  double t1 = plait_now();
  int folds = (t->allreduce_flags & PLAIT_ALLREDUCE_SCALED) != 0;
  plait_span_t s = {at, at, mine};
  if (rc == PLAIT_SUCCESS && (rc = t->allreduce(h->cross, &s, 1, dt, op, 1.0, folds ? post : 1.0)))
    rc = step_failed(x, t, h->cross, rc, "the allreduce across hosts");
  if (rc == PLAIT_SUCCESS && !folds && post != 1.0) rc = plait_scale(dt, at, at, mine, post);
  /* 3. every shard to every local rank */
  double t2 = plait_now();
  for (int i = 0; i < L; i++) bytes[i] = counts[i] * es;
  if (rc == PLAIT_SUCCESS && (rc = h->lt->allgatherv(h->local, out, bytes)))
    rc = step_failed(x, h->lt, h->local, rc, "the allgather within the host");
  PLAIT_DEBUG("hier", "hierarchical allreduce of %zu elements: shard %zu at %zu, rc %d; "
              "%.1f ms within the host (%s), %.1f ms across hosts (%s), %.1f ms within the "
              "host (%s)", count, mine, offs[h->index], (int)rc, (t1 - t0) * 1e3, h->local_over,
              (t2 - t1) * 1e3, t->name, (plait_now() - t2) * 1e3, h->local_over);
  free(counts);
  free(bytes);
  return rc;
}
