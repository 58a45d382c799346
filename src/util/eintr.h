/* Retrying system calls that a signal interrupted (EINTR). Header only, so
 * that plaitrun uses it too. */
#ifndef PLAIT_UTIL_EINTR_H
#define PLAIT_UTIL_EINTR_H

#include <errno.h>

/*
 * result = call, made again for as long as it fails with EINTR. call is a
 * system call that returns -1 and sets errno on failure (read, write, recv,
 * send, accept4, waitpid, getrandom ...); afterwards result and errno are
 * those of the last attempt. Example:
 *
 *   ssize_t n;
 *   PLAIT_RETRY_EINTR(n, read(fd, buf, len));
 *
 * Not for a poll() with a timeout: a loop around it recomputes the time
 * left to its deadline after EINTR instead (e.g. wait_fd in control/net.c),
 * and a loop that polls each cycle simply treats EINTR as "nothing ready".
 */
#define PLAIT_RETRY_EINTR(result, call)                                        \
  do {                                                                         \
    (result) = (call);                                                         \
  } while ((result) == -1 && errno == EINTR)

#endif
