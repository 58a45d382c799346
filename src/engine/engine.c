/* The engine's life: start (join the job, transport, coordinator, timeline),
 * stop (leave together), references (engine.h). */
#include "engine/engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/coordinator.h"
#include "engine/transport/hierarchy.h"
#include "engine/transport/process_set.h"
#include "engine/transport/transport_choice.h"
#include "engine/transport/transport_defaults.h"
#include "util/affinity.h"
#include "util/error.h"
#include "util/log.h"
#include "util/program_signals.h"
#include "util/reduce.h"

/* This process's pid, kept so that the fork check on every call
 * (plait_engine_forked) costs a load rather than a getpid system call
 * (glibc does not cache it: three per operation were ~3% of a burst of
 * small allreduces). fork() runs the child handler, which stores the child's
 * pid before the child runs anything else; it is registered before the
 * first engine starts, so every fork that could copy an engine is seen.
 * 0: not known yet. */
static _Atomic pid_t self_pid;

static void note_child_pid(void) { atomic_store(&self_pid, getpid()); }
static void register_pid_tracking(void) { pthread_atfork(NULL, NULL, note_child_pid); }

static pid_t current_pid(void) {
  pid_t pid = atomic_load_explicit(&self_pid, memory_order_relaxed);
  return pid ? pid : getpid();
}

/* PLAIT_TRANSPORT names the plugin, or is "auto" (transport_choice.h).
 * Starting is collective: a rank whose transport fails to start tells the
 * others (plait_boot_fail), and all confirm with a barrier, so every rank
 * fails with the failing rank's message rather than a lost peer or a hang. */
static plait_result_t start_transport(plait_engine_t *e) {
  plait_transport_init_args_t args;
  memset(&args, 0, sizeof args);
  args.size = sizeof args;
  args.rank = e->topo.rank;
  args.nranks = e->topo.size;
  args.local_rank = e->topo.local_rank;
  args.local_size = e->topo.local_size;
  args.cross_rank = e->topo.cross_rank;
  args.cross_size = e->topo.cross_size;
  args.bootstrap = &e->boot.api;
  args.log = plait_log_write; /* the plugin ABI's plait_log_fn */
  args.log_level = plait_log_level();
  args.timeout_s = e->cfg.timeout_s;
  args.reduce = plait_reduce;
  args.scale = plait_scale;
  args.divide = plait_divide;
  args.reduce_scale = plait_reduce_scale;
  args.host_address = e->ctrl.local_ip;
  plait_result_t rc;
  plait_program_signals_t program; /* a transport's libraries may take SIGINT, SIGTERM */
  plait_program_signals_note(&program);
  if (!strcmp(e->cfg.transport, "auto"))
    rc = plait_transport_auto(&e->boot, &args, e->cfg.plugin_path, &e->plugin);
  else
    rc = plait_plugin_load(&e->plugin, e->cfg.transport, e->cfg.plugin_path);
  if (rc == PLAIT_SUCCESS) rc = plait_plugin_start(&e->plugin, &args);
  if (plait_program_signals_keep(&program))
    PLAIT_DEBUG("transport", "put back the program's own SIGINT/SIGTERM handlers, which "
                "the transport's libraries had replaced");
  if (rc) {
    plait_plugin_unload(&e->plugin);
    return plait_boot_fail(&e->boot, rc);
  }
  rc = plait_boot_barrier(&e->boot); /* every rank started it */
  if (rc) plait_plugin_unload(&e->plugin);
  return rc;
}

/* PLAIT_THREAD_AFFINITY: the CPU of this rank's coordinator thread, once
 * the local rank is known (at rendezvous). A list this rank cannot use fails
 * every rank, naming it (plait_boot_fail), before any transport starts. */
static plait_result_t choose_cpu(plait_engine_t *e) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  int known = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  plait_result_t rc = plait_affinity_cpu(e->cfg.thread_affinity, e->topo.local_rank,
                                         e->topo.local_size, known ? &allowed : NULL,
                                         &e->coord_cpu);
  if (rc) return plait_boot_fail(&e->boot, rc);
  if (e->coord_cpu >= 0)
    PLAIT_INFO("engine", "the coordinator thread runs on CPU %d (PLAIT_THREAD_AFFINITY, local "
               "rank %d)", e->coord_cpu, e->topo.local_rank);
  return PLAIT_SUCCESS;
}

/* PLAIT_CALLER_RUNS: auto, or a boolean. A value this rank cannot read
 * fails every rank, naming it, before any transport starts. */
static plait_result_t caller_runs_mode(plait_engine_t *e) {
  const char *v = e->cfg.caller_runs ? e->cfg.caller_runs : "auto";
  int on;
  if (!strcmp(v, "auto")) on = -1;
  else if (plait_parse_bool(v, &on) != 0)
    return plait_boot_fail(&e->boot, plait_error(PLAIT_ERR_INVALID_ARGUMENT,
                           "PLAIT_CALLER_RUNS=%s on rank %d: expected auto, 0, 1, on, off, true, "
                           "false, yes or no", v, e->topo.rank));
  e->caller_runs = on;
  return PLAIT_SUCCESS;
}

/* PLAIT_TIMELINE: "%r" in the path becomes the rank (one file per rank). A
 * file that cannot be written is an error (PLAIT_ERR_CONFIG), before the
 * rank joins the others: the job does not run without the timeline it asked for. */
static plait_result_t start_timeline(plait_engine_t *e) {
  plait_tl_set_mark_cycles(e->timeline, e->cfg.timeline_mark_cycles);
  if (!e->cfg.timeline || !*e->cfg.timeline) return PLAIT_SUCCESS;
  char path[4096];
  size_t o = 0;
  for (const char *p = e->cfg.timeline; *p && o + 16 < sizeof path; p++) {
    if (p[0] == '%' && p[1] == 'r') {
      o += (size_t)snprintf(path + o, sizeof path - o, "%d", e->topo.rank);
      p++;
    } else {
      path[o++] = *p;
    }
  }
  path[o] = '\0';
  if (plait_tl_start(e->timeline, path, e->topo.rank) == PLAIT_SUCCESS) return PLAIT_SUCCESS;
  char why[1024];
  snprintf(why, sizeof why, "%s", plait_last_error());
  return plait_error(PLAIT_ERR_CONFIG, "PLAIT_TIMELINE='%s' cannot be used: %s", e->cfg.timeline,
                     why);
}

/* Frees what start allocated before anything ran; e itself too. */
static void free_engine(plait_engine_t *e) {
  plait_tl_destroy(e->timeline);
  plait_counters_destroy(&e->stats);
  plait_tunables_destroy(&e->tunables);
  plait_config_free(&e->cfg);
  free(e);
}

/* The hierarchical allreduce's and allgather's local and cross sub-states
 * (hierarchy.h), collective over the job: a rank whose
 * PLAIT_HIERARCHICAL_ALLREDUCE, _ALLGATHER or _LOCAL_TRANSPORT does not parse tells the
 * others, as a transport that fails to start does. */
static plait_result_t start_hierarchy(plait_engine_t *e) {
  plait_hier_mode_t mode, ag_mode;
  plait_result_t rc =
      plait_hier_parse_mode("PLAIT_HIERARCHICAL_ALLREDUCE", e->cfg.hierarchical_allreduce, &mode);
  if (rc == PLAIT_SUCCESS)
    rc = plait_hier_parse_mode("PLAIT_HIERARCHICAL_ALLGATHER", e->cfg.hierarchical_allgather,
                               &ag_mode);
  plait_hier_local_t local = PLAIT_HIER_LOCAL_AUTO;
  if (rc == PLAIT_SUCCESS)
    rc = plait_hier_local_parse(e->cfg.hierarchical_local_transport, &local);
  if (rc) return e->topo.size > 1 ? plait_boot_fail(&e->boot, rc) : rc;
  plait_hier_settings_t set = {mode, ag_mode, local, e->cfg.hierarchical_threshold,
                               e->cfg.plugin_path, e->cfg.timeout_s};
  return plait_hier_create(&e->boot.api, e->topo.host, &set, e->plugin.table, e->plugin.state,
                           &e->hier);
}

plait_result_t plait_engine_start(plait_config_t *cfg, const plait_topology_t *topo,
                                  int with_coordinator, plait_engine_t **out) {
  plait_engine_t *e = calloc(1, sizeof *e);
  if (!e) {
    plait_config_free(cfg);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory creating the engine");
  }
  static pthread_once_t pid_once = PTHREAD_ONCE_INIT;
  pthread_once(&pid_once, register_pid_tracking);
  atomic_store(&self_pid, getpid());
  e->pid = getpid();
  e->coord_cpu = -1;
  e->cfg = *cfg;
  memset(cfg, 0, sizeof *cfg); /* the engine owns its strings now */
  e->topo = *topo;
  e->ctrl.listen_fd = -1;
  atomic_init(&e->refs, 1);
  plait_tunables_init(&e->tunables, &e->cfg);
  plait_counters_init(&e->stats);
  plait_result_t rc;
  if (!(e->timeline = plait_tl_create())) {
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory creating the timeline");
    goto fail;
  }
  PLAIT_CHECK_GOTO(rc, start_timeline(e), fail); /* free_engine stops it */
  PLAIT_CHECK_GOTO(rc, plait_control_start(&e->ctrl, &e->topo, &e->cfg), fail);
  plait_boot_init(&e->boot, &e->ctrl);
  PLAIT_CHECK_GOTO(rc, choose_cpu(e), fail_ctrl);
  PLAIT_CHECK_GOTO(rc, caller_runs_mode(e), fail_ctrl);
  PLAIT_CHECK_GOTO(rc, start_transport(e), fail_ctrl);
  snprintf(e->transport_name, sizeof e->transport_name, "%s", e->plugin.table->name);
  plait_transport_defaults(&e->cfg, e->plugin.table); /* where the user set nothing */
  plait_tunables_reload(&e->tunables, &e->cfg);
  if (!(e->psets = plait_psets_create(e->topo.rank, e->topo.size, e->plugin.table,
                                      e->plugin.state, e->cfg.dynamic_process_sets))) {
    rc = PLAIT_ERR_NO_MEMORY;
    goto fail_plugin;
  }
  PLAIT_CHECK_GOTO(rc, start_hierarchy(e), fail_plugin);
  plait_control_started(&e->ctrl); /* silence past PLAIT_TIMEOUT_S is loss from now on */
  if (with_coordinator) PLAIT_CHECK_GOTO(rc, plait_coord_start(e, &e->coord), fail_plugin);
  atomic_store(&e->running, 1);
  *out = e;
  return PLAIT_SUCCESS;
fail_plugin:
  plait_hier_destroy(e->hier);
  e->hier = NULL;
  plait_psets_destroy(e->psets);
  e->psets = NULL;
  plait_plugin_unload(&e->plugin);
fail_ctrl:
  plait_control_close(&e->ctrl);
fail:
  free_engine(e);
  return rc;
}

plait_result_t plait_engine_stop(plait_engine_t *e) {
  if (!atomic_exchange(&e->running, 0))
    return plait_error(PLAIT_ERR_NOT_INITIALIZED, "plait is not initialized (it was shut down)");
  plait_coord_stop(e->coord); /* pending operations fail with PLAIT_ERR_SHUTDOWN */
  plait_tl_stop(e->timeline);
  /* Leave together, so no rank reads a closed connection as a lost peer. */
  plait_result_t rc = plait_boot_barrier(&e->boot);
  char why[2048] = "";
  if (rc) {
    snprintf(why, sizeof why, "%s", plait_last_error());
    PLAIT_WARN("shutdown", "leaving without the other ranks: %s", why);
  }
  plait_hier_destroy(e->hier); /* sub-states, before the transport goes */
  e->hier = NULL;
  plait_psets_destroy(e->psets); /* the sets' sub-states, before the transport goes */
  e->psets = NULL;
  plait_plugin_unload(&e->plugin);
  plait_control_close(&e->ctrl);
  if (rc) return plait_error(rc, "%s", why);
  return PLAIT_SUCCESS;
}

int plait_engine_forked(const plait_engine_t *e) { return e && e->pid != current_pid(); }

int plait_engine_running(const plait_engine_t *e) {
  return e && atomic_load(&e->running) && !plait_engine_forked(e);
}

void plait_engine_ref(plait_engine_t *e) { atomic_fetch_add(&e->refs, 1); }

void plait_engine_unref(plait_engine_t *e) {
  if (!e || atomic_fetch_sub(&e->refs, 1) != 1) return;
  if (plait_engine_forked(e)) return; /* the parent's: nothing of it is ours to free */
  if (atomic_load(&e->running)) plait_engine_stop(e); /* an owner that never stopped it */
  plait_coord_free(e->coord);
  free_engine(e);
}

plait_result_t plait_engine_submit(plait_engine_t *e, plait_entry_t **entries, int n) {
  if (!plait_engine_running(e) || !e->coord)
    return plait_error(PLAIT_ERR_NOT_INITIALIZED,
                       "plait is not initialized (call plait_init first)");
  return plait_coord_submit(e->coord, entries, n);
}

plait_result_t plait_engine_config_set(plait_engine_t *e, const char *var, const char *value) {
  PLAIT_CHECK(plait_tunables_set(&e->tunables, var, value));
  plait_tuning_t v = plait_tunables_get(&e->tunables);
  plait_log_set_level(v.log_level); /* the logger is the process's */
  plait_tl_set_mark_cycles(e->timeline, v.timeline_mark_cycles);
  return PLAIT_SUCCESS; /* the coordinator takes up the rest at its next cycle */
}

plait_result_t plait_engine_config_format(plait_engine_t *e, char *buf, size_t buf_size,
                                          size_t *needed) {
  plait_config_t now = e->cfg; /* shallow: strings stay the engine's */
  plait_tunables_overlay(&e->tunables, &now);
  return plait_config_format(&now, buf, buf_size, needed);
}
