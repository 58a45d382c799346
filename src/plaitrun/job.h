/*
 * plaitrun: one job of N local ranks, from start to exit status.
 *
 * Life of a job:
 *  - RUNNING: ranks are started one by one; their output is relayed.
 *  - The first "cause" moves it to STOPPING and fixes plaitrun's exit status:
 *    a rank that exits non-zero or dies of a signal (its status, 128+signo
 *    for a signal), a command that cannot be executed (127 when not found,
 *    126 otherwise), a signal to plaitrun (128+signo), or a failure of
 *    plaitrun itself (1). Every rank still running gets SIGTERM (or the
 *    forwarded signal) sent to its process group.
 *  - STOPPING -> KILLED after the grace time, or at once on a second signal
 *    to plaitrun: SIGKILL to every remaining process group.
 *  - Done when every rank has been reaped and every pipe has reached EOF. Once
 *    the last rank has exited, processes it left behind get PLAITRUN_DRAIN_S
 *    to close its pipes; then plaitrun stops reading and exits anyway.
 */
#ifndef PLAITRUN_JOB_H
#define PLAITRUN_JOB_H

#include "options.h"

/* After the last rank exits: how long output pipes may stay open. */
#define PLAITRUN_DRAIN_S 1.0
/* After SIGKILL: how long to wait for ranks to be reaped before giving up. */
#define PLAITRUN_ABANDON_S 5.0

/* Runs the job described by opts (action RUN) and returns plaitrun's exit
 * status. The rank-independent environment (jobenv) must be prepared. */
int plaitrun_job_run(const plaitrun_options_t *opts);

#endif
