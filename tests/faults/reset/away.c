#include "away.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Waits for child and ends as it ended. `can_die`: this process may die of
 * the child's signal (pid 1 of a namespace cannot: it exits 128 + signal,
 * which its parent turns back into the signal). */
static void mirror(pid_t child, int can_die) {
  int st = 0;
  while (waitpid(child, &st, 0) < 0)
    if (errno != EINTR) _exit(125);
  int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  if (!sig && can_die && WIFEXITED(st) && WEXITSTATUS(st) > 128) sig = WEXITSTATUS(st) - 128;
  if (sig && can_die) {
    signal(sig, SIG_DFL);
    raise(sig);
  }
  _exit(sig ? 128 + sig : WIFEXITED(st) ? WEXITSTATUS(st) : 125);
}

int away_enter(const char *netns) {
  char path[256];
  snprintf(path, sizeof path, "/var/run/netns/%s", netns);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = setns(fd, CLONE_NEWNET);
  close(fd);
  if (rc != 0 || unshare(CLONE_NEWPID | CLONE_NEWUTS) != 0) return -1;
  if (sethostname(netns, strlen(netns)) != 0) return -1; /* another host's name */
  pid_t init = fork(); /* pid 1 of the new namespace */
  if (init < 0) return -1;
  if (init > 0) mirror(init, 1);
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* (its parent is outside: getppid() reads 0) */
  pid_t peer = fork();
  if (peer < 0) _exit(125);
  if (peer > 0) mirror(peer, 0);
  return 0;
}
