/*
 * Internal: the engine, everything one member of a job holds, in one object.
 *
 * plait_init creates one (from the environment) and the public API reaches it
 * through one pointer (api/current.h); tests create several in one process
 * from explicit settings (tests/harness/engines.h). Nothing of an engine lives
 * in a process global: two engines in one process share nothing but the
 * logger's level.
 *
 *   cfg        immutable snapshot of the configuration, never written after
 *              start (so any thread may read it without a lock)
 *   tunables   what plait_config_set may change while running, one lock
 *   topo, ctrl, boot, plugin   where this rank sits, the control plane, the
 *              plugins' bootstrap, the transport
 *   psets      the process sets (process_set.h)
 *   coord      the coordinator thread and its state (coordinator.h)
 *   stats      the counters of plait_stats
 *   timeline   the Chrome-trace writer
 *
 * "Is it running?" has one answer: plait_engine_running().
 */
#ifndef PLAIT_ENGINE_H
#define PLAIT_ENGINE_H

#include <stdatomic.h>
#include <sys/types.h>

#include "control/bootstrap.h"
#include "control/control.h"
#include "control/topology.h"
#include "engine/submit/entry.h"
#include "engine/transport/plugin.h"
#include "engine/observe/stats.h"
#include "engine/observe/timeline.h"
#include "engine/tune/tunables.h"
#include "util/config.h"

typedef struct plait_coord plait_coord_t;
typedef struct plait_psets plait_psets_t;

typedef struct plait_engine {
  pid_t pid;               /* the process that started it: only it may use or stop it */
  int coord_cpu;           /* PLAIT_THREAD_AFFINITY's CPU for the coordinator; -1: not pinned */
  int caller_runs;         /* PLAIT_CALLER_RUNS: 1, 0, or -1 auto (where the transport has a vote) */
  plait_config_t cfg;      /* immutable after start */
  plait_tunables_t tunables;
  plait_topology_t topo;
  plait_control_t ctrl;
  plait_boot_t boot;
  plait_plugin_t plugin;
  char transport_name[80];
  plait_psets_t *psets;    /* the process sets; their sub-states live until stop */
  struct plait_hier *hier;  /* the hierarchical allreduce's sub-states (NULL: flat) */
  plait_coord_t *coord;    /* NULL when started without one (control-plane tests) */
  plait_counters_t stats;
  plait_timeline_t *timeline;
  atomic_int running;      /* 1 from the end of start to the beginning of stop */
  atomic_int refs;         /* the owner's and each caller's in flight */
} plait_engine_t;

/* Joins the job described by topo (rank, size, rendezvous address; local and
 * cross values are derived at rendezvous) with the settings of cfg, whose
 * strings the engine takes over (cfg is left empty, also on failure). Starts
 * the control plane, the transport, the coordinator (unless with_coordinator
 * is 0) and the timeline (PLAIT_TIMELINE). Blocks until every rank has
 * joined or the start timeout passes. *out holds one reference. */
plait_result_t plait_engine_start(plait_config_t *cfg, const plait_topology_t *topo,
                                  int with_coordinator, plait_engine_t **out);

/* Leaves the job: ends coordination with every rank (pending operations fail
 * with PLAIT_ERR_SHUTDOWN), stops the timeline, leaves with the other ranks
 * (a barrier) and closes the transport and the control plane. The memory
 * stays until the last reference goes. Call once, from e->pid only. */
plait_result_t plait_engine_stop(plait_engine_t *e);

/* 1 while e runs in this process (0 for NULL, after stop begins, and in a
 * process forked from the one that started it). */
int plait_engine_running(const plait_engine_t *e);
/* 1 when this process is a fork of e's (e is then unusable here). */
int plait_engine_forked(const plait_engine_t *e);

/* The engine the calling thread works for, when it was bound to one: the
 * coordinator's thread, and in tests each rank's thread (several engines in
 * one process). NULL otherwise. Binding does not take a reference. */
void plait_engine_bind_thread(plait_engine_t *e);
plait_engine_t *plait_engine_bound(void);

void plait_engine_ref(plait_engine_t *e);
/* Drops one reference; the last frees e (stopped first if it still runs). */
void plait_engine_unref(plait_engine_t *e);

/* Hands entries to e's coordinator (all or none); see plait_coord_submit. */
plait_result_t plait_engine_submit(plait_engine_t *e, plait_entry_t **entries, int n);

/* plait_config_set on e: a settable variable (tunables.h) and its effects. */
plait_result_t plait_engine_config_set(plait_engine_t *e, const char *var, const char *value);
/* The effective configuration ("NAME=value" lines, run-time values included). */
plait_result_t plait_engine_config_format(plait_engine_t *e, char *buf, size_t buf_size,
                                          size_t *needed);

#endif
