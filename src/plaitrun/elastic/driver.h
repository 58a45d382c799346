/*
 * plaitrun's elastic driver (docs/plaitrun.md, "Elastic mode";
 * docs/elastic.md).
 *
 * plaitrun becomes the driver when --min-np, --max-np or
 * --host-discovery-script is given. It never trains: it starts workers (the
 * command) on the hosts' slots, local ones by fork/exec and others over ssh
 * as `plaitrun -H` does, and answers their requests over its rendezvous
 * server (rendezvous.h): each worker asks for its place in the next job
 * ("epoch"), the driver forms the epoch (ranks host by host, assign.h) once
 * every worker of the last one has asked, exited, or was named lost, and
 * forms a new one after a failure, when hosts are added while the job is
 * below --max-np, or when hosts are removed. See driver.c for the rules.
 */
#ifndef PLAITRUN_ELASTIC_DRIVER_H
#define PLAITRUN_ELASTIC_DRIVER_H

#include "../options.h"

/* Runs the elastic job of opts (elastic set; horovodrun's environment
 * applied) and returns plaitrun's exit status: 0 when a worker finished
 * with status 0; 1 when every worker failed, at --reset-limit, at
 * --elastic-timeout, or when the discovery script fails; 128+S on signal S. */
int plaitrun_elastic_run(const plaitrun_options_t *opts);

#endif
