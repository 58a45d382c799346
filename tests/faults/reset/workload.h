/*
 * One cycle's work for every rank of a reset test's job (tests/faults/reset):
 * plait_init, collectives of each kind with their results checked, then a
 * clean plait_shutdown, or a failure: one rank (the victim) SIGKILLs itself
 * in the middle of an allreduce and every other rank must see
 * PLAIT_ERR_PEER_LOST naming it, then shuts down. The job's layout comes
 * from the environment (PLAIT_RANK, PLAIT_SIZE, PLAIT_RENDEZVOUS, ...).
 */
#ifndef PLAIT_TEST_RESET_WORKLOAD_H
#define PLAIT_TEST_RESET_WORKLOAD_H

#include <stddef.h>

typedef struct cycle_plan {
  int victim;    /* the rank killed, or -1: a clean cycle */
  int kill_at;   /* the victim dies after this many allreduces of the failure loop */
  int kill_us;   /* ... and this many microseconds into the next one */
  int root;      /* the broadcast's root */
  int in_lock;   /* the victim dies holding a spin lock of libfabric's (the
                  * kill_us-th it takes from then on): over shm the survivors
                  * spin on it and the ofi plugin's watchdog rescues them */
  int stop;      /* the victim SIGSTOPs itself instead of dying: the others
                  * see it lost after PLAIT_TIMEOUT_S, and the harness kills
                  * it only after the survivor's plait_shutdown (a peer that
                  * may be alive when the endpoint breaks: issue 38, item 1) */
} cycle_plan_t;

/* Failures of this process's workload_run that the ofi plugin's watchdog
 * rescued ("stuck inside libfabric": --kill-in-lock), counted. */
extern int workload_rescues;

/* Runs the cycle on this rank. 0 when all went as planned (for the victim:
 * never returns); else 1, with what went wrong in why. */
int workload_run(const cycle_plan_t *plan, char *why, size_t len);

#endif
