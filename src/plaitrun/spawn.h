/*
 * plaitrun: starting one rank.
 *
 * Each rank runs in its own process group (pgid = its pid), so that plaitrun
 * can signal everything a rank started (kill(-pgid, ...)) and so that a
 * terminal's Ctrl-C reaches only plaitrun, which then forwards exactly one
 * SIGINT to each rank. Each rank also gets PR_SET_PDEATHSIG = SIGKILL, so
 * ranks do not outlive a plaitrun that was itself killed with SIGKILL.
 */
#ifndef PLAITRUN_SPAWN_H
#define PLAITRUN_SPAWN_H

#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

typedef struct plaitrun_spawn_spec {
  int rank;
  int local_rank, local_size;   /* PLAIT_LOCAL_RANK, PLAIT_LOCAL_SIZE */
  char **argv;                  /* argv[0] is looked up in PATH (execvp) */
  int stdin_fd;                 /* becomes the child's fd 0 */
  const struct rlimit *nofile;  /* RLIMIT_NOFILE for the child; NULL: keep */
  const char *worker;           /* elastic: PLAIT_ELASTIC_WORKER, and no PLAIT_RANK/LOCAL_*;
                                   NULL: a fixed rank */
  const char *driver;           /* elastic: PLAIT_ELASTIC_DRIVER for this worker */
} plaitrun_spawn_spec_t;

typedef struct plaitrun_child {
  pid_t pid;
  int out_fd; /* read end of the child's stdout pipe (O_CLOEXEC) */
  int err_fd; /* read end of the child's stderr pipe (O_CLOEXEC) */
} plaitrun_child_t;

/*
 * Forks and execs one rank, and waits until exec has succeeded or failed.
 * Returns 0 when the rank runs (*child filled); a positive errno when exec
 * failed (the child has been reaped, nothing is left open); -1 when plaitrun
 * could not fork or make pipes (message in err).
 */
int plaitrun_spawn_rank(const plaitrun_spawn_spec_t *spec, plaitrun_child_t *child,
                        char *err, size_t err_size);

#endif
