/* Internal: what the rest of the core (and the tests) may ask of the running
 * session. Not exported from libplait.so. */
#ifndef PLAIT_CORE_H
#define PLAIT_CORE_H

#include "plait/transport.h"

/* The loaded transport and its state; NULL (and *state untouched) when plait
 * is not initialized. */
const plait_transport_t *plait_core_transport(void **state);

/* The session's bootstrap (the byte collectives plugins get); NULL when plait
 * is not initialized. */
const plait_bootstrap_t *plait_core_bootstrap(void);

#endif
