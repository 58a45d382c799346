/*
 * plait elastic: what a worker started by plaitrun's elastic driver asks of it
 * (docs/elastic.md). A worker is elastic when PLAIT_ELASTIC_DRIVER=host:port
 * is set in its environment (plaitrun sets it, with PLAIT_ELASTIC_WORKER, the
 * worker's name, and PLAIT_SECRET). Then plait_init does not read the rank
 * layout from the environment: it asks the driver, over a connection
 * authenticated with the job secret (HMAC challenge-response; the secret
 * never travels), for this worker's place in the next job ("epoch"), and
 * waits until the driver has formed it. Each job the driver forms has a new
 * epoch number; the control plane's authentication covers it, so a process of
 * an earlier epoch cannot join, and no message of an old job mixes into a new
 * one.
 *
 * Without PLAIT_ELASTIC_DRIVER these calls report "not elastic" and succeed.
 *
 * plait_init in an elastic worker (docs/design.md, "Elastic rendezvous and
 * epochs"): it needs PLAIT_ELASTIC_WORKER and PLAIT_SECRET too (else
 * PLAIT_ERR_CONFIG naming the variable); it binds a listening socket on the
 * address it reaches the driver from, sends its name, the epoch it last ran
 * in and the ranks that job named lost, and blocks until the driver answers,
 * at most PLAIT_ELASTIC_TIMEOUT_S + 30 s. Errors name the driver's address
 * and the worker: PLAIT_ERR_PEER_LOST (the driver cannot be reached for 10 s,
 * or closes the connection, or does not answer in time), PLAIT_ERR_AUTH (the
 * secrets differ: the driver refuses, or cannot prove it knows the secret),
 * PLAIT_ERR_SHUTDOWN (no place for this worker: plait_elastic_removed), and
 * those of plait_init, where a process of another epoch is refused by rank 0
 * with PLAIT_ERR_AUTH naming both epochs.
 *
 * Every call below may be made from any thread; none takes ownership of a
 * pointer; a NULL out-pointer is PLAIT_ERR_INVALID_ARGUMENT.
 */
#ifndef PLAIT_ELASTIC_H
#define PLAIT_ELASTIC_H

#include <stdint.h>

#include "plait/plait.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bits of plait_elastic_host_updates' *update (Horovod's HostUpdateResult). */
#define PLAIT_HOSTS_ADDED 1u   /* hosts with slots the current job could use appeared */
#define PLAIT_HOSTS_REMOVED 2u /* a host of the current job left the host list */

/*
 * *enabled = 1 when this process was started by an elastic driver
 * (PLAIT_ELASTIC_DRIVER set and valid), else 0. Needs no plait_init; reads
 * the environment only, never blocks.
 */
PLAIT_API plait_result_t plait_elastic_enabled(int *enabled);

/*
 * The epoch of the running job: 1 for the first job the driver formed, one
 * more for each re-formed job; 0 when not elastic. Needs plait_init (else
 * PLAIT_ERR_NOT_INITIALIZED); never blocks.
 */
PLAIT_API plait_result_t plait_elastic_epoch(uint64_t *epoch);

/*
 * Asks the driver whether the host list changed in a way the running job does
 * not reflect (a host of this job removed; hosts added while the job is below
 * --max-np). *timestamp: the driver's count of host-list changes so far;
 * *update: PLAIT_HOSTS_* bits, 0 when the job is current. Not elastic: both 0.
 * Horovod's State.commit() calls this on rank 0 and broadcasts the answer.
 * Bounded: fails with PLAIT_ERR_PEER_LOST / PLAIT_ERR_TIMEOUT naming the
 * driver when it does not answer within PLAIT_TIMEOUT_S. Needs plait_init.
 * Blocks for one round trip on a new connection to the driver (authenticated
 * as plait_init's); a driver that answers for another epoch than the running
 * job's says PLAIT_HOSTS_REMOVED.
 */
PLAIT_API plait_result_t plait_elastic_host_updates(uint64_t *timestamp, unsigned *update);

/*
 * *removed = 1 when the last plait_init failed because the driver answered
 * that this worker has no place in the next job (its host was removed or
 * blacklisted, the job is above --max-np, the reset limit was reached, or
 * training already ended); plait_last_error() has the driver's reason. The
 * worker should then exit with status 0: the driver ignores its status.
 * Process-wide; kept after plait_init fails; reset by the next plait_init.
 * Needs no plait_init; never blocks.
 */
PLAIT_API plait_result_t plait_elastic_removed(int *removed);

#ifdef __cplusplus
}
#endif

#endif
