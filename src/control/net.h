/* Internal: TCP socket helpers with deadlines (monotonic seconds). Every
 * call retries EINTR and never raises SIGPIPE. */
#ifndef PLAIT_NET_H
#define PLAIT_NET_H

#include <stddef.h>

#include "plait/plait.h"
#include "util/clock.h" /* deadlines are plait_now() seconds */

/* Parses "host:port" or "[v6addr]:port". PLAIT_ERR_CONFIG naming `what` and
 * the text on bad input. */
plait_result_t plait_net_parse_hostport(const char *text, const char *what, char *host,
                                        size_t host_cap, int *port);

/* Writes "host:port", or "[host]:port" when host is an IPv6 address (it
 * holds a ':'), the form plait_net_parse_hostport reads back. */
void plait_net_format_hostport(const char *host, int port, char *buf, size_t cap);

/* Binds exactly host:port (the interface given, not all) and listens;
 * non-blocking, close-on-exec. */
plait_result_t plait_net_listen(const char *host, int port, int *fd);

/* One connection attempt to host:port, giving up at deadline. On failure
 * *transient tells whether retrying may help (refused, unreachable, timed
 * out). */
plait_result_t plait_net_connect(const char *host, int port, double deadline, int *fd,
                                 int *transient);

/* Accepts one pending connection (non-blocking); *fd = -1 when none. peer
 * receives "addr:port" text. */
plait_result_t plait_net_accept(int listen_fd, int *fd, char *peer, size_t peer_cap);

typedef enum {
  PLAIT_IO_OK = 0,
  PLAIT_IO_EOF = 1,     /* the peer closed the connection */
  PLAIT_IO_TIMEOUT = 2, /* the deadline passed */
  PLAIT_IO_ERROR = 3    /* errno says why (ECONNRESET, ...) */
} plait_io_t;

/* Reads / writes exactly n bytes before deadline (<= 0: no deadline). */
plait_io_t plait_net_read_full(int fd, void *buf, size_t n, double deadline);
plait_io_t plait_net_write_full(int fd, const void *buf, size_t n, double deadline);

/* Numeric IP of the local end of a connected socket. */
plait_result_t plait_net_local_ip(int fd, char *buf, size_t cap);
/* Port of the local end of a bound socket; 0 when it cannot be read. */
int plait_net_local_port(int fd);
/* Numeric "ip:port" of the remote end. */
void plait_net_peer_name(int fd, char *buf, size_t cap);

void plait_net_close(int *fd);

#endif
