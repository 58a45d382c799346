/*
 * plaitrun inside a Slurm allocation (salloc, sbatch): srun places the ranks.
 *
 * When SLURM_JOB_ID is set, srun is on the PATH, and neither PLAITRUN_AGENT
 * nor PLAITRUN_SSH is set (a user's explicit choice wins), every rank, this
 * host's too, is started as one srun step of one task:
 *
 *   srun --nodes=1 --ntasks=1 --nodelist=HOST --overlap --kill-on-bad-exit=1
 *        --input=all --quiet --job-name=plaitrun sh -c 'REMOTE'
 *
 * with REMOTE and the secret on its standard input as for ssh (remote.h):
 * srun forwards its standard input to the task and ends it when plaitrun's
 * pipe closes, and exits with the task's status. Without -H the hosts are
 * the allocation's: SLURM_JOB_NODELIST expanded by `scontrol show hostnames`,
 * each with the task slots of SLURM_TASKS_PER_NODE (else
 * SLURM_NTASKS_PER_NODE, else SLURM_JOB_CPUS_PER_NODE).
 */
#ifndef PLAITRUN_SLURM_H
#define PLAITRUN_SLURM_H

#include "options.h"

#include <stddef.h>

/* Slurm's per-node counts, "2(x3),1": counts[i] for node i; the number of
 * nodes, or -1 when text is not such a list or has more than max nodes. */
int plaitrun_slurm_counts(const char *text, int *counts, int max);

/* Turns srun placement on when plaitrun runs in an allocation (above), fills
 * opts' hosts from the allocation when -H was not given (not in elastic
 * mode), and says so once on stderr. 0 (also when not in an allocation), or
 * -1 with err set (scontrol failed, -np above the allocation's slots). */
int plaitrun_slurm_setup(plaitrun_options_t *opts, char *err, size_t err_size);

/* srun's path when srun places the ranks, else NULL. */
const char *plaitrun_slurm_srun(void);

/* Appends to argv (from *words on) srun's words that start one task on host,
 * up to "-c": the caller appends REMOTE. -1 when out of memory. */
int plaitrun_slurm_put_words(char **argv, size_t *words, const char *host);
#define PLAITRUN_SLURM_WORDS 12 /* the most plaitrun_slurm_put_words appends */

#endif
