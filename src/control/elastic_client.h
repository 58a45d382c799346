/*
 * Internal: the worker's side of the elastic rendezvous (include/plait/
 * elastic.h; the messages are control/elastic_wire.h). A worker whose
 * PLAIT_ELASTIC_DRIVER is set asks plaitrun's driver for its place in the
 * next job instead of reading the rank layout from the environment.
 *
 * Process-wide state, kept across plait_shutdown: the epoch this process last
 * ran in, the ranks that job named lost (sent with the next JOIN, so the
 * driver need not wait for them), and whether the last JOIN was answered
 * STOP. Thread-safe (one lock); plait_el_join runs under plait_init's lock.
 */
#ifndef PLAIT_ELASTIC_CLIENT_H
#define PLAIT_ELASTIC_CLIENT_H

#include <stdint.h>

#include "control/topology.h"
#include "util/config.h"

/* 1 when text is a "host:port" the worker can use as its driver's address. */
int plait_el_driver_valid(const char *text);

/* Spec steps 1-4 (docs/design.md, "Elastic rendezvous and epochs"): connects
 * to cfg->elastic_driver, authenticates both ways, binds a listening socket
 * on the local address of that connection (port 0), sends JOIN{worker,
 * last epoch, that address, lost ranks}, and waits (at most
 * PLAIT_ELASTIC_TIMEOUT_S + 30 s; the driver closing ends the wait at once)
 * for the answer. ASSIGN: t is the assigned layout (epoch set; on rank 0,
 * t->listen_fd is the socket bound, for the control plane to take).
 * STOP: PLAIT_ERR_SHUTDOWN with the driver's reason, and plait_el_removed()
 * says 1. Errors name the driver's address and this worker. */
plait_result_t plait_el_join(const plait_config_t *cfg, plait_topology_t *t);

/* One POLL: the driver's count of host changes and the PLAIT_HOSTS_* bits
 * for a job of `epoch`. Bounded by timeout_s (PLAIT_ERR_TIMEOUT or
 * PLAIT_ERR_PEER_LOST naming the driver). */
plait_result_t plait_el_poll(const plait_config_t *cfg, uint64_t epoch, double timeout_s,
                             uint64_t *timestamp, unsigned *update);

/* 1 when the last plait_el_join was answered STOP. */
int plait_el_removed(void);

/* Notes, for the next JOIN, the ranks a failure of the job of `epoch` (size
 * ranks) names lost: text is the control plane's failure message, whose lost
 * ranks read "rank 3 was lost" or "ranks 1, 3 were lost" (plait_format_ranks);
 * ranks >= size are ignored. Called by plait_control_fail. */
void plait_el_note_failure(uint64_t epoch, int size, const char *text);

#endif
