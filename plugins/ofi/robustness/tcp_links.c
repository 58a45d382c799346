#include "robustness/tcp_links.h"

#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ofi_tcp_name(const void *sockaddr, size_t len, ofi_tcp_name_t *n) {
  memset(n, 0, sizeof *n);
  const struct sockaddr *sa = sockaddr;
  if (!sa || len < sizeof(struct sockaddr_in)) return;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = sockaddr;
    n->ip[10] = n->ip[11] = 0xff; /* ::ffff:a.b.c.d, as tcp6 shows it */
    memcpy(n->ip + 12, &in->sin_addr, 4);
    n->port = ntohs(in->sin_port);
    n->valid = 1;
  } else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    const struct sockaddr_in6 *in6 = sockaddr;
    memcpy(n->ip, &in6->sin6_addr, 16);
    n->port = ntohs(in6->sin6_port);
    n->valid = 1;
  }
}

/* "0100007F:1F90" (tcp: the address as the kernel's 32-bit word in this
 * machine's order) or 32 hex digits in four such words (tcp6). */
static int parse_end(const char *s, int v6, unsigned char ip[16], unsigned *port) {
  memset(ip, 0, 16);
  int words = v6 ? 4 : 1;
  for (int w = 0; w < words; w++) {
    char hex[9];
    memcpy(hex, s + 8 * w, 8);
    hex[8] = '\0';
    char *end;
    uint32_t word = (uint32_t)strtoul(hex, &end, 16);
    if (end != hex + 8) return -1;
    memcpy(ip + (v6 ? 4 * w : 12), &word, 4);
  }
  if (!v6) ip[10] = ip[11] = 0xff;
  if (s[8 * words] != ':') return -1;
  *port = (unsigned)strtoul(s + 8 * words + 1, NULL, 16);
  return 0;
}

/* The peer has not closed: ESTABLISHED 1, SYN_SENT 2, SYN_RECV 3,
 * FIN_WAIT1 4, FIN_WAIT2 5 (include/net/tcp_states.h). */
static int open_state(unsigned st) { return st >= 1 && st <= 5; }

static int scan(const char *path, int v6, const ofi_tcp_name_t *self,
                const ofi_tcp_name_t *peer) {
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  char line[512], local[64], remote[64];
  unsigned state;
  int links = 0;
  if (!fgets(line, sizeof line, f)) line[0] = '\0'; /* the header */
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, " %*d: %63s %63s %x", local, remote, &state) != 3) continue;
    unsigned char lip[16], rip[16];
    unsigned lport, rport;
    if (!open_state(state) || parse_end(local, v6, lip, &lport) ||
        parse_end(remote, v6, rip, &rport) || memcmp(rip, peer->ip, 16) != 0)
      continue;
    if (rport == peer->port || lport == self->port) links++;
  }
  fclose(f);
  return links;
}

int ofi_tcp_links(const ofi_tcp_name_t *self, const ofi_tcp_name_t *peer) {
  if (!self->valid || !peer->valid) return -1;
  int v4 = scan("/proc/net/tcp", 0, self, peer), v6 = scan("/proc/net/tcp6", 1, self, peer);
  if (v4 < 0 && v6 < 0) return -1;
  return (v4 > 0 ? v4 : 0) + (v6 > 0 ? v6 : 0);
}
