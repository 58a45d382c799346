/*
 * Internal to engine/execute/: what the executor's files share (execute.c,
 * execute_allgather.c, execute_alltoall.c, execute_reducescatter.c,
 * execute_device.c, memory.c, finish.c, pending.c, fail_all.c). They call
 * one another downward only: execute.c at the top, memory.c and finish.c
 * at the bottom. Nothing outside engine/execute/ includes it:
 * the wing's interface is execute.h and pending.h.
 */
#ifndef PLAIT_EXECUTE_INTERNAL_H
#define PLAIT_EXECUTE_INTERNAL_H

#include "engine/execute/execute.h"
#include "plait/dtypes.h"
#include "util/error.h"

/* Device memory to free once the response that uses it has finished. */
typedef struct plait_scratch {
  void *ptr;
  struct plait_scratch *next;
} plait_scratch_t;

/* The collectives whose output plait allocates: execute_allgather.c,
 * execute_alltoall.c, execute_reducescatter.c. */
plait_result_t plait_exec_allgather(plait_exec_t *x, const plait_response_t *r, plait_entry_t *e);
plait_result_t plait_exec_alltoall(plait_exec_t *x, const plait_response_t *r, plait_entry_t *e);
plait_result_t plait_exec_reducescatter(plait_exec_t *x, plait_entry_t *e);
/* The hierarchical allreduce (execute_hier.c; hier_plan.h): whether an
 * allreduce of count elements described by m runs so (the same answer on
 * every rank); and the allreduce of count elements from in into out (in
 * place when in == out), op the wire op, post the postscale applied on the
 * way. A failure's message is in x->hier_msg. */
int plait_exec_hier_wanted(const plait_exec_t *x, const plait_meta_t *m, size_t count);
plait_result_t plait_exec_hier_allreduce(plait_exec_t *x, const plait_meta_t *m, plait_op_t op,
                                         const void *in, void *out, size_t count, double post);
/* The hierarchical allgather (execute_hier_allgather.c): whether an
 * allgather of total output bytes described by m runs so (the same answer
 * on every rank); and the allgather in place in out of blocks of bytes[q]
 * per rank q, in rank order (as the transport's allgatherv). A failure's
 * message is in x->hier_msg. */
int plait_exec_hier_ag_wanted(const plait_exec_t *x, const plait_meta_t *m, size_t total);
plait_result_t plait_exec_hier_allgather(plait_exec_t *x, void *out, const size_t *bytes);
/* A host buffer for an output plait allocates (memory.c). */
void *plait_exec_alloc_host(size_t bytes);
/* The factor a reduction's result is scaled by: the postscale factor, and
 * for AVERAGE postscale / size, in double, as Horovod 0.28 does, so that the
 * result is one scaling of the sum, bit for bit Horovod's. Inline here (it
 * was in execute.c) so that execute_reducescatter.c does not call back up. */
static inline double plait_exec_postscale(const plait_meta_t *m, int size) {
  return m->op == PLAIT_OP_AVERAGE ? m->postscale / (double)size : m->postscale;
}

/* ---- The device-memory path (execute_device.c; the memory itself in
 * memory.c): the core never touches device memory; every copy, scaling and
 * fill there is the transport's. */

/* Whether m describes device memory. */
static inline int plait_exec_on_device(const plait_meta_t *m) { return m->device >= 0; }
/* Whether the transport copies and scales in its memory (batch_copy). */
static inline int plait_exec_has_batch(const plait_exec_t *x) {
  return PLAIT_TRANSPORT_HAS(x->t, batch_copy);
}
/* One batch_copy of n spans (nothing when n is 0), dtype and op of m;
 * a failure names `what` and `name` like a collective's. */
plait_result_t plait_exec_batch(plait_exec_t *x, const plait_meta_t *m, const plait_span_t *s,
                                size_t n, double factor, const char *what, const char *name);
/* ready() once per distinct stream of the local entries es[0..n) (NULL ones
 * skipped) that are in device memory; nothing without ready. */
plait_result_t plait_exec_ready(plait_exec_t *x, plait_entry_t *const *es, uint32_t n);
/* The fused copy-in (members, a joined rank's identities, padding) and
 * copy-out of a response in device memory: one batch_copy each. */
plait_result_t plait_exec_copy_in_device(plait_exec_t *x, const plait_response_t *r,
                                         plait_entry_t **es, const plait_meta_t *m,
                                         const size_t *offs);
plait_result_t plait_exec_copy_out_device(plait_exec_t *x, const plait_response_t *r,
                                          plait_entry_t **es, const plait_meta_t *m,
                                          const size_t *offs, double post);
/* Device memory from the transport (the job's state): *p, or an error
 * naming what it was for. With keep 0 it is scratch, freed when the
 * response has finished; with keep 1 the caller hands it to a handle
 * (plait_exec_set_device_output) or frees it (plait_exec_dev_free). */
plait_result_t plait_exec_dev_alloc(plait_exec_t *x, size_t bytes, int keep, const char *what,
                                    void **p);
void plait_exec_dev_free(plait_exec_t *x, void *p);
/* Gives a handle a library-allocated output in device memory: freed with
 * the transport's mem_free when the handle is released. */
void plait_exec_set_device_output(plait_exec_t *x, struct plait_handle *h,
                                  const plait_tensor_t *out, void *owned, int64_t *splits,
                                  int nsplits);
/* The owner of device outputs (x->devmem): made at init when the transport
 * takes device memory; closed (later releases leak rather than call a
 * finalized plugin) before the transport stops. */
struct plait_devmem *plait_devmem_new(const plait_transport_t *t, void *ts);
void plait_devmem_close(struct plait_devmem *d);
/* Frees (or, when the response's work is still running, hands to *list)
 * this response's scratch buffers. */
void plait_exec_scratch_release(plait_exec_t *x, plait_scratch_t **list);
/* Waits for every device response still running (pending.h) before memory
 * they may use is freed; an error after PLAIT_TIMEOUT_S. */
plait_result_t plait_exec_quiesce(plait_exec_t *x, const char *why);

/* Bytes of one first-dimension row of a tensor described by m. */
static inline size_t plait_exec_row_bytes(const plait_meta_t *m) {
  size_t b = plait_dtype_size_inline((plait_dtype_t)m->dtype);
  for (int i = 1; i < m->ndim; i++) b *= (size_t)m->shape[i];
  return b;
}

/* Counts one response that spent transport_s in the transport for bytes. */
static inline void plait_exec_count(plait_exec_t *x, double transport_s, uint64_t bytes) {
  plait_stats_t *s = plait_stats_lock(x->stats);
  s->transport_s += transport_s;
  s->responses++;
  s->bytes += bytes;
  plait_stats_unlock(x->stats);
}

/* A transport call failed: its message, with the operation's context. */
static inline plait_result_t plait_exec_transport_error(plait_exec_t *x, plait_result_t rc,
                                                        const char *what, const char *name) {
  const char *m = x->t->last_error(x->ts);
  return plait_error(rc, "%s '%s' failed in transport '%s': %s", what, name, x->t->name,
                     m && *m ? m : plait_strerror(rc));
}

#endif
