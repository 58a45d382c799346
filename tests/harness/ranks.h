/*
 * Test harness for multi-rank tests: forks real ranks on loopback.
 *
 * plait_test_run_ranks() picks a free loopback port and a fresh secret, forks
 * nranks children with PLAIT_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE/RENDEZVOUS/SECRET
 * and PLAIT_PLUGIN_PATH set (plus the extra "NAME=value" strings given), runs
 * fn(rank, arg) in each and _exit()s with its return value. The parent waits
 * up to timeout_s seconds, then kills what is left. Statuses are written to
 * status[] (as from waitpid; -1 for a child that was killed on timeout).
 * Returns 0 when every child exited 0, else 1, and prints a line per failed
 * rank to stderr.
 *
 * The ranks' PLAIT_TRANSPORT is gloo, or PLAIT_TEST_TRANSPORT when set
 * (before the job's own env, which wins): ctest uses it to re-run
 * coordinator-level suites on another transport. Afterwards the libfabric shm regions of ranks
 * that did not close them (/dev/shm/<pid>:*) are removed.
 */
#ifndef PLAIT_TEST_RANKS_H
#define PLAIT_TEST_RANKS_H

#include <stddef.h>
#include <sys/types.h>

#define PLAIT_TEST_MAX_RANKS 32

typedef int (*plait_test_rank_fn)(int rank, int nranks, void *arg);

typedef struct plait_test_job {
  int nranks;
  double timeout_s;      /* parent gives up after this long */
  const char **env;      /* NULL-terminated "NAME=value" list, may be NULL */
  int status[PLAIT_TEST_MAX_RANKS];
  int exit_code[PLAIT_TEST_MAX_RANKS]; /* -1 when killed by a signal/timeout */
  double elapsed_s[PLAIT_TEST_MAX_RANKS];
  char rendezvous[64];   /* the "127.0.0.1:port" it used */
  char secret[65];
} plait_test_job_t;

/* Runs the job; returns 0 when every rank exited 0. */
int plait_test_run_ranks(plait_test_job_t *job, plait_test_rank_fn fn, void *arg);

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int plait_test_free_port(void);

/* A fresh job secret: 64 hex digits from /dev/urandom, and a '\0'. */
void plait_test_make_secret(char out[65]);

/* Unsets every variable that would make this process part of a bigger job
 * or change plait's configuration: PLAIT_*, HOROVOD_*, the Open MPI, PMI, PMIx and Slurm
 * ones, and torchrun's. Tests may well run inside an MPI or Slurm job. */
void plait_test_clear_env(void);

/* Removes /dev/shm/<pid>:*, the libfabric shm regions a killed process left. */
void plait_test_remove_shm_regions(pid_t pid);

/* Sets PLAIT_PLUGIN_PATH for tests run in this process. */
void plait_test_set_plugin_path(void);

/* Sends this process's stderr (plait's log) to <dir>/rank<rank>.log, created
 * or truncated: returns the former stderr for plait_test_stderr_back, or -1
 * when the file cannot be opened. For rank functions whose logs the test
 * reads afterwards. */
int plait_test_stderr_to(const char *dir, int rank);

/* Puts back the stderr plait_test_stderr_to saved (flushing the log first). */
void plait_test_stderr_back(int saved);

/* printf to stderr prefixed with the rank, for use inside rank functions. */
void plait_test_say(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
