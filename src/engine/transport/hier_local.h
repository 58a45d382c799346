/*
 * Internal: the hierarchical collectives' local set over shared memory: a
 * second instance of the first plugin (auto's order) whose probe picks shm
 * (ofi, on libfabric's shm provider), started over this host's ranks only,
 * where libfabric's shm provider serves them (hierarchy.h makes the cross
 * set on the job's transport as before). Its bootstrap is the job's, cut
 * to the host's ranks (every call is job-wide, so every host's instance
 * starts at once and a failure on any rank ends every host's start in
 * agreement, never in a hang): if any rank cannot open it, every rank
 * keeps the local set on the job's transport, with an info line saying why.
 *
 * Threads: opened and closed by the thread that starts and stops the
 * engine; used by the coordinator thread only.
 */
#ifndef PLAIT_HIER_LOCAL_H
#define PLAIT_HIER_LOCAL_H

#include <stddef.h>

#include "engine/transport/plugin.h"
#include "plait/transport.h"

/* PLAIT_HIERARCHICAL_LOCAL_TRANSPORT: rank 0's is the job's. */
typedef enum {
  PLAIT_HIER_LOCAL_AUTO = 0, /* ofi's shm where every rank opens it, else the job's */
  PLAIT_HIER_LOCAL_JOB = 1,  /* the job's transport (a subset of its state) */
} plait_hier_local_t;

/* auto or job (any case); PLAIT_ERR_CONFIG naming the variable otherwise. */
plait_result_t plait_hier_local_parse(const char *text, plait_hier_local_t *out);
const char *plait_hier_local_name(plait_hier_local_t v);

/* What opening the local set needs from the engine. */
typedef struct {
  const plait_bootstrap_t *boot; /* the job's */
  const char *plugin_path;       /* PLAIT_PLUGIN_PATH (may be NULL) */
  double timeout_s;
  const int *members; /* this host's ranks in increasing order */
  int n;              /* how many (>= 2) */
  int index;          /* this rank's place in members */
} plait_hier_local_args_t;

/* The started instance: its plugin and the bootstrap its init was given. */
typedef struct plait_hier_shm plait_hier_shm_t;

/* Collective over the job (every rank calls it once, at the same point):
 * starts the ofi plugin over the members on shm. *out: the instance when
 * every rank of every host started one; NULL when any did not, with why
 * (this rank's reason, or which rank could not) and nothing left open.
 * Returns an error only when the job's bootstrap itself failed. */
plait_result_t plait_hier_shm_open(const plait_hier_local_args_t *a, plait_hier_shm_t **out,
                                   char *why, size_t cap);
/* The instance's table and state (its rank: index; nranks: n). */
const plait_transport_t *plait_hier_shm_table(const plait_hier_shm_t *s);
void *plait_hier_shm_state(const plait_hier_shm_t *s);
/* Finalizes and unloads. NULL is harmless. */
void plait_hier_shm_close(plait_hier_shm_t *s);

#endif
