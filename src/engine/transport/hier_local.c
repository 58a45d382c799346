/* The hierarchical collectives' local set over libfabric's shm provider:
 * a second ofi instance over this host's ranks, started through the job's
 * bootstrap cut to them (hier_local.h). */
#include "engine/transport/hier_local.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/transport/transport_choice.h"
#include "util/error.h"
#include "util/log.h"
#include "util/reduce.h"

plait_result_t plait_hier_local_parse(const char *text, plait_hier_local_t *out) {
  if (!text || !*text || !strcasecmp(text, "auto")) {
    *out = PLAIT_HIER_LOCAL_AUTO;
    return PLAIT_SUCCESS;
  }
  if (!strcasecmp(text, "job")) {
    *out = PLAIT_HIER_LOCAL_JOB;
    return PLAIT_SUCCESS;
  }
  return plait_error(PLAIT_ERR_CONFIG, "PLAIT_HIERARCHICAL_LOCAL_TRANSPORT='%s' is not valid: "
                     "use auto (shared memory through the ofi plugin's shm provider where "
                     "every rank can open it) or job (the job's transport)", text);
}

const char *plait_hier_local_name(plait_hier_local_t v) {
  return v == PLAIT_HIER_LOCAL_JOB ? "job" : "auto";
}

/* Every call of the cut bootstrap is two job-wide allgathers: a head (what
 * each rank is doing), then, only when every rank does the same call, the
 * payload. A rank that is done (started, or failed) says so in its head;
 * the others' calls then fail, and they come to be done too. */
enum { CALL_ALLGATHER = 1, CALL_BROADCAST, CALL_BARRIER, DONE_OK, DONE_FAIL };
typedef struct {
  uint32_t kind;
  int32_t root;
  uint64_t bytes;
} head_t;

struct plait_hier_shm {
  plait_plugin_t plugin;
  plait_bootstrap_t api; /* what the instance's init got (valid until finalize) */
  const plait_bootstrap_t *job;
  const int *members; /* during open only */
  int n, broken, closed;
  plait_result_t job_rc; /* the job's bootstrap failed */
};

/* Every rank's head; 1 when all are `mine`, 0 when not, -1 when the job's
 * bootstrap failed (s->job_rc). done: how many said they are done, ok: of
 * them DONE_OK. */
static int heads(plait_hier_shm_t *s, head_t mine, int *done, int *ok) {
  int size = s->job->nranks, same = 1;
  head_t *all = malloc(sizeof *all * (size_t)size);
  if (!all) {
    s->job_rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory (the local set's bootstrap)");
    return -1;
  }
  plait_result_t rc = s->job->allgather(s->job->ctx, &mine, sizeof mine, all);
  if (rc) {
    free(all);
    s->job_rc = rc;
    return -1;
  }
  *done = *ok = 0;
  for (int r = 0; r < size; r++) {
    same &= all[r].kind == mine.kind && all[r].root == mine.root && all[r].bytes == mine.bytes;
    *done += all[r].kind == DONE_OK || all[r].kind == DONE_FAIL;
    *ok += all[r].kind == DONE_OK;
  }
  free(all);
  return same;
}

/* One call of the cut bootstrap: the payload of every member (allgather),
 * or of member root (broadcast), into recv. */
static plait_result_t call(plait_hier_shm_t *s, uint32_t kind, int root, const void *send,
                           size_t bytes, void *recv) {
  if (s->closed)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "the local set's bootstrap is used only "
                       "while the instance starts");
  if (s->broken) return plait_error(PLAIT_ERR_TRANSPORT, "another rank's local set failed to start");
  int done, ok;
  int same = heads(s, (head_t){kind, root, bytes}, &done, &ok);
  if (same < 0) return s->job_rc;
  if (!same) {
    s->broken = 1;
    return plait_error(PLAIT_ERR_TRANSPORT, "another rank's local set failed to start");
  }
  if (kind == CALL_BARRIER) return PLAIT_SUCCESS;
  size_t size = (size_t)s->job->nranks;
  char *all = malloc(size * (bytes ? bytes : 1));
  if (!all) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory (the local set's bootstrap)");
  plait_result_t rc = s->job->allgather(s->job->ctx, send, bytes, all);
  if (rc) {
    s->job_rc = rc;
    s->broken = 1;
  } else if (kind == CALL_BROADCAST) {
    memcpy(recv, all + (size_t)s->members[root] * bytes, bytes);
  } else {
    for (int i = 0; i < s->n; i++)
      memcpy((char *)recv + (size_t)i * bytes, all + (size_t)s->members[i] * bytes, bytes);
  }
  free(all);
  return rc;
}

static plait_result_t sub_allgather(void *ctx, const void *send, size_t bytes, void *recv) {
  return call(ctx, CALL_ALLGATHER, 0, send, bytes, recv);
}
static plait_result_t sub_broadcast(void *ctx, void *buf, size_t bytes, int root) {
  plait_hier_shm_t *s = ctx;
  if (root < 0 || root >= s->n)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "broadcast root %d of %d ranks", root, s->n);
  return call(s, CALL_BROADCAST, root, buf, bytes, buf);
}
static plait_result_t sub_barrier(void *ctx) { return call(ctx, CALL_BARRIER, 0, NULL, 0, NULL); }

/* Says this rank is done (started: ok) until every rank is: 1 when every
 * rank started, 0 when any did not, -1 when the job's bootstrap failed. */
static int finish(plait_hier_shm_t *s, int ok) {
  for (;;) {
    int done, oks;
    int same = heads(s, (head_t){ok ? DONE_OK : DONE_FAIL, 0, 0}, &done, &oks);
    if (same < 0) return -1;
    if (done == s->job->nranks) return oks == done;
  }
}

/* Whether plugin p, loaded, would run this host's ranks over shared memory:
 * its probe over them says "shm" (libfabric's shm provider). 0 with why. */
static int probes_shm(plait_plugin_t *p, const plait_transport_init_args_t *args, char *why,
                      size_t cap) {
  char detail[256] = "";
  if (!PLAIT_TRANSPORT_HAS(p->table, probe)) {
    snprintf(why, cap, "transport '%s' has no probe", p->table->name);
    return 0;
  }
  if (p->table->probe(args, detail, sizeof detail)) {
    snprintf(why, cap, "transport '%s' cannot start over this host's ranks: %s", p->table->name,
             detail);
    return 0;
  }
  if (strncmp(detail, "shm", 3) || (detail[3] && detail[3] != ';')) {
    snprintf(why, cap, "transport '%s' over this host's ranks would use %s, not shm "
             "(FI_PROVIDER leaves shm out?)", p->table->name, detail);
    return 0;
  }
  return 1;
}

/* Loads into s->plugin the first plugin, in PLAIT_TRANSPORT=auto's order (the
 * plugins' own auto_place traits: the core names none), whose probe over this
 * host's ranks picks shared memory. Returns a nonzero code of its name (what
 * every rank must agree on), or 0 with why when none does. */
static unsigned can_open(plait_hier_shm_t *s, const plait_hier_local_args_t *a,
                         const plait_transport_init_args_t *args, char *why, size_t cap) {
  plait_choice_offer_t offers[16];
  int n = plait_choice_offers(a->plugin_path, offers, 16);
  snprintf(why, cap, "no transport plugin offers itself to PLAIT_TRANSPORT=auto");
  for (int i = 0; i < n; i++) {
    if (plait_plugin_load(&s->plugin, offers[i].name, a->plugin_path)) {
      snprintf(why, cap, "transport '%s' cannot be loaded: %s", offers[i].name,
               plait_last_error());
      continue;
    }
    if (probes_shm(&s->plugin, args, why, cap)) {
      unsigned code = 2166136261u; /* FNV-1a of the name */
      for (const char *c = offers[i].name; *c; c++) code = (code ^ (unsigned char)*c) * 16777619u;
      return code | 1u;
    }
    plait_plugin_unload(&s->plugin);
  }
  return 0;
}

plait_result_t plait_hier_shm_open(const plait_hier_local_args_t *a, plait_hier_shm_t **out,
                                   char *why, size_t cap) {
  *out = NULL;
  plait_hier_shm_t *s = calloc(1, sizeof *s);
  if (!s) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory (the local set)");
  s->job = a->boot;
  s->members = a->members;
  s->n = a->n;
  s->api = (plait_bootstrap_t){sizeof s->api, s, a->index, a->n, sub_allgather, sub_broadcast,
                               sub_barrier};
  plait_transport_init_args_t args;
  memset(&args, 0, sizeof args);
  args.size = sizeof args;
  args.rank = args.local_rank = a->index;
  args.nranks = args.local_size = a->n;
  args.cross_rank = 0;
  args.cross_size = 1;
  args.bootstrap = &s->api;
  args.log = plait_log_write;
  args.log_level = plait_log_level();
  args.timeout_s = a->timeout_s;
  args.reduce = plait_reduce;
  args.scale = plait_scale;
  args.divide = plait_divide;
  args.reduce_scale = plait_reduce_scale;
  args.host_address = "";
  unsigned mine = can_open(s, a, &args, why, cap);
  /* every rank's probe first: all start the same plugin, or none */
  unsigned *all = malloc(sizeof *all * (size_t)a->boot->nranks);
  plait_result_t rc = all ? a->boot->allgather(a->boot->ctx, &mine, sizeof mine, all)
                          : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory (the local set)");
  int every = rc == PLAIT_SUCCESS;
  for (int r = 0; every && r < a->boot->nranks; r++)
    if (all[r] != mine) {
      every = 0;
      if (mine)
        snprintf(why, cap, all[r] ? "rank %d would open shm through another plugin"
                                  : "rank %d cannot open shm (its info line says why)", r);
    }
  free(all);
  every = every && mine; /* all agreeing that none can open shm: none starts it */
  if (every) {
    int started = plait_plugin_start(&s->plugin, &args) == PLAIT_SUCCESS;
    if (!started) snprintf(why, cap, "transport '%s' over shm failed to start: %s",
                           s->plugin.table->name, plait_last_error());
    int agreed = finish(s, started);
    if (agreed < 0) rc = s->job_rc;
    every = agreed == 1;
    if (!every && started) snprintf(why, cap, "another rank's %s over shm failed to start",
                                    s->plugin.table->name);
  }
  s->closed = 1;
  s->members = NULL;
  if (rc || !every) {
    plait_hier_shm_close(s);
    return rc;
  }
  *out = s;
  return PLAIT_SUCCESS;
}

const plait_transport_t *plait_hier_shm_table(const plait_hier_shm_t *s) {
  return s->plugin.table;
}
void *plait_hier_shm_state(const plait_hier_shm_t *s) { return s->plugin.state; }

void plait_hier_shm_close(plait_hier_shm_t *s) {
  if (!s) return;
  plait_plugin_unload(&s->plugin);
  free(s);
}
