/* TCP sockets with deadlines. */
#include "control/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/eintr.h"
#include "util/error.h"

plait_result_t plait_net_parse_hostport(const char *text, const char *what, char *host,
                                        size_t host_cap, int *port) {
  const char *colon;
  const char *h = text;
  size_t hlen;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (!close || close[1] != ':') goto bad;
    h = text + 1;
    hlen = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strrchr(text, ':');
    if (!colon) goto bad;
    hlen = (size_t)(colon - text);
    if (memchr(text, ':', hlen)) goto bad; /* bare IPv6 needs brackets */
  }
  if (hlen == 0 || hlen >= host_cap) goto bad;
  char *end;
  errno = 0;
  long p = strtol(colon + 1, &end, 10);
  if (errno || *end || colon[1] == '\0' || p < 1 || p > 65535) goto bad;
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  *port = (int)p;
  return PLAIT_SUCCESS;
bad:
  return plait_error(PLAIT_ERR_CONFIG,
                     "%s='%s' is not valid: expected host:port (e.g. 10.0.0.1:29500 or "
                     "[::1]:29500) with a port from 1 to 65535",
                     what, text);
}

void plait_net_format_hostport(const char *host, int port, char *buf, size_t cap) {
  if (strchr(host, ':'))
    snprintf(buf, cap, "[%s]:%d", host, port);
  else
    snprintf(buf, cap, "%s:%d", host, port);
}

static plait_result_t resolve(const char *host, int port, int passive, struct addrinfo **out) {
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  int rc = getaddrinfo(host, service, &hints, out);
  if (rc)
    return plait_error(PLAIT_ERR_SYSTEM, "cannot resolve '%s': %s", host, gai_strerror(rc));
  return PLAIT_SUCCESS;
}

static void set_flags(int fd) {
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

plait_result_t plait_net_listen(const char *host, int port, int *fd_out) {
  struct addrinfo *ai;
  PLAIT_CHECK(resolve(host, port, 1, &ai));
  int err = 0;
  for (struct addrinfo *a = ai; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      set_flags(fd);
      freeaddrinfo(ai);
      *fd_out = fd;
      return PLAIT_SUCCESS;
    }
    err = errno;
    close(fd);
  }
  freeaddrinfo(ai);
  return plait_error(PLAIT_ERR_SYSTEM, "cannot listen on %s:%d: %s", host, port, strerror(err));
}

static int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    int ms = -1;
    if (deadline > 0) {
      double left = deadline - plait_now();
      if (left <= 0) return 0;
      ms = (int)(left * 1000) + 1;
    }
    struct pollfd p = {fd, events, 0};
    int rc = poll(&p, 1, ms);
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return -1;
    if (rc == 0 && deadline <= 0) continue;
  }
}

plait_result_t plait_net_connect(const char *host, int port, double deadline, int *fd_out,
                                 int *transient) {
  *transient = 0;
  struct addrinfo *ai;
  plait_result_t rc = resolve(host, port, 0, &ai);
  if (rc) {
    *transient = 1; /* DNS may not know the host yet */
    return rc;
  }
  int err = ETIMEDOUT;
  for (struct addrinfo *a = ai; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    set_flags(fd);
    int c = connect(fd, a->ai_addr, a->ai_addrlen);
    if (c < 0 && errno == EINPROGRESS) {
      int w = wait_fd(fd, POLLOUT, deadline);
      socklen_t len = sizeof err;
      if (w == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) c = 0;
      else if (w == 0) err = ETIMEDOUT;
      else if (w < 0) err = errno;
    } else if (c < 0) {
      err = errno;
    }
    if (c == 0) {
      freeaddrinfo(ai);
      *fd_out = fd;
      return PLAIT_SUCCESS;
    }
    close(fd);
  }
  freeaddrinfo(ai);
  *transient = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
               err == ENETUNREACH || err == ECONNRESET || err == EAGAIN;
  return plait_error(PLAIT_ERR_SYSTEM, "cannot connect to %s:%d: %s", host, port, strerror(err));
}

void plait_net_peer_name(int fd, char *buf, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getpeername(fd, (struct sockaddr *)&ss, &len) ||
      getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV)) {
    snprintf(buf, cap, "?");
    return;
  }
  snprintf(buf, cap, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
}

plait_result_t plait_net_accept(int listen_fd, int *fd_out, char *peer, size_t peer_cap) {
  *fd_out = -1;
  int fd;
  PLAIT_RETRY_EINTR(fd, accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC));
  if (fd >= 0) {
    set_flags(fd);
    plait_net_peer_name(fd, peer, peer_cap);
    *fd_out = fd;
    return PLAIT_SUCCESS;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EPROTO)
    return PLAIT_SUCCESS;
  return plait_error(PLAIT_ERR_SYSTEM, "accept failed: %s", strerror(errno));
}

plait_io_t plait_net_read_full(int fd, void *buf, size_t n, double deadline) {
  char *p = buf;
  while (n > 0) {
    ssize_t r;
    PLAIT_RETRY_EINTR(r, recv(fd, p, n, 0));
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0) return PLAIT_IO_EOF;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return PLAIT_IO_ERROR;
    int w = wait_fd(fd, POLLIN, deadline);
    if (w == 0) return PLAIT_IO_TIMEOUT;
    if (w < 0) return PLAIT_IO_ERROR;
  }
  return PLAIT_IO_OK;
}

plait_io_t plait_net_write_full(int fd, const void *buf, size_t n, double deadline) {
  const char *p = buf;
  while (n > 0) {
    ssize_t r;
    PLAIT_RETRY_EINTR(r, send(fd, p, n, MSG_NOSIGNAL));
    if (r >= 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (errno == EPIPE) return PLAIT_IO_EOF;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return PLAIT_IO_ERROR;
    int w = wait_fd(fd, POLLOUT, deadline);
    if (w == 0) return PLAIT_IO_TIMEOUT;
    if (w < 0) return PLAIT_IO_ERROR;
  }
  return PLAIT_IO_OK;
}

plait_result_t plait_net_local_ip(int fd, char *buf, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len))
    return plait_error(PLAIT_ERR_SYSTEM, "getsockname failed: %s", strerror(errno));
  int rc = getnameinfo((struct sockaddr *)&ss, len, buf, (socklen_t)cap, NULL, 0, NI_NUMERICHOST);
  if (rc) return plait_error(PLAIT_ERR_SYSTEM, "getnameinfo failed: %s", gai_strerror(rc));
  return PLAIT_SUCCESS;
}

int plait_net_local_port(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len)) return 0;
  if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  return 0;
}

void plait_net_close(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}
