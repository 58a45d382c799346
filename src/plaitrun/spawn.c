#include "spawn.h"

#include "jobenv.h"
#include "signals.h"
#include "util/eintr.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Exit status of a child that could not even get to exec. */
#define CHILD_SETUP_FAILED 127

static void close_pair(int fds[2]) {
  for (int i = 0; i < 2; i++) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
}

/* Reports errno to the parent over the status pipe and exits. */
static void child_fail(int status_fd) {
  int e = errno;
  ssize_t w;
  PLAIT_RETRY_EINTR(w, write(status_fd, &e, sizeof e));
  (void)w;
  _exit(CHILD_SETUP_FAILED);
}

/* In the child: everything between fork and exec. Never returns. */
static void child_main(const plaitrun_spawn_spec_t *spec, int out_fd, int err_fd,
                       int status_fd, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(CHILD_SETUP_FAILED); /* plaitrun is gone */
  plaitrun_signals_reset_in_child();
  if (spec->nofile != NULL) setrlimit(RLIMIT_NOFILE, spec->nofile);
  if (dup2(spec->stdin_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
      dup2(err_fd, STDERR_FILENO) < 0)
    child_fail(status_fd);
  if (spec->worker != NULL) {
    if (setenv("PLAIT_ELASTIC_WORKER", spec->worker, 1) != 0 ||
        setenv("PLAIT_ELASTIC_DRIVER", spec->driver, 1) != 0)
      child_fail(status_fd);
  } else if (plaitrun_jobenv_set_rank(spec->rank, spec->local_rank, spec->local_size) != 0) {
    child_fail(status_fd);
  }
  execvp(spec->argv[0], spec->argv);
  child_fail(status_fd);
}

/* Reads the child's exec result: 0 when exec succeeded (EOF), else errno. */
static int read_exec_result(int status_fd) {
  int e = 0;
  ssize_t r;
  PLAIT_RETRY_EINTR(r, read(status_fd, &e, sizeof e));
  if (r == (ssize_t)sizeof e) return e > 0 ? e : EIO;
  return 0;
}

int plaitrun_spawn_rank(const plaitrun_spawn_spec_t *spec, plaitrun_child_t *child,
                        char *err, size_t err_size) {
  int out[2] = {-1, -1}, errp[2] = {-1, -1}, status[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0 ||
      pipe2(status, O_CLOEXEC) != 0) {
    snprintf(err, err_size, "cannot start rank %d: pipe: %s", spec->rank, strerror(errno));
    goto fail;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, err_size, "cannot start rank %d: fork: %s", spec->rank, strerror(errno));
    goto fail;
  }
  if (pid == 0) {
    close(out[0]);
    close(errp[0]);
    close(status[0]);
    child_main(spec, out[1], errp[1], status[1], parent);
  }
  setpgid(pid, pid); /* also done by the child; whoever runs first wins */
  close(out[1]);
  close(errp[1]);
  close(status[1]);
  int exec_errno = read_exec_result(status[0]);
  close(status[0]);
  if (exec_errno != 0) {
    close(out[0]);
    close(errp[0]);
    pid_t reaped;
    PLAIT_RETRY_EINTR(reaped, waitpid(pid, NULL, 0));
    (void)reaped;
    return exec_errno;
  }
  child->pid = pid;
  child->out_fd = out[0];
  child->err_fd = errp[0];
  return 0;

fail:
  close_pair(out);
  close_pair(errp);
  close_pair(status);
  return -1;
}
