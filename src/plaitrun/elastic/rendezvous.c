/* plaitrun's elastic driver, rendezvous side (rendezvous.h): a non-blocking
 * server with one small state machine per connection:
 *   AUTH     challenge sent; waiting for the worker's proof (bounded)
 *   REQUEST  proven both ways; waiting for JOIN or POLL (bounded)
 *   PENDING  a JOIN waiting for the driver's ASSIGN or STOP (unbounded: the
 *            driver decides; the worker closing removes it)
 * The frames, their limits and the handshake are libplait's (control/
 * elastic_wire.h, control/auth.h), linked in through plait_base. */
#include "rendezvous.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/auth.h"
#include "control/elastic_wire.h"
#include "control/messages.h"
#include "control/net.h"
#include "util/clock.h"
#include "util/eintr.h"
#include "util/error.h"

#include <plait/elastic.h>

_Static_assert(PLAITRUN_WORKER_NAME_MAX == PLAIT_EL_WORKER_MAX, "worker name limits agree");
_Static_assert(PLAITRUN_ADDR_MAX == PLAIT_EL_ADDR_MAX, "address limits agree");
_Static_assert(PLAITRUN_LOST_MAX == PLAIT_EL_LOST_MAX, "lost rank limits agree");

#define MAX_CONN 256       /* open connections, pending JOINs included */
#define HANDSHAKE_S 5.0    /* a connection proves itself and asks within this */
#define SEND_S 1.0         /* our frames are small: a peer that takes none is dropped */
#define REFUSALS_IN_FULL 20 /* refusals logged one line each; then every 100th */

typedef enum { C_FREE = 0, C_AUTH, C_REQUEST, C_PENDING } cstate_t;

typedef struct {
  int fd;
  cstate_t st;
  double deadline; /* AUTH and REQUEST only */
  uint8_t snonce[PLAIT_WIRE_NONCE_SIZE];
  uint8_t hdr[PLAIT_WIRE_HEADER_SIZE];
  size_t got;      /* bytes of the current frame received */
  uint32_t length; /* its payload length, once the header is in */
  uint8_t *payload;
  char peer[80];
  plaitrun_rdv_join_t join; /* PENDING */
} conn_t;

struct plaitrun_rdv {
  int listen_fd;
  char address[PLAITRUN_ADDR_MAX];
  char *secret;
  conn_t conns[MAX_CONN];
  uint64_t epoch, timestamp; /* set_updates */
  unsigned update;
  unsigned long refusals;
};

static void conn_reset_frame(conn_t *c) {
  free(c->payload);
  c->payload = NULL;
  c->got = 0;
  c->length = 0;
}

static void conn_close(conn_t *c) {
  plait_net_close(&c->fd);
  conn_reset_frame(c);
  c->st = C_FREE;
}

static int send_frame(conn_t *c, plait_writer_t *w, plait_result_t rc) {
  int ok = rc == PLAIT_SUCCESS &&
           plait_net_write_full(c->fd, w->data, w->len, plait_now() + SEND_S) == PLAIT_IO_OK;
  plait_wr_free(w);
  return ok ? 0 : -1;
}

/* Refuses a connection: logs it naming the peer (the first
 * REFUSALS_IN_FULL, then every 100th with the count), tells the peer why
 * when it got that far, closes it. */
static void refuse(plaitrun_rdv_t *r, conn_t *c, int tell, const char *why) {
  r->refusals++;
  if (r->refusals <= REFUSALS_IN_FULL || r->refusals % 100 == 0)
    fprintf(stderr, "plaitrun elastic: refused connection from %s: %s%s\n", c->peer, why,
            r->refusals == REFUSALS_IN_FULL ? " (later refusals: every 100th is logged)" : "");
  if (tell) {
    plait_writer_t w = {0};
    send_frame(c, &w, plait_msg_encode_reject(&w, why));
  }
  conn_close(c);
}

int plaitrun_rdv_open(plaitrun_rdv_t **out, const char *bind_host, const char *secret, char *err,
                      size_t err_size) {
  *out = NULL;
  if (!secret || !*secret) {
    snprintf(err, err_size, "the elastic rendezvous needs the job secret (PLAIT_SECRET)");
    return -1;
  }
  plaitrun_rdv_t *r = calloc(1, sizeof *r);
  if (!r || !(r->secret = strdup(secret))) {
    free(r);
    snprintf(err, err_size, "out of memory opening the elastic rendezvous");
    return -1;
  }
  for (int i = 0; i < MAX_CONN; i++) r->conns[i].fd = -1;
  char ip[64];
  if (plait_net_listen(bind_host, 0, &r->listen_fd) ||
      plait_net_local_ip(r->listen_fd, ip, sizeof ip)) {
    snprintf(err, err_size, "elastic rendezvous on %s: %s", bind_host, plait_error_message());
    plaitrun_rdv_close(r);
    return -1;
  }
  plait_net_format_hostport(ip, plait_net_local_port(r->listen_fd), r->address,
                            sizeof r->address);
  *out = r;
  return 0;
}

const char *plaitrun_rdv_address(const plaitrun_rdv_t *r) { return r->address; }

int plaitrun_rdv_pollfds(const plaitrun_rdv_t *r, struct pollfd *fds, int cap) {
  int k = 0;
  if (k < cap) fds[k++] = (struct pollfd){r->listen_fd, POLLIN, 0};
  for (int i = 0; i < MAX_CONN && k < cap; i++)
    if (r->conns[i].st != C_FREE) fds[k++] = (struct pollfd){r->conns[i].fd, POLLIN, 0};
  return k;
}

/* A free slot; when all are taken, the oldest handshake gives way. */
static conn_t *free_slot(plaitrun_rdv_t *r) {
  conn_t *oldest = NULL;
  for (int i = 0; i < MAX_CONN; i++) {
    conn_t *c = &r->conns[i];
    if (c->st == C_FREE) return c;
    if (c->st != C_PENDING && (!oldest || c->deadline < oldest->deadline)) oldest = c;
  }
  if (oldest) refuse(r, oldest, 0, "replaced by a newer connection: every slot was taken");
  return oldest;
}

static void accept_new(plaitrun_rdv_t *r) {
  for (;;) {
    int fd;
    char peer[80];
    if (plait_net_accept(r->listen_fd, &fd, peer, sizeof peer) || fd < 0) return;
    conn_t *c = free_slot(r);
    if (!c) { /* every slot holds a JOIN the driver has not answered */
      fprintf(stderr, "plaitrun elastic: refused connection from %s: %d JOINs are waiting\n",
              peer, MAX_CONN);
      close(fd);
      continue;
    }
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->st = C_AUTH;
    c->deadline = plait_now() + HANDSHAKE_S;
    snprintf(c->peer, sizeof c->peer, "%s", peer);
    plait_msg_hello_t hello;
    plait_writer_t w = {0};
    if (plait_auth_nonce(hello.nonce) ||
        (memcpy(c->snonce, hello.nonce, sizeof c->snonce),
         send_frame(c, &w, plait_msg_encode_hello(&w, &hello))))
      refuse(r, c, 0, "could not send the challenge");
  }
}

/* AUTH: checks the worker's proof, proves ours. */
static void on_auth(plaitrun_rdv_t *r, conn_t *c) {
  plait_msg_auth_t m;
  if (plait_msg_decode_auth(c->payload, c->length, &m)) {
    refuse(r, c, 0, plait_error_message());
    return;
  }
  if (!plait_auth_verify_epoch(r->secret, PLAIT_AUTH_ELASTIC_WORKER, c->snonce, m.nonce, m.rank,
                               m.size, m.epoch, m.mac)) {
    refuse(r, c, 1, "authentication failed: the worker does not know this job's PLAIT_SECRET");
    return;
  }
  plait_msg_welcome_t welcome;
  plait_writer_t w = {0};
  plait_result_t rc = plait_auth_mac_epoch(r->secret, PLAIT_AUTH_ELASTIC_DRIVER, c->snonce,
                                           m.nonce, m.rank, m.size, m.epoch, welcome.mac);
  if (rc == PLAIT_SUCCESS) rc = plait_msg_encode_welcome(&w, &welcome);
  if (send_frame(c, &w, rc)) {
    refuse(r, c, 0, "could not send the driver's proof");
    return;
  }
  c->st = C_REQUEST;
  c->deadline = plait_now() + HANDSHAKE_S;
}

static conn_t *find_pending(plaitrun_rdv_t *r, const char *worker) {
  for (int i = 0; i < MAX_CONN; i++)
    if (r->conns[i].st == C_PENDING && !strcmp(r->conns[i].join.worker, worker))
      return &r->conns[i];
  return NULL;
}

static void on_join(plaitrun_rdv_t *r, conn_t *c) {
  plait_el_join_t m;
  if (plait_el_decode_join(c->payload, c->length, &m)) {
    refuse(r, c, 0, plait_error_message());
    return;
  }
  conn_t *old = find_pending(r, m.worker);
  if (old) conn_close(old); /* the same worker asking again: its newest JOIN counts */
  plaitrun_rdv_join_t *j = &c->join;
  memset(j, 0, sizeof *j);
  snprintf(j->worker, sizeof j->worker, "%s", m.worker);
  snprintf(j->rendezvous, sizeof j->rendezvous, "%s", m.rendezvous);
  j->last_epoch = m.last_epoch;
  j->n_lost = (int)m.n_lost;
  for (uint32_t i = 0; i < m.n_lost; i++) j->lost[i] = m.lost[i];
  c->st = C_PENDING;
}

static void on_poll(plaitrun_rdv_t *r, conn_t *c) {
  uint64_t epoch;
  if (plait_el_decode_poll(c->payload, c->length, &epoch)) {
    refuse(r, c, 0, plait_error_message());
    return;
  }
  /* a worker of another job than the current one: its job is gone */
  plait_el_updates_t u = {r->timestamp, epoch == r->epoch ? r->update : PLAIT_HOSTS_REMOVED};
  plait_writer_t w = {0};
  send_frame(c, &w, plait_el_encode_updates(&w, &u));
  conn_close(c); /* answered: one request per connection */
}

/* A whole frame is in: what it means depends on the connection's state. */
static void on_frame(plaitrun_rdv_t *r, conn_t *c, uint16_t type) {
  char why[128];
  if (c->st == C_AUTH && type == PLAIT_MSG_AUTH) {
    on_auth(r, c);
  } else if (c->st == C_REQUEST && type == PLAIT_MSG_EL_JOIN) {
    on_join(r, c);
  } else if (c->st == C_REQUEST && type == PLAIT_MSG_EL_POLL) {
    on_poll(r, c);
  } else {
    snprintf(why, sizeof why, "message type %u where %s was expected", type,
             c->st == C_AUTH ? "an authentication" : c->st == C_REQUEST ? "JOIN or POLL"
                                                                        : "nothing");
    refuse(r, c, 0, why);
    return;
  }
  if (c->st != C_FREE) conn_reset_frame(c);
}

/* Reads what is available: frames are bounded (PLAIT_EL_MAX_PAYLOAD). */
static void serve(plaitrun_rdv_t *r, conn_t *c) {
  while (c->st != C_FREE) {
    size_t want = c->got < PLAIT_WIRE_HEADER_SIZE ? PLAIT_WIRE_HEADER_SIZE - c->got
                                                  : PLAIT_WIRE_HEADER_SIZE + c->length - c->got;
    plait_frame_header_t h = {0, 0, 0};
    if (want) {
      uint8_t *dst = c->got < PLAIT_WIRE_HEADER_SIZE
                         ? c->hdr + c->got
                         : c->payload + (c->got - PLAIT_WIRE_HEADER_SIZE);
      ssize_t n;
      PLAIT_RETRY_EINTR(n, read(c->fd, dst, want));
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) { /* a waiting worker that gives up closes: not a refusal */
        if (c->st == C_PENDING) conn_close(c);
        else refuse(r, c, 0, n == 0 ? "closed before its request was complete" : strerror(errno));
        return;
      }
      c->got += (size_t)n;
      if (c->got != PLAIT_WIRE_HEADER_SIZE) continue;
      if (plait_wire_decode_header(c->hdr, PLAIT_EL_MAX_PAYLOAD, &h)) {
        refuse(r, c, 0, plait_error_message());
        return;
      }
      c->length = h.length;
      if (!(c->payload = malloc(h.length ? h.length : 1))) {
        refuse(r, c, 0, "out of memory");
        return;
      }
      if (h.length) continue;
    }
    on_frame(r, c, plait_load_le32(c->hdr + 4) >> 16);
  }
}

void plaitrun_rdv_service(plaitrun_rdv_t *r, const struct pollfd *fds, int n) {
  for (int k = 0; k < n; k++) {
    if (!fds[k].revents) continue;
    if (fds[k].fd == r->listen_fd) {
      accept_new(r);
      continue;
    }
    for (int i = 0; i < MAX_CONN; i++)
      if (r->conns[i].st != C_FREE && r->conns[i].fd == fds[k].fd) serve(r, &r->conns[i]);
  }
  double now = plait_now();
  for (int i = 0; i < MAX_CONN; i++) {
    conn_t *c = &r->conns[i];
    if ((c->st == C_AUTH || c->st == C_REQUEST) && now > c->deadline)
      refuse(r, c, 0, c->st == C_AUTH ? "did not authenticate within 5 s"
                                      : "sent no request within 5 s of authenticating");
  }
}

int plaitrun_rdv_pending(const plaitrun_rdv_t *r, plaitrun_rdv_join_t *out, int cap) {
  int k = 0;
  for (int i = 0; i < MAX_CONN && k < cap; i++)
    if (r->conns[i].st == C_PENDING) out[k++] = r->conns[i].join;
  return k;
}

/* Sends a finished answer to worker's pending JOIN and closes it. */
static int answer(plaitrun_rdv_t *r, const char *worker, plait_writer_t *w, plait_result_t rc) {
  conn_t *c = worker ? find_pending(r, worker) : NULL;
  int sent = c ? send_frame(c, w, rc) : (plait_wr_free(w), -1);
  if (c) conn_close(c);
  return sent;
}

int plaitrun_rdv_assign(plaitrun_rdv_t *r, const char *worker, const plaitrun_rdv_assign_t *a) {
  plait_el_assign_t m = {a->epoch, a->rank, a->size, a->local_rank, a->local_size,
                         a->cross_rank, a->cross_size, ""};
  snprintf(m.rendezvous, sizeof m.rendezvous, "%s", a->rendezvous);
  plait_writer_t w = {0};
  return answer(r, worker, &w, plait_el_encode_assign(&w, &m));
}

int plaitrun_rdv_stop(plaitrun_rdv_t *r, const char *worker, const char *reason) {
  plait_writer_t w = {0};
  return answer(r, worker, &w, plait_el_encode_stop(&w, reason));
}

void plaitrun_rdv_set_updates(plaitrun_rdv_t *r, uint64_t epoch, uint64_t timestamp,
                              unsigned update) {
  r->epoch = epoch;
  r->timestamp = timestamp;
  r->update = update;
}

void plaitrun_rdv_close(plaitrun_rdv_t *r) {
  if (!r) return;
  for (int i = 0; i < MAX_CONN; i++)
    if (r->conns[i].st != C_FREE) conn_close(&r->conns[i]);
  plait_net_close(&r->listen_fd);
  free(r->secret);
  free(r);
}
