/*
 * plaitrun: ranks on other hosts (-H / --hostfile naming another host).
 *
 * Ranks fill the hosts' slots in the order given (host 1's slots, then host
 * 2's, ...), as under horovodrun. A rank on another host is started as
 *
 *   $PLAITRUN_SSH -T -o BatchMode=yes [-p PORT] [-i KEY] -- HOST 'REMOTE'
 *
 * (PLAITRUN_SSH defaults to "ssh"; its words are split at blanks, e.g.
 * "ssh -F /path/to/ssh_config"). REMOTE changes to plaitrun's working folder,
 * sets the ranks' variables (PLAIT_*, HOROVOD_*, FI_*, PATH, LD_LIBRARY_PATH,
 * PYTHONPATH, and the rank's PLAIT_RANK, PLAIT_LOCAL_RANK, PLAIT_LOCAL_SIZE)
 * and runs the command under a small sh wrapper. PLAIT_SECRET is not on any
 * command line: plaitrun writes it as the first line of ssh's standard input,
 * which the wrapper reads. The wrapper starts the command in a session of its
 * own and, when its standard input ends (plaitrun stopped the job, or
 * plaitrun or ssh died), sends SIGTERM to that session and SIGKILL after the
 * grace time, so no rank outlives its ssh connection.
 *
 * PLAITRUN_AGENT, when set, replaces ssh by a start agent of the engine the
 * job runs on (srun in a Slurm allocation, plait.ray's or plait.spark's relay):
 * every rank or worker, this host's too, is started as
 *
 *   $PLAITRUN_AGENT HOST 'REMOTE'
 *
 * (its words split at blanks), with the same REMOTE, the secret as the first
 * line of its standard input, and the same contract: the agent runs REMOTE
 * with `sh -c` on HOST, passes its standard input, output and error through,
 * exits with REMOTE's status, and the end of its standard input stops REMOTE.
 */
#ifndef PLAITRUN_REMOTE_H
#define PLAITRUN_REMOTE_H

#include "options.h"

#include <stddef.h>

/* Where rank goes: *host is the index in opts->hosts (-1 when no -H was
 * given: this host), *local_rank its index among that host's ranks and
 * *local_size how many ranks that host gets. */
void plaitrun_place(const plaitrun_options_t *opts, int rank, int *host, int *local_rank,
                    int *local_size);

/* The host name other hosts reach rank 0 at, for PLAIT_RENDEZVOUS when some
 * host is another one: the first host's name, or this host's name when the
 * first host is this one under a loopback name. 0, or -1 with err set. */
int plaitrun_rendezvous_host(const plaitrun_options_t *opts, char *out, size_t cap, char *err,
                             size_t err_size);

/* 1 when a process for a host goes through plaitrun_remote_argv (another
 * host, or any host when PLAITRUN_AGENT is set); 0 when plaitrun starts it
 * itself. */
int plaitrun_remote_start(int host_is_local);

/* What starts processes on hosts, for messages: "ssh", "srun" (in a Slurm
 * allocation, slurm.h) or "PLAITRUN_AGENT". */
const char *plaitrun_remote_via(void);

/* The argv that starts rank on opts->hosts[host] over ssh (above), built from
 * plaitrun's environment as it is now. NULL-terminated, every string
 * malloc'd; free with plaitrun_remote_argv_free. NULL with err set when out of
 * memory or PLAITRUN_SSH is empty. */
char **plaitrun_remote_argv(const plaitrun_options_t *opts, int host, int rank, int local_rank,
                            int local_size, char *err, size_t err_size);
/* The same for any host name, with the command's own variables given as
 * "NAME=value NAME=value" (shell-safe text; the elastic driver's
 * PLAIT_ELASTIC_WORKER and PLAIT_ELASTIC_DRIVER); what names the process in
 * errors ("worker h1/0"). */
char **plaitrun_remote_argv_for(const plaitrun_options_t *opts, const char *host, const char *vars,
                                const char *what, char *err, size_t err_size);
void plaitrun_remote_argv_free(char **argv);

/* Writes PLAIT_SECRET (plaitrun's) and a newline to fd, the stdin of a rank
 * or worker started over ssh; a failed write shows as that process's failure
 * (the wrapper exits 255). The pipe stays open until the process is told to
 * stop. */
void plaitrun_remote_send_secret(int fd);

#endif
