/*
 * Internal: running a response on this rank, the same on every rank. The
 * coordinator thread calls it for each response rank 0 decided, in order.
 */
#ifndef PLAIT_EXECUTE_H
#define PLAIT_EXECUTE_H

#include "engine/submit/namemap.h"
#include "util/error.h"
#include "engine/negotiate/messages.h"
#include "plait/dtypes.h"
#include "plait/transport.h"
#include "engine/observe/stats.h"
#include "engine/submit/table.h"
#include "engine/observe/timeline.h"

struct plait_pending; /* pending.h: device work awaiting the plugin's done */
struct plait_devmem;  /* execute_device.c: device outputs owned by handles */

/* Device memory to free once the response that uses it has finished. */
typedef struct plait_scratch {
  void *ptr;
  struct plait_scratch *next;
} plait_scratch_t;

typedef struct plait_exec {
  int rank, size;
  const plait_transport_t *t;
  void *ts;
  void *ts0; /* the job's state (ts is a process set's in a view): device outputs */
  void *fusion; /* the fusion buffer (transport memory), reused */
  size_t fusion_cap;
  int joined;   /* this rank has joined: it contributes identities */
  uint64_t threshold; /* PLAIT_FUSION_THRESHOLD: the buffer's nominal size */
  size_t piece;       /* host fused responses go through the buffer in pieces
                       * of at most this many bytes (0: whole; allreduce_fused) */
  plait_table_t *table;
  plait_namemap_t *local; /* name -> entry waiting for its response */
  plait_counters_t *stats;  /* the engine's counters */
  plait_timeline_t *tl;     /* the engine's timeline (NULL: none) */
  struct plait_psets *psets; /* the engine's process sets (process_set.h) */
  char activity[PLAIT_COLL_MAX_ + 1][48]; /* "GLOO_ALLREDUCE", ... */
  /* The device-memory path (execute_device.c). */
  struct plait_pending *pending; /* NULL unless the transport has notify */
  struct plait_devmem *devmem;   /* NULL unless it takes device memory */
  plait_scratch_t *scratch;      /* this response's temporary device buffers */
  int interrupted;               /* interrupt() was called (plait_exec_settle) */
} plait_exec_t;

void plait_exec_init(plait_exec_t *x, int rank, int size, const plait_transport_t *t, void *ts,
                     plait_table_t *table, plait_namemap_t *local);
void plait_exec_free(plait_exec_t *x);

/* Runs r. An error response fails its entries on this rank; that is not a
 * failure of the job. A transport failure is returned (the job is then
 * failed by the caller); the entries of r are failed with it first. */
plait_result_t plait_exec_run(plait_exec_t *x, const plait_response_t *r);

/* Finishes e (removes it from the local map and the table, completes its
 * handle with rc and msg, frees it). */
void plait_exec_finish(plait_exec_t *x, plait_entry_t *e, plait_result_t rc, const char *msg);

/* The collectives whose output plait allocates: execute_allgather.c,
 * execute_alltoall.c, execute_reducescatter.c. */
plait_result_t plait_exec_allgather(plait_exec_t *x, const plait_response_t *r, plait_entry_t *e);
plait_result_t plait_exec_alltoall(plait_exec_t *x, const plait_response_t *r, plait_entry_t *e);
plait_result_t plait_exec_reducescatter(plait_exec_t *x, plait_entry_t *e);
void *plait_exec_alloc_host(size_t bytes);
/* The factor a reduction's result is scaled by: the postscale factor, and
 * for AVERAGE postscale / size (Horovod's arithmetic). */
double plait_exec_postscale(const plait_meta_t *m, int size);

/* ---- The device-memory path (execute_device.c): the core never touches
 * device memory; every copy, scaling and fill there is the transport's. */

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
/* At the end of coordination (coordinator thread): with rc a failure,
 * interrupt() every state once; then wait for outstanding device work
 * (PLAIT_TIMEOUT_S at most). After a clean end (rc 0) what finished
 * completes as usual, and what did not is interrupted and fails; after a
 * failure every entry still pending fails with rc and why. */
void plait_exec_settle(plait_exec_t *x, plait_result_t rc, const char *why);
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
