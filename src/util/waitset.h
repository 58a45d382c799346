/* Internal: poll() for many descriptors at the cost of the ready ones.
 *
 * poll() registers and unregisters every descriptor on every call, so a
 * rank 0 that waits on one control socket per rank and wakes once or more
 * per rank's announcement pays O(ranks) kernel work per wake, O(ranks^2)
 * per negotiated operation (measured: bench/scale, docs/performance.md).
 * A wait set keeps an epoll set of the same descriptors and fills the
 * pollfd array's revents from the ready ones only. Lists shorter than
 * PLAIT_WAITSET_MIN use poll() itself.
 *
 * One thread at a time per wait set; not async-signal-safe. */
#ifndef PLAIT_WAITSET_H
#define PLAIT_WAITSET_H

#include <poll.h>

#define PLAIT_WAITSET_MIN 16

typedef struct plait_waitset {
  int epfd;    /* -1 until a list of PLAIT_WAITSET_MIN or more is waited on */
  int n;       /* descriptors registered */
  int *fds;    /* the registered descriptors, in pfd order */
  void *events; /* struct epoll_event[n] */
} plait_waitset_t;

/* An empty wait set (no system resources until first used). */
void plait_waitset_init(plait_waitset_t *ws);

/* As poll(pfd, n, timeout_ms): every pfd[i].revents is set (POLLIN, POLLHUP,
 * POLLERR as poll would report them for events POLLIN), and the number of
 * entries with revents set is returned; 0 on timeout; -1 with errno on
 * failure (EINTR included). The descriptors may change between calls (the
 * set is rebuilt when they do); events must be POLLIN. A descriptor closed
 * and reopened under the same number needs plait_waitset_free first (epoll
 * forgets the closed one; the coordinator's sockets live as long as it). */
int plait_waitset_poll(plait_waitset_t *ws, struct pollfd *pfd, int n, int timeout_ms);

/* Releases the epoll descriptor and memory; harmless on an unused set. */
void plait_waitset_free(plait_waitset_t *ws);

#endif
