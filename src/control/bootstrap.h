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
  plait_bootstrap_t api;
} plait_boot_t;

/* Fills b->api so it can be handed to a plugin. */
void plait_boot_init(plait_boot_t *b, plait_control_t *ctrl);

plait_result_t plait_boot_allgather(void *ctx, const void *send, size_t bytes, void *recv);
plait_result_t plait_boot_broadcast(void *ctx, void *buf, size_t bytes, int root);
plait_result_t plait_boot_barrier(void *ctx);

#endif
