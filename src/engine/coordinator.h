/*
 * Internal: the coordinator thread of this process (DESIGN section 1).
 *
 * After plait_init has joined the job and started the transport, the
 * coordinator owns the control plane and the transport: it drains
 * submissions, negotiates readiness with rank 0, and executes the responses
 * rank 0 decides, in the same order on every rank.
 */
#ifndef PLAIT_COORDINATOR_H
#define PLAIT_COORDINATOR_H

#include "engine/submit/entry.h"

typedef struct plait_engine plait_engine_t;
typedef struct plait_coord plait_coord_t;

/* Starts e's coordinator thread over e's control plane and transport (e->cfg,
 * ctrl, plugin, topo, tunables, stats and timeline are ready). */
plait_result_t plait_coord_start(plait_engine_t *e, plait_coord_t **out);

/* Leaves the job's coordination: tells rank 0, waits until rank 0 ends
 * coordination for everyone, fails what is still pending with
 * PLAIT_ERR_SHUTDOWN, joins the thread; later submissions are refused.
 * Harmless when NULL or already stopped. */
void plait_coord_stop(plait_coord_t *c);
/* Stops c if needed and frees it (no submission may be in progress). NULL: nothing. */
void plait_coord_free(plait_coord_t *c);

/* Hands entries to the coordinator (all or none). Fails after a failure of
 * the job or shutdown, or on a duplicate name. Any thread. */
plait_result_t plait_coord_submit(plait_coord_t *c, plait_entry_t **entries, int n);

#endif
