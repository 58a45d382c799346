#include "robustness/shm_stale.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"

void ofi_shm_clear_stale(ofi_state_t *st) {
  static atomic_int done;
  if (atomic_exchange(&done, 1)) return;
  char prefix[32];
  int n = snprintf(prefix, sizeof prefix, "%d:", (int)getpid());
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, prefix, (size_t)n) != 0) continue;
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
    if (unlink(path) == 0)
      OFI_INFO(st, "removed %s, a shared-memory region left by a dead process with this "
               "process's pid", path);
  }
  closedir(d);
}
