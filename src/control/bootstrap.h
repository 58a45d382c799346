/* Internal: byte collectives over the control plane, handed to plugins as a
 * plait_bootstrap_t. Every contribution goes to rank 0, which checks that all
 * ranks called the same collective with the same sizes and answers each. */
#ifndef PLAIT_BOOTSTRAP_H
#define PLAIT_BOOTSTRAP_H

#include "control/control.h"
#include "plait/transport.h"

typedef struct plait_boot {
  plait_control_t *ctrl;
  uint32_t seq; /* collectives done so far; all ranks agree */
  plait_result_t failed; /* the first collective that failed here, and why */
  char fail_msg[1024];
  plait_bootstrap_t api;
} plait_boot_t;

/* Fills b->api so it can be handed to a plugin. */
void plait_boot_init(plait_boot_t *b, plait_control_t *ctrl);

plait_result_t plait_boot_allgather(void *ctx, const void *send, size_t bytes, void *recv);
plait_result_t plait_boot_broadcast(void *ctx, void *buf, size_t bytes, int root);
plait_result_t plait_boot_barrier(void *ctx);

/* Tells every rank that this one failed with rc and plait_last_error()'s
 * message, instead of taking part in the collective the others are in (or
 * will call next): rank 0 fails that collective on every rank with "rank R
 * failed: <message>"; rank 0 itself aborts the job with it. Waits (within
 * the control plane's timeout) until rank 0 has answered, so the message
 * arrives before this rank closes its connection. Returns rc with the
 * message restored; but when a bootstrap collective failed here first (the
 * cause was elsewhere: another rank's failure, a lost rank), sends nothing
 * and returns that collective's code and message, with this rank's after it. */
plait_result_t plait_boot_fail(plait_boot_t *b, plait_result_t rc);

#endif
