/* In-process multi-rank harness (engines.h). */
#include "engines.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/current.h"
#include "engine/engine.h"
#include "util/config.h"
#include "util/error.h"
#include "util/log.h"

typedef struct {
  plait_test_engines_t *job;
  int rank, port;
  const char *secret;
  plait_test_rank_fn fn;
  void *arg;
} rank_thread_t;

/* Defaults, then the job's settings: explicit, not the environment's. */
static plait_result_t make_config(const rank_thread_t *t, plait_config_t *cfg) {
  PLAIT_CHECK(plait_config_load(cfg));
  free(cfg->transport), free(cfg->secret), free(cfg->plugin_path), free(cfg->timeline);
  cfg->transport = strdup(t->job->transport ? t->job->transport : "gloo");
  cfg->secret = strdup(t->secret);
  cfg->plugin_path = strdup(PLAIT_TEST_LIB_DIR ":" PLAIT_TEST_PLUGIN_DIR);
  cfg->timeline = NULL;
  cfg->timeout_s = 15;
  plait_result_t rc = cfg->transport && cfg->secret && cfg->plugin_path
                          ? PLAIT_SUCCESS : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  for (const char *const *s = t->job->settings; rc == PLAIT_SUCCESS && s && *s; s++) {
    char name[128];
    const char *eq = strchr(*s, '=');
    size_t len = eq ? (size_t)(eq - *s) : 0;
    if (!eq || len >= sizeof name) {
      rc = plait_error(PLAIT_ERR_INVALID_ARGUMENT, "setting '%s' is not NAME=value", *s);
      break;
    }
    memcpy(name, *s, len);
    name[len] = '\0';
    if (!strcmp(name, "PLAIT_AUTOTUNE_LOG")) { /* the one text setting tests give */
      free(cfg->autotune_log);
      if (!(cfg->autotune_log = strdup(eq + 1)))
        rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
      continue;
    }
    rc = plait_config_parse_var(cfg, name, eq + 1);
  }
  if (rc) plait_config_free(cfg);
  return rc;
}

static void make_topology(const rank_thread_t *t, plait_topology_t *topo) {
  memset(topo, 0, sizeof *topo);
  topo->rank = t->rank;
  topo->size = t->job->nranks;
  topo->local_rank = topo->local_size = -1; /* derived at rendezvous: one host */
  topo->source = "in-process test";
  topo->rank_var = topo->size_var = "(explicit)";
  snprintf(topo->host, sizeof topo->host, "in-process");
  snprintf(topo->rendezvous_host, sizeof topo->rendezvous_host, "127.0.0.1");
  topo->rendezvous_port = t->port;
}

static void *rank_main(void *arg) {
  rank_thread_t *t = arg;
  plait_log_set_thread_rank(t->rank);
  plait_config_t cfg;
  plait_topology_t topo;
  make_topology(t, &topo);
  plait_engine_t *e = NULL;
  plait_result_t rc = make_config(t, &cfg);
  if (rc == PLAIT_SUCCESS) rc = plait_engine_start(&cfg, &topo, 1, &e);
  if (rc) {
    plait_test_say(t->rank, "engine start: %s: %s", plait_result_name(rc), plait_last_error());
    t->job->rc[t->rank] = -1;
    return NULL;
  }
  plait_engine_bind_thread(e);
  int fails = t->fn(t->rank, t->job->nranks, t->arg);
  if (plait_engine_running(e) && plait_shutdown() != PLAIT_SUCCESS && !fails) {
    plait_test_say(t->rank, "plait_shutdown: %s", plait_last_error());
    fails = 1;
  }
  plait_engine_bind_thread(NULL);
  plait_engine_unref(e);
  t->job->rc[t->rank] = fails;
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int plait_test_run_engines(plait_test_engines_t *job, plait_test_rank_fn fn, void *arg) {
  int n = job->nranks;
  if (n < 1 || n > PLAIT_TEST_MAX_RANKS) return 1;
  char secret[65];
  plait_test_make_secret(secret);
  /* The plugin (and the transport library under it) is loaded, and its static
   * initialisers run, once before the ranks' threads start: the loader's own
   * lock orders a concurrent first load, but ThreadSanitizer cannot see it in
   * uninstrumented libraries (libgloo) and would report their statics. */
  char lib[1024];
  snprintf(lib, sizeof lib, "%s/libplait-transport-%s.so", PLAIT_TEST_LIB_DIR,
           job->transport ? job->transport : "gloo");
  void *preload = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  int port = plait_test_free_port();
  rank_thread_t t[PLAIT_TEST_MAX_RANKS];
  pthread_t th[PLAIT_TEST_MAX_RANKS];
  double t0 = now_s();
  for (int r = 0; r < n; r++) {
    t[r] = (rank_thread_t){job, r, port, secret, fn, arg};
    job->rc[r] = -1;
    if (pthread_create(&th[r], NULL, rank_main, &t[r])) {
      plait_test_say(r, "cannot start its thread");
      n = r;
      break;
    }
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  if (preload) dlclose(preload);
  job->elapsed_s = now_s() - t0;
  int failed = n != job->nranks;
  for (int r = 0; r < job->nranks; r++) failed |= job->rc[r] != 0;
  return failed;
}
