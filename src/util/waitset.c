/* poll() for many descriptors at the cost of the ready ones (waitset.h). */
#include "util/waitset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

void plait_waitset_init(plait_waitset_t *ws) {
  memset(ws, 0, sizeof *ws);
  ws->epfd = -1;
}

void plait_waitset_free(plait_waitset_t *ws) {
  if (ws->epfd >= 0) close(ws->epfd);
  free(ws->fds);
  free(ws->events);
  plait_waitset_init(ws);
}

static int same_list(const plait_waitset_t *ws, const struct pollfd *pfd, int n) {
  if (ws->epfd < 0 || ws->n != n) return 0;
  for (int i = 0; i < n; i++)
    if (ws->fds[i] != pfd[i].fd) return 0;
  return 1;
}

/* A fresh epoll set of pfd's descriptors; each event carries its index. */
static int rebuild(plait_waitset_t *ws, const struct pollfd *pfd, int n) {
  plait_waitset_free(ws);
  int rc = -1;
  ws->fds = malloc((size_t)n * sizeof *ws->fds);
  ws->events = malloc((size_t)n * sizeof(struct epoll_event));
  if (!ws->fds || !ws->events) {
    errno = ENOMEM;
    goto out;
  }
  if ((ws->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) goto out;
  for (int i = 0; i < n; i++) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (epoll_ctl(ws->epfd, EPOLL_CTL_ADD, pfd[i].fd, &ev) < 0) goto out;
    ws->fds[i] = pfd[i].fd;
  }
  ws->n = n;
  rc = 0;
out:
  if (rc) {
    int e = errno;
    plait_waitset_free(ws);
    errno = e;
  }
  return rc;
}

int plait_waitset_poll(plait_waitset_t *ws, struct pollfd *pfd, int n, int timeout_ms) {
  if (n < PLAIT_WAITSET_MIN) return poll(pfd, (nfds_t)n, timeout_ms);
  if (!same_list(ws, pfd, n) && rebuild(ws, pfd, n) < 0) return poll(pfd, (nfds_t)n, timeout_ms);
  struct epoll_event *ev = ws->events;
  int got = epoll_wait(ws->epfd, ev, n, timeout_ms);
  if (got < 0) return -1;
  for (int i = 0; i < n; i++) pfd[i].revents = 0;
  for (int k = 0; k < got; k++) {
    uint32_t e = ev[k].events;
    pfd[ev[k].data.u32].revents = (short)((e & EPOLLIN ? POLLIN : 0) |
                                          (e & EPOLLHUP ? POLLHUP : 0) |
                                          (e & EPOLLERR ? POLLERR : 0));
  }
  return got;
}
