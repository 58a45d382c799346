/* Internal: where this process sits in the job, from the environment. */
#ifndef PLAIT_TOPOLOGY_H
#define PLAIT_TOPOLOGY_H

#include <stdint.h>

#include "control/elastic_wire.h"
#include "util/config.h"
#include "plait/plait.h"

#define PLAIT_HOST_MAX 256

typedef struct plait_topology {
  int rank, size;
  int local_rank, local_size; /* -1 until known (derived at rendezvous) */
  int cross_rank, cross_size; /* derived at rendezvous */
  const char *source;         /* "plaitrun", "Open MPI", "PMI", "Slurm", "torchrun", "single" */
  const char *rank_var, *size_var; /* the variables rank and size came from */
  char host[PLAIT_HOST_MAX];  /* this host's identity (PLAIT_HOSTNAME or hostname) */
  char rendezvous_host[PLAIT_HOST_MAX];
  int rendezvous_port; /* 0 when none was found */
  /* An elastic job's (control/elastic_client.h): its epoch (0: not elastic,
   * and the fields below are unused); on rank 0, the listening socket bound
   * before it asked the driver, which plait_control_start takes over. */
  uint64_t epoch;
  int listen_fd;
} plait_topology_t;

/* Reads rank, size, local rank/size and the rendezvous address from the
 * environment in the order: PLAIT_* (plaitrun), Open MPI, PMI, Slurm,
 * torchrun; none of them: one rank. PLAIT_ERR_CONFIG naming the variable on
 * a bad or inconsistent value. */
plait_result_t plait_topology_from_env(const plait_config_t *cfg, plait_topology_t *t);

/* The layout the elastic driver assigned (control/elastic_client.h): rank,
 * size, local and cross values and rank 0's address from a, the host
 * identity as plait_topology_from_env finds it; source "elastic driver,
 * epoch N". PLAIT_ERR_CONFIG on a rendezvous address that does not parse. */
plait_result_t plait_topology_from_elastic(const plait_config_t *cfg, const plait_el_assign_t *a,
                                           plait_topology_t *t);

/* Fills local and cross values from every rank's host identity and
 * environment-given local rank/size (-1 where not given), indexed by rank. */
plait_result_t plait_topology_derive(plait_topology_t *t, char (*hosts)[PLAIT_HOST_MAX],
                                     const int *local_ranks, const int *local_sizes);

/* First host name of a Slurm node list: "node[03-05,7],gpu1" -> "node03". */
int plait_slurm_first_host(const char *nodelist, char *out, size_t cap);

#endif
