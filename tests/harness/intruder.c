#include "intruder.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SEEN 4096

static volatile sig_atomic_t stopping;
static void on_term(int sig) { (void)sig, stopping = 1; }

typedef struct {
  unsigned long inode[MAX_SEEN];
  int n;
} inodes_t;

static int has(const inodes_t *s, unsigned long ino) {
  for (int i = 0; i < s->n; i++)
    if (s->inode[i] == ino) return 1;
  return 0;
}

static void add(inodes_t *s, unsigned long ino) {
  if (s->n < MAX_SEEN && !has(s, ino)) s->inode[s->n++] = ino;
}

/* The socket inodes the given processes hold. */
static void owned_sockets(const atomic_int *pids, int npids, inodes_t *out) {
  out->n = 0;
  for (int p = 0; p < npids; p++) {
    int pid = atomic_load(&pids[p]);
    if (pid <= 0) continue;
    char dir[64], link[320], target[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    DIR *d = opendir(dir);
    if (!d) continue;
    for (struct dirent *e; (e = readdir(d));) {
      snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
      ssize_t len = readlink(link, target, sizeof target - 1);
      if (len <= 0) continue;
      target[len] = '\0';
      unsigned long ino;
      if (sscanf(target, "socket:[%lu]", &ino) == 1) add(out, ino);
    }
    closedir(d);
  }
}

/* "0100007F:1F90" (IPv4) or 32 hex digits (IPv6) as /proc/net/tcp* write them. */
static int parse_address(const char *hex, int v6, struct sockaddr_storage *ss, socklen_t *len) {
  memset(ss, 0, sizeof *ss);
  unsigned port;
  if (!v6) {
    unsigned a;
    if (sscanf(hex, "%8X:%4X", &a, &port) != 2) return -1;
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = a; /* the kernel prints the raw 32-bit word */
    in->sin_port = htons((uint16_t)port);
    *len = sizeof *in;
    return 0;
  }
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
  uint32_t w[4];
  if (sscanf(hex, "%8X%8X%8X%8X:%4X", &w[0], &w[1], &w[2], &w[3], &port) != 5) return -1;
  in6->sin6_family = AF_INET6;
  memcpy(&in6->sin6_addr, w, sizeof w);
  in6->sin6_port = htons((uint16_t)port);
  *len = sizeof *in6;
  return 0;
}

/* Connects to every listener in `table` owned by `owned` not attacked yet. */
static int attack_table(const char *table, int v6, const inodes_t *owned, inodes_t *done, int junk,
                        int *fds, int *nfds) {
  FILE *f = fopen(table, "r");
  if (!f) return 0;
  char line[512];
  int hits = 0;
  if (!fgets(line, sizeof line, f)) { /* header */
    fclose(f);
    return 0;
  }
  while (fgets(line, sizeof line, f)) {
    char local[64], remote[64];
    unsigned state;
    unsigned long inode;
    if (sscanf(line, " %*d: %63s %63s %X %*s %*s %*s %*d %*d %lu", local, remote, &state,
               &inode) != 4)
      continue;
    if (state != 0x0A || !has(owned, inode) || has(done, inode)) continue;
    add(done, inode);
    struct sockaddr_storage ss;
    socklen_t len;
    if (parse_address(local, v6, &ss, &len)) continue;
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0) continue;
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
      close(fd);
      continue;
    }
    hits++;
    if (junk) {
      unsigned char bytes[256];
      for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)random();
      if (send(fd, bytes, sizeof bytes, MSG_NOSIGNAL)) { /* what got through is enough */
      }
    }
    if (*nfds < MAX_SEEN) fds[(*nfds)++] = fd;
    else close(fd);
  }
  fclose(f);
  return hits;
}

static void intruder_main(const atomic_int *pids, int npids, int junk, int report_fd,
                          const sigset_t *old_mask) {
  signal(SIGTERM, on_term);
  sigprocmask(SIG_SETMASK, old_mask, NULL); /* a SIGTERM sent meanwhile lands now */
  srandom((unsigned)getpid());
  static inodes_t owned, done;
  static int fds[MAX_SEEN];
  int nfds = 0, hits = 0;
  while (!stopping) {
    owned_sockets(pids, npids, &owned);
    hits += attack_table("/proc/net/tcp", 0, &owned, &done, junk, fds, &nfds);
    hits += attack_table("/proc/net/tcp6", 1, &owned, &done, junk, fds, &nfds);
    usleep(100);
  }
  if (write(report_fd, &hits, sizeof hits) != (ssize_t)sizeof hits) _exit(1);
  _exit(0);
}

static int report_pipe[2] = {-1, -1};

pid_t plait_test_intruder_start(const atomic_int *pids, int npids, int junk) {
  if (pipe(report_pipe)) return -1;
  /* SIGTERM blocked across the fork: on a loaded machine a short job can end
   * and stop the intruder before it has installed its handler, which then
   * died of the signal ("did not stop cleanly") */
  sigset_t term, old_mask;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old_mask);
  pid_t pid = fork();
  if (pid == 0) {
    close(report_pipe[0]);
    intruder_main(pids, npids, junk, report_pipe[1], &old_mask);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  close(report_pipe[1]);
  return pid;
}

int plait_test_intruder_stop(pid_t intruder) {
  if (intruder <= 0) return -1;
  kill(intruder, SIGTERM);
  int hits = -1, status = 0;
  if (read(report_pipe[0], &hits, sizeof hits) != (ssize_t)sizeof hits) hits = -1;
  close(report_pipe[0]);
  waitpid(intruder, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? hits : -1;
}
