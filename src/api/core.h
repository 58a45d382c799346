/* Internal: what tests and the transport benchmark may ask of the running
 * engine (the core itself reaches it through api/current.h). Not exported
 * from libplait.so. */
#ifndef PLAIT_CORE_H
#define PLAIT_CORE_H

#include "plait/transport.h"

/* The loaded transport and its state; NULL (and *state untouched) when plait
 * is not initialized. */
const plait_transport_t *plait_core_transport(void **state);

/* The session's bootstrap (the byte collectives plugins get); NULL when plait
 * is not initialized. */
const plait_bootstrap_t *plait_core_bootstrap(void);

/* For tests of the control plane only: the next plait_init does not start
 * the coordinator, so the bootstrap stays usable from the calling thread
 * (operations then fail with PLAIT_ERR_NOT_INITIALIZED). */
void plait_core_test_without_coordinator(int on);

/* This process's rank, or -1 when plait is not initialized. */
int plait_core_rank(void);

#endif
