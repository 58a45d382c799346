/* The life-cycle and query part of the public ABI: init, shutdown, rank,
 * size, ..., config dump and set. One engine at a time per process
 * (api/current.h); init and shutdown are serialised by one lock. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/core.h"
#include "api/current.h"
#include "api/process_set_api.h"
#include "control/elastic_client.h"
#include "engine/engine.h"
#include "util/config.h"
#include "util/config_horovod.h"
#include "util/error.h"
#include "util/log.h"

static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
static int without_coordinator;
/* plait.h promises the transport's name stays valid until the next
 * plait_init, after shutdown too, when the engine's memory is gone. */
static char transport_name[80];

void plait_core_test_without_coordinator(int on) { without_coordinator = on; }

/* The configuration and topology from the environment, then the engine. */
static plait_result_t init_locked(void) {
  plait_config_t cfg;
  PLAIT_CHECK(plait_config_load(&cfg));
  plait_log_set_level(cfg.log_level);
  plait_topology_t topo;
  memset(&topo, 0, sizeof topo);
  /* an elastic worker asks its driver (control/elastic_client.h) */
  plait_result_t rc = cfg.elastic_driver && *cfg.elastic_driver ? plait_el_join(&cfg, &topo)
                                                                : plait_topology_from_env(&cfg, &topo);
  if (rc) {
    plait_config_free(&cfg);
    return rc;
  }
  plait_log_set_rank(topo.rank);
  plait_config_horovod_settle(&cfg, topo.rank); /* logs the HOROVOD_* variables taken */
  char unknown[512];
  if (plait_config_unknown(unknown, sizeof unknown))
    PLAIT_WARN("config", "unknown variable(s) ignored: %s (see plaitrun --help-env)", unknown);
  plait_engine_t *e;
  PLAIT_CHECK(plait_engine_start(&cfg, &topo, !without_coordinator, &e));
  if (!without_coordinator &&
      (rc = plait_process_sets_from_config(e, e->cfg.process_sets, e->cfg.start_timeout_s))) {
    char why[2048];
    snprintf(why, sizeof why, "%s", plait_last_error());
    plait_engine_stop(e);
    plait_engine_unref(e);
    return plait_error(rc, "%s", why);
  }
  PLAIT_INFO("init", "rank %d of %d (local %d/%d, cross %d/%d) from %s, transport %s", e->topo.rank,
             e->topo.size, e->topo.local_rank, e->topo.local_size, e->topo.cross_rank,
             e->topo.cross_size, e->topo.source, e->transport_name);
  snprintf(transport_name, sizeof transport_name, "%s", e->transport_name);
  plait_api_publish(e);
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_init(void) {
  pthread_mutex_lock(&life_lock);
  plait_result_t rc;
  PLAIT_API_ENGINE(e);
  if (plait_engine_forked(e))
    rc = plait_error(PLAIT_ERR_UNSUPPORTED, "plait_init: this process (pid %d) is a fork of "
                     "process %d, which initialized plait; a forked child cannot join the job",
                     (int)getpid(), (int)e->pid);
  else if (e)
    rc = plait_error(PLAIT_ERR_ALREADY_INITIALIZED,
                     "plait_init: plait is already initialized (call plait_shutdown first)");
  else
    rc = init_locked();
  pthread_mutex_unlock(&life_lock);
  return rc;
}

PLAIT_API plait_result_t plait_shutdown(void) {
  plait_engine_t *bound = plait_engine_bound();
  if (bound && !plait_api_is_process_engine(bound)) {
    /* a thread's own engine (in-process tests): whoever bound it frees it */
    PLAIT_CHECK(plait_api_check("plait_shutdown", bound));
    plait_result_t rc = plait_engine_stop(bound);
    return rc ? plait_error_context(rc, "plait_shutdown") : PLAIT_SUCCESS;
  }
  pthread_mutex_lock(&life_lock);
  PLAIT_API_ENGINE(e);
  plait_result_t rc = plait_api_check("plait_shutdown", e);
  if (rc) { /* a forked child never touches its parent's connections */
    pthread_mutex_unlock(&life_lock);
    return rc;
  }
  plait_api_unpublish(); /* new calls now find no engine */
  rc = plait_engine_stop(e);
  plait_engine_unref(e); /* the process's reference; calls in flight hold theirs */
  pthread_mutex_unlock(&life_lock);
  if (rc) return plait_error_context(rc, "plait_shutdown");
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_is_initialized(int *initialized) {
  REQUIRE_OUT(initialized);
  PLAIT_API_ENGINE(e);
  *initialized = plait_engine_running(e);
  return PLAIT_SUCCESS;
}

#define QUERY(fn, field)                                                       \
  PLAIT_API plait_result_t fn(int *field) {                                    \
    REQUIRE_OUT(field);                                                        \
    PLAIT_API_ENGINE(e);                                                       \
    PLAIT_CHECK(plait_api_check(#fn, e));                                      \
    *field = e->topo.field;                                                    \
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
  PLAIT_API_ENGINE(e);
  PLAIT_CHECK(plait_api_check(__func__, e));
  /* a thread's own engine (in-process tests) outlives its callers */
  *name = e == plait_engine_bound() ? e->transport_name : transport_name;
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
  PLAIT_API_ENGINE(e);
  PLAIT_CHECK(plait_api_check(__func__, e));
  const plait_transport_t *t = e->plugin.table;
  const char *a =
      PLAIT_TRANSPORT_HAS(t, algorithm) ? t->algorithm(e->plugin.state, cap, bytes) : NULL;
  *name = a ? a : "";
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_config_dump(char *buf, size_t buf_size, size_t *needed) {
  if (!buf && buf_size)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT,
                       "plait_config_dump: buf is NULL but buf_size is %zu", buf_size);
  PLAIT_API_ENGINE(e);
  if (plait_engine_running(e)) return plait_engine_config_format(e, buf, buf_size, needed);
  plait_config_t cfg;
  PLAIT_CHECK(plait_config_load(&cfg));
  plait_result_t rc = plait_config_format(&cfg, buf, buf_size, needed);
  plait_config_free(&cfg);
  return rc;
}

PLAIT_API plait_result_t plait_config_set(const char *name, const char *value) {
  if (!name || !value)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_config_set: %s is NULL",
                       name ? "value" : "name");
  if (!plait_tunables_settable(name) && plait_config_known(name))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "plait_config_set: %s cannot change while plait "
                       "runs (only %s can); set it in the environment before plait_init", name,
                       plait_tunables_list());
  if (!plait_tunables_settable(name))
    return plait_error(PLAIT_ERR_CONFIG, "plait_config_set: %s is not a plait variable (see "
                       "plaitrun --help-env)", name);
  PLAIT_API_ENGINE(e);
  if (!plait_engine_running(e))
    return plait_error(PLAIT_ERR_NOT_INITIALIZED, "plait_config_set: plait is not initialized; "
                       "before plait_init, set %s in the environment", name);
  return plait_engine_config_set(e, name, value);
}

const plait_transport_t *plait_core_transport(void **state) {
  PLAIT_API_ENGINE(e);
  if (!plait_engine_running(e)) return NULL;
  if (state) *state = e->plugin.state;
  return e->plugin.table; /* valid until shutdown */
}

const plait_bootstrap_t *plait_core_bootstrap(void) {
  PLAIT_API_ENGINE(e);
  return plait_engine_running(e) ? &e->boot.api : NULL;
}

int plait_core_rank(void) {
  PLAIT_API_ENGINE(e);
  return plait_engine_running(e) ? e->topo.rank : -1;
}
