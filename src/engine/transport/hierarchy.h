/*
 * Internal: the hierarchical allreduce's and allgather's communicators
 * (hier_plan.h says the algorithms): one local set (this rank's host) and one cross set (the
 * ranks of this rank's local index on every host), made at engine start as
 * transport sub-states (transport.h, subset), so they run on any transport
 * that has sub-communicators. They are not process sets: no id, invisible
 * to plait_process_set_*; only the executor uses them, for the global set.
 *
 * Threads: created and destroyed by the thread that starts and stops the
 * engine, used by the coordinator thread only (like the job's state).
 */
#ifndef PLAIT_HIERARCHY_H
#define PLAIT_HIERARCHY_H

#include <stddef.h>
#include <stdint.h>

#include "engine/transport/hier_local.h"
#include "engine/transport/hier_plan.h"
#include "plait/transport.h"

typedef struct plait_hier {
  const plait_transport_t *t;  /* the job's: the cross set's */
  const plait_bootstrap_t *boot; /* the job's (during create only) */
  const plait_transport_t *lt; /* the local set's: t, or the shm instance's */
  plait_hier_shm_t *shm;       /* the local set's own ofi instance over shm, or NULL */
  const char *local_over;      /* what the local set runs on: "ofi shm" or t->name */
  void *local;   /* sub-state over this host's ranks (its rank: index) */
  void *cross;   /* sub-state over the ranks of local index `index` */
  int hosts, per_host, index;
  plait_hier_mode_t mode; /* rank 0's PLAIT_HIERARCHICAL_ALLREDUCE */
  plait_hier_mode_t ag_mode; /* rank 0's PLAIT_HIERARCHICAL_ALLGATHER */
  int *index_of;          /* every rank's local index (size entries) */
  void *ag_scratch;       /* the hierarchical allgather's buffer, kept: its pages */
  size_t ag_cap;          /* stay mapped (bytes; grown to the largest output) */
  uint64_t threshold;     /* rank 0's PLAIT_HIERARCHICAL_THRESHOLD */
  double gain;            /* bytes across hosts, flat over hierarchical (hier_plan.h) */
  double min_gain;        /* the least gain auto's allreduce runs at (hier_plan.h) */
} plait_hier_t;

/* This rank's settings for plait_hier_create (rank 0's are the job's). */
typedef struct {
  plait_hier_mode_t mode;        /* PLAIT_HIERARCHICAL_ALLREDUCE */
  plait_hier_mode_t ag_mode;     /* PLAIT_HIERARCHICAL_ALLGATHER */
  plait_hier_local_t local;      /* PLAIT_HIERARCHICAL_LOCAL_TRANSPORT */
  uint64_t threshold;            /* PLAIT_HIERARCHICAL_THRESHOLD */
  const char *plugin_path;       /* PLAIT_PLUGIN_PATH, for the shm instance */
  double timeout_s;
} plait_hier_settings_t;

/* At engine start, after the transport started, on every rank (a
 * collective over the job when size > 1: one bootstrap allgather of every
 * rank's host identity and settings, then, where the layout fits and rank
 * 0's mode is not off, H + L subsets of ts in the same order everywhere).
 * *out: the communicators, or NULL where the hierarchical allreduce cannot
 * or must not run (one host, one rank per host, hosts of unequal counts,
 * both modes off or auto on a layout that gains less than
 * plait_hier_auto_min_gain, a transport without subset or host memory).
 * The local set runs on its own ofi instance over shm (hier_local.h) under
 * PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=auto where every rank opens one, else
 * on ts. set: this rank's settings (parsed by the caller, which tells the
 * others when one does not parse); a rank whose settings differ from rank
 * 0's is told so at warn level (rank 0's are the job's). */
plait_result_t plait_hier_create(const plait_bootstrap_t *boot, const char *host,
                                 const plait_hier_settings_t *set,
                                 const plait_transport_t *t, void *ts, plait_hier_t **out);
/* Releases the sub-states (before the job's state goes). NULL is harmless. */
void plait_hier_destroy(plait_hier_t *h);

#endif
