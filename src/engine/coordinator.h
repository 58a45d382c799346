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

#include "util/config.h"
#include "control/control.h"
#include "engine/entry.h"
#include "plait/transport.h"

typedef struct plait_coord_args {
  const plait_config_t *cfg;
  plait_control_t *ctrl;
  const plait_transport_t *transport;
  void *transport_state;
  int rank, size;
} plait_coord_args_t;

/* Starts the thread. */
plait_result_t plait_coord_start(const plait_coord_args_t *args);

/* Leaves the job's coordination: tells rank 0, waits until rank 0 ends
 * coordination for everyone, fails what is still pending with
 * PLAIT_ERR_SHUTDOWN, joins the thread. Harmless when not started. */
void plait_coord_stop(void);

/* Hands entries to the coordinator (all or none). Fails when plait is not
 * initialized, after a failure of the job, or on a duplicate name. */
plait_result_t plait_coord_submit(plait_entry_t **entries, int n);

/* New fusion threshold, largest fused tensor and cycle time, taken up by the coordinator thread
 * at the start of its next cycle (any thread may call it). */
void plait_coord_tune(uint64_t fusion_threshold, uint64_t fusion_max_tensor,
                      double cycle_time_ms);

/* Size of the running job, 0 when not running. */
int plait_coord_size(void);
/* Memory capability of the transport (PLAIT_CAP_* bits), 0 when not running. */
uint64_t plait_coord_caps(void);

#endif
