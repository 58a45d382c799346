/* Waiting on one word of memory (futex.h). */
#include "util/futex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

int plait_futex_wait(atomic_uint *word, unsigned expected, const struct timespec *rel) {
  long rc = syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, expected, rel, NULL, 0);
  return rc == 0 ? 0 : errno;
}

void plait_futex_wake_all(atomic_uint *word) {
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
