#include "robustness/shm_stale.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "robustness/liveness.h"

/* The pid in a libfabric shm region's name "<pid>:<n>:<n>", or -1. */
static long region_pid(const char *name) {
  const char *p = name;
  long pid = -1;
  for (int part = 0; part < 3; part++) {
    if (*p < '0' || *p > '9') return -1;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || v < 0 || end - p > 10) return -1;
    if (part == 0) pid = v;
    p = end;
    if (part < 2 && *p++ != ':') return -1;
  }
  return *p == '\0' && pid > 0 ? pid : -1;
}

/* Seconds since the epoch at which this machine booted (/proc/stat btime), or 0. */
static double boot_time(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return 0;
  char line[256];
  double btime = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "btime ", 6) == 0) {
      btime = strtod(line + 6, NULL);
      break;
    }
  fclose(f);
  return btime;
}

int ofi_shm_region_is_stale(const char *name, const struct stat *st, int own_pid_too) {
  long pid = region_pid(name);
  if (pid < 0 || !S_ISREG(st->st_mode) || st->st_uid != geteuid()) return 0;
  if (pid == (long)getpid()) return own_pid_too;
  uint64_t start = 0;
  int runs = ofi_process_start(pid, &start);
  if (runs == 0) return 1; /* no such process: its maker is gone */
  long tck = sysconf(_SC_CLK_TCK);
  double btime = boot_time();
  if (runs < 0 || tck <= 0 || btime <= 0) return 0; /* cannot tell */
  double started = btime + (double)start / (double)tck;
  double touched = (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec * 1e-9;
  double changed = (double)st->st_ctim.tv_sec + st->st_ctim.tv_nsec * 1e-9;
  if (changed > touched) touched = changed;
  return started > touched + 1.0; /* the pid's process is younger: reused */
}

void ofi_shm_clear_stale(ofi_state_t *st) {
  static atomic_int own_done; /* this process's pid: before its first region only */
  int own = !atomic_exchange(&own_done, 1);
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  int dfd = dirfd(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    struct stat sb;
    if (region_pid(e->d_name) < 0 || fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
        !ofi_shm_region_is_stale(e->d_name, &sb, own))
      continue;
    if (unlinkat(dfd, e->d_name, 0) == 0)
      OFI_INFO(st, "removed /dev/shm/%s, a shared-memory region left by a dead process (pid "
               "%ld)", e->d_name, region_pid(e->d_name));
  }
  closedir(d);
}
