/* The life-cycle and query part of the public ABI: init, shutdown, rank,
 * size, ..., config dump. One session at a time per process. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "control/bootstrap.h"
#include "util/config.h"
#include "util/config_horovod.h"
#include "control/control.h"
#include "engine/coordinator.h"
#include "api/core.h"
#include "util/error.h"
#include "util/log.h"
#include "engine/plugin.h"
#include "engine/process_set.h"
#include "util/reduce.h"
#include "engine/timeline.h"
#include "control/topology.h"

typedef struct session {
  plait_config_t cfg;
  plait_topology_t topo;
  plait_control_t ctrl;
  plait_boot_t boot;
  plait_plugin_t plugin;
} session_t;

static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_initialized;
static session_t S;
static char transport_name[80] = "";
static int without_coordinator;

void plait_core_test_without_coordinator(int on) { without_coordinator = on; }

#define REQUIRE_OUT(p)                                                         \
  do {                                                                         \
    if (!(p))                                                                  \
      return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: " #p " is NULL",     \
                         __func__);                                            \
  } while (0)

#define REQUIRE_INIT()                                                         \
  do {                                                                         \
    if (!atomic_load(&g_initialized))                                            \
      return plait_error(PLAIT_ERR_NOT_INITIALIZED,                            \
                         "%s: plait is not initialized (call plait_init "      \
                         "first)", __func__);                                  \
  } while (0)

static plait_result_t start_transport(session_t *s) {
  PLAIT_CHECK(plait_plugin_load(&s->plugin, s->cfg.transport, s->cfg.plugin_path));
  plait_transport_init_args_t args;
  memset(&args, 0, sizeof args);
  args.size = sizeof args;
  args.rank = s->topo.rank;
  args.nranks = s->topo.size;
  args.local_rank = s->topo.local_rank;
  args.local_size = s->topo.local_size;
  args.cross_rank = s->topo.cross_rank;
  args.cross_size = s->topo.cross_size;
  args.bootstrap = &s->boot.api;
  args.log = plait_log_write; /* the plugin ABI's plait_log_fn */
  args.log_level = plait_log_level();
  args.timeout_s = s->cfg.timeout_s;
  args.reduce = plait_reduce;
  args.scale = plait_scale;
  args.divide = plait_divide;
  args.host_address = s->ctrl.local_ip;
  plait_result_t rc = plait_plugin_start(&s->plugin, &args);
  if (rc) plait_plugin_unload(&s->plugin);
  return rc;
}

static plait_result_t init_locked(void) {
  session_t *s = &S;
  memset(s, 0, sizeof *s);
  s->ctrl.listen_fd = -1;
  PLAIT_CHECK(plait_config_load(&s->cfg));
  plait_log_set_level(s->cfg.log_level);
  plait_result_t rc;
  PLAIT_CHECK_GOTO(rc, plait_topology_from_env(&s->cfg, &s->topo), fail_cfg);
  plait_log_set_rank(s->topo.rank);
  plait_config_horovod_settle(&s->cfg, s->topo.rank); /* logs the HOROVOD_* variables taken */
  char unknown[512];
  if (plait_config_unknown(unknown, sizeof unknown))
    PLAIT_WARN("config", "unknown variable(s) ignored: %s (see plaitrun --help-env)", unknown);
  PLAIT_CHECK_GOTO(rc, plait_control_start(&s->ctrl, &s->topo, &s->cfg), fail_cfg);
  plait_boot_init(&s->boot, &s->ctrl);
  PLAIT_CHECK_GOTO(rc, start_transport(s), fail_ctrl);
  snprintf(transport_name, sizeof transport_name, "%s", s->plugin.table->name);
  plait_coord_args_t ca = {&s->cfg, &s->ctrl, s->plugin.table, s->plugin.state, s->topo.rank,
                           s->topo.size};
  plait_process_sets_reset();
  PLAIT_CHECK_GOTO(rc, plait_psets_start(s->topo.rank, s->topo.size, s->plugin.table,
                                         s->plugin.state, s->cfg.dynamic_process_sets),
                   fail_plugin);
  if (!without_coordinator) PLAIT_CHECK_GOTO(rc, plait_coord_start(&ca), fail_psets);
  if (!without_coordinator && (rc = plait_process_sets_from_config(s->cfg.process_sets,
                                                                     s->cfg.start_timeout_s))) {
    char why[2048];
    snprintf(why, sizeof why, "%s", plait_last_error());
    plait_coord_stop();
    plait_psets_stop();
    plait_plugin_unload(&s->plugin);
    plait_control_close(&s->ctrl);
    plait_config_free(&s->cfg);
    return plait_error(rc, "%s", why);
  }
  plait_tl_set_mark_cycles(s->cfg.timeline_mark_cycles);
  if (s->cfg.timeline && *s->cfg.timeline) {
    char path[4096]; /* "%r" in the path becomes the rank: one file per rank */
    size_t o = 0;
    for (const char *p = s->cfg.timeline; *p && o + 16 < sizeof path; p++) {
      if (p[0] == '%' && p[1] == 'r') {
        o += (size_t)snprintf(path + o, sizeof path - o, "%d", s->topo.rank);
        p++;
      } else {
        path[o++] = *p;
      }
    }
    path[o] = '\0';
    if (plait_tl_start(path, s->topo.rank))
      PLAIT_WARN("timeline", "PLAIT_TIMELINE=%s: %s", path, plait_last_error());
  }
  PLAIT_INFO("init", "rank %d of %d (local %d/%d, cross %d/%d) from %s, transport %s", s->topo.rank,
             s->topo.size, s->topo.local_rank, s->topo.local_size, s->topo.cross_rank,
             s->topo.cross_size, s->topo.source, transport_name);
  return PLAIT_SUCCESS;
fail_psets:
  plait_psets_stop();
fail_plugin:
  plait_plugin_unload(&s->plugin);
fail_ctrl:
  plait_control_close(&s->ctrl);
fail_cfg:
  plait_config_free(&s->cfg);
  return rc;
}

PLAIT_API plait_result_t plait_init(void) {
  pthread_mutex_lock(&life_lock);
  plait_result_t rc;
  if (atomic_load(&g_initialized)) {
    rc = plait_error(PLAIT_ERR_ALREADY_INITIALIZED,
                     "plait_init: plait is already initialized (call plait_shutdown first)");
  } else {
    rc = init_locked();
    if (rc == PLAIT_SUCCESS) atomic_store(&g_initialized, 1);
  }
  pthread_mutex_unlock(&life_lock);
  return rc;
}

PLAIT_API plait_result_t plait_shutdown(void) {
  pthread_mutex_lock(&life_lock);
  if (!atomic_load(&g_initialized)) {
    pthread_mutex_unlock(&life_lock);
    return plait_error(PLAIT_ERR_NOT_INITIALIZED, "plait_shutdown: plait is not initialized");
  }
  atomic_store(&g_initialized, 0);
  session_t *s = &S;
  plait_coord_stop(); /* pending operations fail with PLAIT_ERR_SHUTDOWN */
  plait_psets_stop();  /* the sets' sub-states, before the transport goes */
  plait_tl_stop();
  /* Leave together, so no rank reads a closed connection as a lost peer. */
  plait_result_t rc = plait_boot_barrier(&s->boot);
  char why[2048] = "";
  if (rc) {
    snprintf(why, sizeof why, "%s", plait_last_error());
    PLAIT_WARN("shutdown", "leaving without the other ranks: %s", why);
  }
  plait_plugin_unload(&s->plugin);
  plait_control_close(&s->ctrl);
  plait_config_free(&s->cfg);
  pthread_mutex_unlock(&life_lock);
  if (rc) return plait_error(rc, "plait_shutdown: %s", why);
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_is_initialized(int *initialized) {
  REQUIRE_OUT(initialized);
  *initialized = atomic_load(&g_initialized);
  return PLAIT_SUCCESS;
}

#define QUERY(fn, field)                                                       \
  PLAIT_API plait_result_t fn(int *field) {                                    \
    REQUIRE_OUT(field);                                                        \
    REQUIRE_INIT();                                                            \
    *field = S.topo.field;                                                     \
    return PLAIT_SUCCESS;                                                      \
  }
QUERY(plait_rank, rank)
QUERY(plait_size, size)
QUERY(plait_local_rank, local_rank)
QUERY(plait_local_size, local_size)
QUERY(plait_cross_rank, cross_rank)
QUERY(plait_cross_size, cross_size)
#undef QUERY

PLAIT_API plait_result_t plait_transport_name(const char **name) {
  REQUIRE_OUT(name);
  REQUIRE_INIT();
  *name = transport_name;
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_transport_algorithm(const char *collective, uint64_t bytes,
                                                   const char **name) {
  REQUIRE_OUT(name);
  static const struct {
    const char *name;
    uint64_t cap;
  } colls[] = {{"allreduce", PLAIT_CAP_ALLREDUCE},         {"allgather", PLAIT_CAP_ALLGATHERV},
               {"broadcast", PLAIT_CAP_BROADCAST},         {"alltoall", PLAIT_CAP_ALLTOALLV},
               {"reducescatter", PLAIT_CAP_REDUCESCATTER}, {"barrier", PLAIT_CAP_BARRIER}};
  uint64_t cap = 0;
  for (size_t i = 0; collective && i < sizeof colls / sizeof colls[0]; i++)
    if (!strcmp(collective, colls[i].name)) cap = colls[i].cap;
  if (!cap)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_transport_algorithm: collective '%s' "
                       "is not allreduce, allgather, broadcast, alltoall, reducescatter or "
                       "barrier", collective ? collective : "(NULL)");
  REQUIRE_INIT();
  const plait_transport_t *t = S.plugin.table;
  const char *a = PLAIT_TRANSPORT_HAS(t, algorithm) ? t->algorithm(S.plugin.state, cap, bytes) : NULL;
  *name = a ? a : "";
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_config_dump(char *buf, size_t buf_size, size_t *needed) {
  if (!buf && buf_size)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT,
                       "plait_config_dump: buf is NULL but buf_size is %zu", buf_size);
  pthread_mutex_lock(&life_lock);
  plait_result_t rc;
  if (atomic_load(&g_initialized)) {
    rc = plait_config_format(&S.cfg, buf, buf_size, needed);
  } else {
    plait_config_t cfg;
    rc = plait_config_load(&cfg);
    if (rc == PLAIT_SUCCESS) {
      rc = plait_config_format(&cfg, buf, buf_size, needed);
      plait_config_free(&cfg);
    }
  }
  pthread_mutex_unlock(&life_lock);
  return rc;
}

PLAIT_API plait_result_t plait_config_set(const char *name, const char *value) {
  if (!name || !value)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_config_set: %s is NULL",
                       name ? "value" : "name");
  static const char *tunable[] = {"PLAIT_FUSION_THRESHOLD", "PLAIT_FUSION_MAX_TENSOR",
                                  "PLAIT_CYCLE_TIME_MS", "PLAIT_LOG_LEVEL",
                                  "PLAIT_TIMELINE_MARK_CYCLES"};
  int ok = 0;
  for (size_t i = 0; i < sizeof tunable / sizeof tunable[0]; i++) ok |= !strcmp(name, tunable[i]);
  if (!ok && plait_config_known(name))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "plait_config_set: %s cannot change while plait "
                       "runs (only PLAIT_FUSION_THRESHOLD, PLAIT_FUSION_MAX_TENSOR, "
                       "PLAIT_CYCLE_TIME_MS, PLAIT_LOG_LEVEL and PLAIT_TIMELINE_MARK_CYCLES "
                       "can); set it in the environment before plait_init", name);
  if (!ok)
    return plait_error(PLAIT_ERR_CONFIG, "plait_config_set: %s is not a plait variable (see "
                       "plaitrun --help-env)", name);
  pthread_mutex_lock(&life_lock);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!atomic_load(&g_initialized)) {
    rc = plait_error(PLAIT_ERR_NOT_INITIALIZED, "plait_config_set: plait is not initialized; "
                     "before plait_init, set %s in the environment", name);
  } else {
    plait_config_t next = S.cfg; /* numeric fields only change; strings stay shared */
    rc = plait_config_parse_var(&next, name, value);
    if (rc == PLAIT_SUCCESS) {
      S.cfg = next;
      plait_coord_tune(S.cfg.fusion_threshold, S.cfg.fusion_max_tensor, S.cfg.cycle_time_ms);
      plait_log_set_level(S.cfg.log_level);
      plait_tl_set_mark_cycles(S.cfg.timeline_mark_cycles);
    }
  }
  pthread_mutex_unlock(&life_lock);
  return rc;
}

const plait_transport_t *plait_core_transport(void **state) {
  if (!atomic_load(&g_initialized)) return NULL;
  if (state) *state = S.plugin.state;
  return S.plugin.table;
}

const plait_bootstrap_t *plait_core_bootstrap(void) {
  return atomic_load(&g_initialized) ? &S.boot.api : NULL;
}

int plait_core_rank(void) { return atomic_load(&g_initialized) ? S.topo.rank : -1; }
