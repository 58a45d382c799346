#include "robustness/orphan_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

int ofi_gettid(void) { return (int)syscall(SYS_gettid); }

void *ofi_futex_waited_on(int tid) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return NULL;
  buf[n] = 0;
  /* "<number> <arg0> <arg1> ...", or "running" / "-1 ..." when not in one */
  char *end;
  long nr = strtol(buf, &end, 10);
  if (end == buf || nr != SYS_futex) return NULL;
  unsigned long long addr = strtoull(end, &end, 16);
  return addr ? (void *)(uintptr_t)addr : NULL;
}

int ofi_thread_gone(int tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d", tid);
  return tid > 0 && access(path, F_OK) != 0 && errno == ENOENT;
}

#ifdef __GLIBC__
/* Reads len bytes at addr without faulting where they are not mapped. */
static int read_self(void *addr, void *out, size_t len) {
  struct iovec local = {out, len}, remote = {addr, len};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

int ofi_release_orphan_lock(int waiter, int dead_owner) {
  if (waiter <= 0 || dead_owner <= 0) return 0;
  if (dead_owner != ofi_gettid() && !ofi_thread_gone(dead_owner)) return 0;
  pthread_mutex_t *m = ofi_futex_waited_on(waiter);
  pthread_mutex_t seen;
  if (!m || read_self(m, &seen, sizeof seen) != 0) return 0;
  /* glibc's layout: a locked mutex of the normal (timed) or adaptive kind,
   * not robust, PI, PP nor shared, whose owner is that thread */
  int kind = seen.__data.__kind;
  if (seen.__data.__lock == 0 || seen.__data.__owner != dead_owner) return 0;
  if (kind != PTHREAD_MUTEX_TIMED_NP && kind != PTHREAD_MUTEX_ADAPTIVE_NP) return 0;
  return pthread_mutex_unlock(m) == 0;
}
#else
int ofi_release_orphan_lock(int waiter, int dead_owner) {
  (void)waiter, (void)dead_owner;
  return 0; /* another C library's mutex layout: never touched */
}
#endif
