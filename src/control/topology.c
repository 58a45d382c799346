/* Rank layout from the launchers' environment conventions. */
#include "control/topology.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/config_horovod.h"
#include "util/error.h"
#include "control/net.h"

#define DEFAULT_PORT 29500

typedef struct {
  const char *source;
  const char *rank, *size, *local_rank, *local_size;
} convention_t;

static const convention_t conventions[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

/* Reads a non-negative int from var: 1 found, 0 unset, error when bad. */
static plait_result_t env_int(const char *var, int *out, int *found) {
  *found = 0;
  const char *v = getenv(var);
  if (!v) return PLAIT_SUCCESS;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!isdigit((unsigned char)*v) || *end || errno || x < 0 || x > (1 << 24))
    return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not valid: expected an integer >= 0", var, v);
  *out = (int)x;
  *found = 1;
  return PLAIT_SUCCESS;
}

int plait_slurm_first_host(const char *list, char *out, size_t cap) {
  size_t i = 0, o = 0;
  while (list[i] && list[i] != ',' && list[i] != '[') {
    if (o + 1 >= cap) return -1;
    out[o++] = list[i++];
  }
  if (list[i] == '[') { /* prefix[NN-MM,...]: first number, keeping its zeros */
    i++;
    while (isdigit((unsigned char)list[i])) {
      if (o + 1 >= cap) return -1;
      out[o++] = list[i++];
    }
    if (list[i - 1] == '[' || (list[i] != '-' && list[i] != ',' && list[i] != ']')) return -1;
  }
  out[o] = '\0';
  return o ? 0 : -1;
}

/* Slurm's SLURM_STEP_TASKS_PER_NODE (srun's step: the tasks of this step,
 * set by srun even without --ntasks-per-node) or else SLURM_NTASKS_PER_NODE
 * (the job's request) is "4", "4(x2)" or "4(x2),3": it tells this node's count
 * only when every node has the same ("4" or "4(xN)"); otherwise the local size
 * is derived at rendezvous. */
static plait_result_t slurm_local_size(int *out, int *found) {
  const char *var = getenv("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE"
                                                         : "SLURM_NTASKS_PER_NODE";
  const char *v = getenv(var);
  *found = 0;
  if (!v || strchr(v, ',')) return PLAIT_SUCCESS;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!isdigit((unsigned char)*v) || errno || x < 1 || x > (1 << 24) ||
      (*end && !(end[0] == '(' && end[1] == 'x' && isdigit((unsigned char)end[2]))))
    return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not valid: expected N, "
                       "N(xM) or a comma-separated list of those", var, v);
  *out = (int)x;
  *found = 1;
  return PLAIT_SUCCESS;
}

static plait_result_t from_convention(const plait_config_t *cfg, plait_topology_t *t) {
  if (cfg->rank >= 0 || cfg->size >= 0) {
    const char *pre = plait_config_horovod_origin(cfg->rank >= 0 ? "PLAIT_RANK" : "PLAIT_SIZE")
                          ? "HOROVOD" : "PLAIT";
    if (cfg->rank < 0 || cfg->size < 0)
      return plait_error(PLAIT_ERR_CONFIG,
                         "%s_RANK and %s_SIZE must be set together (%s_%s is missing)", pre, pre,
                         pre, cfg->rank < 0 ? "RANK" : "SIZE");
    int hvd = plait_config_horovod_origin("PLAIT_RANK") != NULL; /* HOROVOD_RANK, horovodrun */
    t->source = hvd ? "horovodrun" : "plaitrun";
    t->rank_var = hvd ? "HOROVOD_RANK" : "PLAIT_RANK";
    t->size_var = plait_config_horovod_origin("PLAIT_SIZE") ? "HOROVOD_SIZE" : "PLAIT_SIZE";
    t->rank = cfg->rank;
    t->size = cfg->size;
    t->local_rank = cfg->local_rank;
    t->local_size = cfg->local_size;
    return PLAIT_SUCCESS;
  }
  for (size_t i = 0; i < sizeof conventions / sizeof conventions[0]; i++) {
    const convention_t *c = &conventions[i];
    int have_rank, have_size, found;
    PLAIT_CHECK(env_int(c->rank, &t->rank, &have_rank));
    PLAIT_CHECK(env_int(c->size, &t->size, &have_size));
    if (!have_rank && !have_size) continue;
    if (!have_rank || !have_size)
      return plait_error(PLAIT_ERR_CONFIG, "%s is set but %s is not (%s convention)",
                         have_rank ? c->rank : c->size, have_rank ? c->size : c->rank, c->source);
    t->source = c->source;
    t->rank_var = c->rank;
    t->size_var = c->size;
    PLAIT_CHECK(env_int(c->local_rank, &t->local_rank, &found));
    if (!found) t->local_rank = -1;
    if (!strcmp(c->source, "Slurm"))
      PLAIT_CHECK(slurm_local_size(&t->local_size, &found));
    else
      PLAIT_CHECK(env_int(c->local_size, &t->local_size, &found));
    if (!found) t->local_size = -1;
    return PLAIT_SUCCESS;
  }
  t->source = "single";
  t->rank_var = t->size_var = "(none)";
  t->rank = 0;
  t->size = 1;
  t->local_rank = 0;
  t->local_size = 1;
  return PLAIT_SUCCESS;
}

static plait_result_t find_rendezvous(const plait_config_t *cfg, plait_topology_t *t) {
  t->rendezvous_port = 0;
  if (cfg->rendezvous && *cfg->rendezvous)
    return plait_net_parse_hostport(cfg->rendezvous, "PLAIT_RENDEZVOUS", t->rendezvous_host,
                                    sizeof t->rendezvous_host, &t->rendezvous_port);
  const char *addr = getenv("MASTER_ADDR");
  const char *port = getenv("MASTER_PORT");
  int p = DEFAULT_PORT, found = 0;
  if (port) PLAIT_CHECK(env_int("MASTER_PORT", &p, &found));
  if (found && (p < 1 || p > 65535))
    return plait_error(PLAIT_ERR_CONFIG, "MASTER_PORT='%s' is not a port (1-65535)", port);
  if (addr && *addr) {
    size_t len = strlen(addr);
    if (addr[0] == '[' && len > 2 && addr[len - 1] == ']') /* "[::1]": an IPv6 address */
      addr++, len -= 2;
    if (len >= sizeof t->rendezvous_host)
      return plait_error(PLAIT_ERR_CONFIG, "MASTER_ADDR is too long");
    memcpy(t->rendezvous_host, addr, len);
    t->rendezvous_host[len] = '\0';
    /* Under torchrun the agent's own store already listens on MASTER_PORT. */
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    int shared = agent && (!strcmp(agent, "True") || !strcmp(agent, "true") || !strcmp(agent, "1"));
    if (shared && p == 65535)
      return plait_error(PLAIT_ERR_CONFIG, "MASTER_PORT=65535 is taken by torchrun's store and "
                         "leaves no port above it; set PLAIT_RENDEZVOUS=host:port");
    t->rendezvous_port = shared ? p + 1 : p;
    return PLAIT_SUCCESS;
  }
  /* srun's step: task 0 runs on the step's first node, which is not the
   * job's first one when the step uses part of the allocation (srun -w) */
  const char *var = getenv("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const char *nodes = getenv(var);
  if (nodes && *nodes) {
    if (plait_slurm_first_host(nodes, t->rendezvous_host, sizeof t->rendezvous_host))
      return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not a node list I can read; "
                         "set PLAIT_RENDEZVOUS=host:port", var, nodes);
    if (!found) { /* one port per job, so jobs sharing a node do not collide */
      const char *id = getenv("SLURM_JOB_ID");
      unsigned long long job = 0;
      if (id) {
        char *end;
        errno = 0;
        job = strtoull(id, &end, 10);
        if (!isdigit((unsigned char)*id) || *end || errno)
          return plait_error(PLAIT_ERR_CONFIG, "SLURM_JOB_ID='%s' is not valid: expected an "
                             "integer >= 0", id);
      }
      p = DEFAULT_PORT + (int)(job % 1000);
    }
    t->rendezvous_port = p;
  }
  return PLAIT_SUCCESS;
}

static void host_identity(const plait_config_t *cfg, plait_topology_t *t) {
  if (cfg->hostname && *cfg->hostname) {
    snprintf(t->host, sizeof t->host, "%s", cfg->hostname);
  } else if (gethostname(t->host, sizeof t->host - 1)) {
    snprintf(t->host, sizeof t->host, "localhost");
  }
  t->host[sizeof t->host - 1] = '\0';
}

plait_result_t plait_topology_from_env(const plait_config_t *cfg, plait_topology_t *t) {
  memset(t, 0, sizeof *t);
  t->local_rank = t->local_size = -1;
  PLAIT_CHECK(from_convention(cfg, t));
  if (t->size < 1)
    return plait_error(PLAIT_ERR_CONFIG, "%s=%d (%s): the job size must be at least 1",
                       t->size_var, t->size, t->source);
  if (t->rank >= t->size)
    return plait_error(PLAIT_ERR_CONFIG, "%s=%d is not below %s=%d (%s)", t->rank_var, t->rank,
                       t->size_var, t->size, t->source);
  if (t->local_size == 0 || (t->local_rank >= 0 && t->local_size > 0 &&
                             t->local_rank >= t->local_size))
    return plait_error(PLAIT_ERR_CONFIG, "local rank %d (from %s) is not below the local size %d",
                       t->local_rank, t->source, t->local_size);
  host_identity(cfg, t);
  PLAIT_CHECK(find_rendezvous(cfg, t));
  if (t->size > 1 && !t->rendezvous_port)
    return plait_error(PLAIT_ERR_CONFIG,
                       "%d ranks (from %s) but no rendezvous address: set PLAIT_RENDEZVOUS="
                       "host:port (where rank 0 listens), or MASTER_ADDR and MASTER_PORT",
                       t->size, t->source);
  if (t->size == 1) {
    t->local_rank = t->local_rank < 0 ? 0 : t->local_rank;
    t->local_size = t->local_size < 0 ? 1 : t->local_size;
    t->cross_rank = 0;
    t->cross_size = 1;
  }
  return PLAIT_SUCCESS;
}

plait_result_t plait_topology_derive(plait_topology_t *t, char (*hosts)[PLAIT_HOST_MAX],
                                     const int *local_ranks, const int *local_sizes) {
  int n = t->size;
  int *lr = malloc(sizeof(int) * (size_t)n);
  if (!lr) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory deriving the topology");
  /* local rank and size: from the launcher where given, else by host. */
  for (int r = 0; r < n; r++) {
    int idx = 0, count = 0;
    for (int q = 0; q < n; q++) {
      if (strcmp(hosts[q], hosts[r])) continue;
      if (q < r) idx++;
      count++;
    }
    lr[r] = local_ranks[r] >= 0 ? local_ranks[r] : idx;
    if (r == t->rank) {
      t->local_rank = lr[r];
      t->local_size = local_sizes[r] > 0 ? local_sizes[r] : count;
    }
  }
  /* cross rank: index among the ranks with the same local rank. */
  t->cross_rank = 0;
  t->cross_size = 0;
  for (int q = 0; q < n; q++) {
    if (lr[q] != t->local_rank) continue;
    if (q < t->rank) t->cross_rank++;
    t->cross_size++;
  }
  free(lr);
  return PLAIT_SUCCESS;
}

plait_result_t plait_topology_from_elastic(const plait_config_t *cfg, const plait_el_assign_t *a,
                                           plait_topology_t *t) {
  /* one engine per process, so one source text; it names the epoch */
  static char source[64];
  memset(t, 0, sizeof *t);
  snprintf(source, sizeof source, "elastic driver, epoch %llu", (unsigned long long)a->epoch);
  t->source = source;
  t->rank_var = t->size_var = "the elastic driver's assignment";
  t->rank = a->rank;
  t->size = a->size;
  t->local_rank = a->local_rank;
  t->local_size = a->local_size;
  t->cross_rank = a->cross_rank;
  t->cross_size = a->cross_size;
  t->epoch = a->epoch;
  t->listen_fd = -1;
  host_identity(cfg, t);
  return plait_net_parse_hostport(a->rendezvous, "the elastic driver's rendezvous address",
                                  t->rendezvous_host, sizeof t->rendezvous_host,
                                  &t->rendezvous_port);
}
