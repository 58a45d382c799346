#include "robustness/liveness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define STAT_OK 0
#define STAT_NO_PROCESS 1 /* the kernel says there is no such process */
#define STAT_UNKNOWN (-1) /* could not tell (fd limit, permissions, odd text) */

/* Why /proc/<pid>/stat could not be opened (errno from fopen): only "no such
 * process" is an answer; running out of file descriptors (EMFILE, ENFILE),
 * memory or permission says nothing about the peer. kill(pid, 0) needs no
 * file descriptor and settles the other cases. */
static int no_such_process(int64_t pid, int open_errno) {
  if (open_errno == ENOENT || open_errno == ESRCH) return 1;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* State letter and start time (field 22) from /proc/<pid>/stat: STAT_OK,
 * STAT_NO_PROCESS, or STAT_UNKNOWN when it cannot be read for another reason. */
static int read_stat(int64_t pid, char *state, uint64_t *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return no_such_process(pid, errno) ? STAT_NO_PROCESS : STAT_UNKNOWN;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  int read_errno = ferror(f) ? errno : 0;
  fclose(f);
  /* A process that exits while it is read leaves an empty read (ESRCH). */
  if (n == 0) return read_errno == ESRCH || no_such_process(pid, 0) ? STAT_NO_PROCESS
                                                                     : STAT_UNKNOWN;
  buf[n] = '\0';
  /* The command name (field 2) may hold spaces and ')': skip to the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return STAT_UNKNOWN;
  p += 2;
  *state = *p;
  /* Fields 3.. follow; the start time is field 22, 19 fields after state. */
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p) return STAT_UNKNOWN;
    p++;
  }
  *start = strtoull(p, NULL, 10);
  return STAT_OK;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

void ofi_self_identity(int64_t *pid, uint64_t *start_time, uint64_t *kernel_id) {
  char state = 0;
  *pid = (int64_t)getpid();
  *start_time = 0;
  if (read_stat(*pid, &state, start_time) != STAT_OK) *start_time = 0;
  uint64_t h = 1469598103934665603ull;
  char boot[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
    fclose(f);
  }
  struct stat ns;
  if (!boot[0] || stat("/proc/self/ns/pid", &ns) != 0 || *start_time == 0) {
    *kernel_id = 0; /* cannot tell: never check pids */
    return;
  }
  h = fnv1a(h, boot, strlen(boot));
  h = fnv1a(h, &ns.st_ino, sizeof ns.st_ino);
  h = fnv1a(h, &ns.st_dev, sizeof ns.st_dev);
  /* The time namespace too: /proc/<pid>/stat's start time is shown shifted by
   * the reader's boot-time offset, so a process in another time namespace
   * would read as another process (pid reused) while it runs. A kernel
   * without time namespaces has no such file and no such shift. */
  struct stat tns;
  if (stat("/proc/self/ns/time", &tns) == 0) {
    h = fnv1a(h, &tns.st_ino, sizeof tns.st_ino);
    h = fnv1a(h, &tns.st_dev, sizeof tns.st_dev);
  }
  *kernel_id = h ? h : 1;
}

int ofi_process_start(int64_t pid, uint64_t *start_ticks) {
  char state = 0;
  int rc = read_stat(pid, &state, start_ticks);
  if (rc == STAT_UNKNOWN) return -1;
  return rc == STAT_NO_PROCESS || state == 'Z' || state == 'X' ? 0 : 1;
}

int ofi_peer_gone(const ofi_state_t *st, int peer, char *why, size_t why_len) {
  if (!st->peers || peer < 0 || peer >= st->nranks) return 0;
  return ofi_peer_record_gone(&st->peers[peer], why, why_len);
}

int ofi_peer_record_gone(const ofi_peer_t *p, char *why, size_t why_len) {
  if (!p->same_kernel) return 0;
  char state = 0;
  uint64_t start = 0;
  int rc = read_stat(p->pid, &state, &start);
  if (rc == STAT_UNKNOWN) return 0; /* cannot tell: the timeout decides */
  if (rc == STAT_NO_PROCESS) {
    snprintf(why, why_len, "its process (pid %lld on this host) has exited", (long long)p->pid);
    return 1;
  }
  if (start != p->start_time) {
    snprintf(why, why_len, "its process (pid %lld on this host) has exited (pid reused)",
             (long long)p->pid);
    return 1;
  }
  if (state == 'Z' || state == 'X') {
    snprintf(why, why_len, "its process (pid %lld on this host) has exited", (long long)p->pid);
    return 1;
  }
  return 0;
}
