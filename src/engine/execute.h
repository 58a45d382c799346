/*
 * Internal: running a response on this rank, the same on every rank. The
 * coordinator thread calls it for each response rank 0 decided, in order.
 */
#ifndef PLAIT_EXECUTE_H
#define PLAIT_EXECUTE_H

#include "engine/namemap.h"
#include "util/error.h"
#include "engine/negotiation_msgs.h"
#include "plait/transport.h"
#include "engine/stats.h"
#include "engine/table.h"
#include "engine/timeline.h"

typedef struct plait_exec {
  int rank, size;
  const plait_transport_t *t;
  void *ts;
  void *fusion; /* the fusion buffer (transport memory), reused */
  size_t fusion_cap;
  int joined;   /* this rank has joined: it contributes identities */
  uint64_t threshold; /* PLAIT_FUSION_THRESHOLD: the buffer's nominal size */
  plait_table_t *table;
  plait_namemap_t *local; /* name -> entry waiting for its response */
  plait_counters_t *stats;  /* the engine's counters */
  plait_timeline_t *tl;     /* the engine's timeline (NULL: none) */
  char activity[PLAIT_COLL_MAX_ + 1][48]; /* "GLOO_ALLREDUCE", ... */
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

/* Bytes of one first-dimension row of a tensor described by m. */
static inline size_t plait_exec_row_bytes(const plait_meta_t *m) {
  size_t b = plait_dtype_size((plait_dtype_t)m->dtype);
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
