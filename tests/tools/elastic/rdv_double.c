/*
 * A test double of plaitrun's rendezvous server (src/plaitrun/elastic/
 * rendezvous.h), for the driver loop's tests only (test_plaitrun_elastic_loop
 * links it instead of the real server): plain text lines over TCP on
 * 127.0.0.1, no authentication, so that a bash worker (fake_worker.sh) can
 * speak it through /dev/tcp:
 *   worker: "JOIN <name> <last_epoch> <addr:port> [lost,lost,...]"
 *   server: "ASSIGN <epoch> <rank> <size> <lr> <ls> <cr> <cs> <rendezvous>" or "STOP <reason>"
 *   worker: "POLL"  ->  server: "UPDATES <timestamp> <bits>"
 */
#include "plaitrun/elastic/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNS 256

typedef struct {
  int fd;
  char buf[512];
  size_t len;
  int joined;
  plaitrun_rdv_join_t join;
} conn_t;

struct plaitrun_rdv {
  int listen_fd;
  char address[64];
  conn_t conns[CONNS];
  uint64_t epoch, timestamp;
  unsigned update;
};

int plaitrun_rdv_open(plaitrun_rdv_t **out, const char *bind_host, const char *secret, char *err,
                      size_t err_size) {
  (void)bind_host;
  (void)secret;
  plaitrun_rdv_t *r = calloc(1, sizeof *r);
  for (int i = 0; r && i < CONNS; i++) r->conns[i].fd = -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (!r || (r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
      bind(r->listen_fd, (struct sockaddr *)&a, sizeof a) || listen(r->listen_fd, 64) ||
      getsockname(r->listen_fd, (struct sockaddr *)&a, &len)) {
    snprintf(err, err_size, "double: %s", strerror(errno));
    free(r);
    return -1;
  }
  snprintf(r->address, sizeof r->address, "127.0.0.1:%d", ntohs(a.sin_port));
  *out = r;
  return 0;
}

const char *plaitrun_rdv_address(const plaitrun_rdv_t *r) { return r->address; }

int plaitrun_rdv_pollfds(const plaitrun_rdv_t *r, struct pollfd *fds, int cap) {
  int k = 0;
  fds[k++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
  for (int i = 0; i < CONNS && k < cap; i++)
    if (r->conns[i].fd >= 0) fds[k++] = (struct pollfd){.fd = r->conns[i].fd, .events = POLLIN};
  return k;
}

static void drop(conn_t *c) {
  close(c->fd);
  c->fd = -1;
  c->len = 0;
  c->joined = 0;
}

static void reply(conn_t *c, const char *text) {
  ssize_t w = write(c->fd, text, strlen(text));
  (void)w;
}

static void take_line(plaitrun_rdv_t *r, conn_t *c, char *line) {
  char lost[256] = "";
  plaitrun_rdv_join_t *j = &c->join;
  unsigned long long last = 0;
  if (!strcmp(line, "POLL")) {
    char text[64];
    snprintf(text, sizeof text, "UPDATES %llu %u\n", (unsigned long long)r->timestamp,
             r->update);
    reply(c, text);
    return;
  }
  memset(j, 0, sizeof *j);
  if (sscanf(line, "JOIN %127s %llu %95s %255s", j->worker, &last, j->rendezvous, lost) < 3) {
    drop(c);
    return;
  }
  j->last_epoch = last;
  for (char *p = strtok(lost, ","); p && j->n_lost < PLAITRUN_LOST_MAX; p = strtok(NULL, ","))
    j->lost[j->n_lost++] = atoi(p);
  c->joined = 1;
}

static void read_conn(plaitrun_rdv_t *r, conn_t *c) {
  ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
  if (n <= 0) {
    drop(c);
    return;
  }
  c->len += (size_t)n;
  c->buf[c->len] = '\0';
  char *nl;
  while (c->fd >= 0 && (nl = strchr(c->buf, '\n'))) {
    *nl = '\0';
    take_line(r, c, c->buf);
    size_t used = (size_t)(nl + 1 - c->buf);
    memmove(c->buf, nl + 1, c->len - used + 1);
    c->len -= used;
  }
}

void plaitrun_rdv_service(plaitrun_rdv_t *r, const struct pollfd *fds, int n) {
  for (int k = 0; k < n; k++) {
    if (!fds[k].revents) continue;
    if (fds[k].fd == r->listen_fd) {
      int fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
      for (int i = 0; fd >= 0 && i < CONNS; i++)
        if (r->conns[i].fd < 0) {
          r->conns[i].fd = fd;
          fd = -1;
        }
      if (fd >= 0) close(fd);
      continue;
    }
    for (int i = 0; i < CONNS; i++)
      if (r->conns[i].fd == fds[k].fd) read_conn(r, &r->conns[i]);
  }
}

int plaitrun_rdv_pending(const plaitrun_rdv_t *r, plaitrun_rdv_join_t *out, int cap) {
  int k = 0;
  for (int i = 0; i < CONNS && k < cap; i++)
    if (r->conns[i].fd >= 0 && r->conns[i].joined) out[k++] = r->conns[i].join;
  return k;
}

static conn_t *find(plaitrun_rdv_t *r, const char *worker) {
  for (int i = 0; i < CONNS; i++)
    if (r->conns[i].fd >= 0 && r->conns[i].joined && !strcmp(r->conns[i].join.worker, worker))
      return &r->conns[i];
  return NULL;
}

int plaitrun_rdv_assign(plaitrun_rdv_t *r, const char *worker, const plaitrun_rdv_assign_t *a) {
  conn_t *c = find(r, worker);
  if (!c) return -1;
  char text[256];
  snprintf(text, sizeof text, "ASSIGN %llu %d %d %d %d %d %d %s\n", (unsigned long long)a->epoch,
           a->rank, a->size, a->local_rank, a->local_size, a->cross_rank, a->cross_size,
           a->rendezvous);
  reply(c, text);
  drop(c);
  return 0;
}

int plaitrun_rdv_stop(plaitrun_rdv_t *r, const char *worker, const char *reason) {
  conn_t *c = find(r, worker);
  if (!c) return -1;
  char text[256];
  snprintf(text, sizeof text, "STOP %s\n", reason);
  reply(c, text);
  drop(c);
  return 0;
}

void plaitrun_rdv_set_updates(plaitrun_rdv_t *r, uint64_t epoch, uint64_t timestamp,
                              unsigned update) {
  r->epoch = epoch;
  r->timestamp = timestamp;
  r->update = update;
}

void plaitrun_rdv_close(plaitrun_rdv_t *r) {
  if (!r) return;
  for (int i = 0; i < CONNS; i++)
    if (r->conns[i].fd >= 0) close(r->conns[i].fd);
  close(r->listen_fd);
  free(r);
}
