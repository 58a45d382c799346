/*
 * Whether a TCP connection between this network namespace and a peer's
 * endpoint is still open, read from /proc/net/tcp and /proc/net/tcp6: how a
 * parked rxm endpoint (parked.h) learns that a peer whose pid it cannot check
 * (on another host, or in another pid namespace) is gone. A peer killed or
 * exited closes its sockets, and its host's kernel sends FIN or RST: this
 * end's sockets then leave ESTABLISHED (CLOSE_WAIT, or gone). A peer that is
 * only stopped (SIGSTOP), or whose host went silent, keeps them ESTABLISHED
 * (until TCP gives up retransmitting), so its endpoint stays parked.
 */
#ifndef PLAIT_OFI_TCP_LINKS_H
#define PLAIT_OFI_TCP_LINKS_H

#include <sys/socket.h>

/* An endpoint's address as 16 bytes of IPv6 (IPv4 mapped) and a port. */
typedef struct ofi_tcp_name {
  unsigned char ip[16];
  unsigned port;
  int valid; /* 0: not an IP address (another provider): no verdict */
} ofi_tcp_name_t;

/* Fills n from a sockaddr_in or sockaddr_in6 (else n->valid = 0). */
void ofi_tcp_name(const void *sockaddr, size_t len, ofi_tcp_name_t *n);

/* How many TCP connections of this network namespace join `peer` and this
 * end: sockets whose remote end is peer's address (connected to it), or
 * whose remote IP is peer's and local port is self's (accepted on self),
 * in a state where the peer has not closed (ESTABLISHED, SYN_SENT,
 * SYN_RECV, FIN_WAIT1, FIN_WAIT2). -1 when neither table can be read or a
 * name is not valid: no verdict. */
int ofi_tcp_links(const ofi_tcp_name_t *self, const ofi_tcp_name_t *peer);

#endif
