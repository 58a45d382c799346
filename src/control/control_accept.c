/* Rank 0's side of joining: accept, challenge, verify, admit or refuse.
 * Connections are served concurrently with poll(), so a client that sends
 * garbage or nothing at all cannot hold up the real ranks. Admission is fair:
 * an unauthenticated connection has a short deadline, and when every slot is
 * taken a new connection replaces the oldest one that has sent nothing (else
 * the oldest), so idle connections held open cannot keep a real rank out.
 * Refusals are logged in full for the first few, then as counted summaries. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/auth.h"
#include "control/control.h"
#include "util/eintr.h"
#include "util/error.h"
#include "util/log.h"
#include "control/messages.h"
#include "control/net.h"

#define MAX_PENDING 64
#define HANDSHAKE_S 3.0 /* a connection must authenticate within this */
#define REFUSALS_IN_FULL 5 /* refusals logged one line each, then summaries */
#define REFUSAL_SUMMARY_S 5.0 /* at most one summary line per this long */
#define BEAT_MAX_S 1.0 /* ranks that joined hear from rank 0 at least this often */

typedef struct {
  int fd;
  double accepted, deadline;
  uint8_t nonce[PLAIT_WIRE_NONCE_SIZE];
  uint8_t hdr[PLAIT_WIRE_HEADER_SIZE];
  size_t got;      /* bytes of header + payload received */
  uint32_t length; /* payload length once the header is in */
  uint8_t *payload;
  char peer[80];
} pending_t;

/* Refusals: the first REFUSALS_IN_FULL are logged one line each; later ones
 * are counted and summarised at most once per REFUSAL_SUMMARY_S. */
typedef struct {
  unsigned long total, unlogged;
  double since; /* start of the current summary window */
  char last[200];
} refusals_t;

typedef struct {
  char (*hosts)[PLAIT_HOST_MAX];
  int *lr, *ls;
  int joined;
  refusals_t refusals;
} admit_t;

static void refusals_flush(refusals_t *r, double now) {
  if (!r->unlogged) return;
  PLAIT_WARN("ctrl", "refused %lu more connection(s) in the last %.0f s (%lu in all; latest: %s)",
             r->unlogged, now - r->since, r->total, r->last);
  r->unlogged = 0;
  r->since = now;
}

static void refusals_note(refusals_t *r, const char *peer, const char *why) {
  double now = plait_now();
  r->total++;
  if (r->total <= REFUSALS_IN_FULL) {
    PLAIT_WARN("ctrl", "refused connection from %s: %s%s", peer, why,
               r->total == REFUSALS_IN_FULL ? " (further refusals are counted and summarised)"
                                            : "");
    r->since = now;
    return;
  }
  snprintf(r->last, sizeof r->last, "from %s: %s", peer, why);
  r->unlogged++;
  if (now - r->since >= REFUSAL_SUMMARY_S) refusals_flush(r, now);
}

static void drop(pending_t *p) {
  plait_net_close(&p->fd);
  free(p->payload);
  p->payload = NULL;
}

/* Refuses a connection: logs why (rate-limited), tells the client (when it
 * got that far), closes it. The job goes on. */
static void refuse(admit_t *a, pending_t *p, int tell, const char *why) {
  refusals_note(&a->refusals, p->peer, why);
  if (tell) {
    plait_writer_t w = {0};
    if (plait_msg_encode_reject(&w, why) == PLAIT_SUCCESS)
      plait_net_write_full(p->fd, w.data, w.len, plait_now() + 1.0);
    plait_wr_free(&w);
  }
  drop(p);
}

static int send_hello(pending_t *p) {
  plait_msg_hello_t m;
  if (plait_auth_nonce(m.nonce)) return -1;
  memcpy(p->nonce, m.nonce, sizeof m.nonce);
  plait_writer_t w = {0};
  int ok = plait_msg_encode_hello(&w, &m) == PLAIT_SUCCESS &&
           plait_net_write_full(p->fd, w.data, w.len, plait_now() + 1.0) == PLAIT_IO_OK;
  plait_wr_free(&w);
  return ok ? 0 : -1;
}

/* Checks a complete AUTH frame; admits the rank or refuses the connection. */
static void process_auth(plait_control_t *c, pending_t *p, admit_t *a) {
  plait_msg_auth_t m;
  char why[256];
  if (plait_msg_decode_auth(p->payload, p->length, &m)) {
    refuse(a, p, 0, plait_last_error());
    return;
  }
  uint32_t rank = m.rank, size = m.size;
  const uint8_t *cnonce = m.nonce;
  if (m.epoch != c->epoch) {
    snprintf(why, sizeof why, "elastic epoch mismatch: the client is of epoch %llu, rank 0 of "
             "epoch %llu (%s)", (unsigned long long)m.epoch, (unsigned long long)c->epoch,
             m.epoch < c->epoch ? "a late worker of an earlier elastic job"
                                : "rank 0 is of an earlier elastic job");
    refuse(a, p, 1, why);
    return;
  }
  if (!plait_auth_verify_epoch(c->secret, PLAIT_AUTH_CLIENT, p->nonce, cnonce, rank, size,
                               c->epoch, m.mac)) {
    refuse(a, p, 1, "authentication failed: the client does not know this job's PLAIT_SECRET");
    return;
  }
  if (size != (uint32_t)c->size) {
    snprintf(why, sizeof why, "job size mismatch: the client says %u ranks, rank 0 says %d", size,
             c->size);
    refuse(a, p, 1, why);
    return;
  }
  if (rank == 0 || rank >= size) {
    snprintf(why, sizeof why, "rank %u is not a valid peer rank in a job of %u", rank, size);
    refuse(a, p, 1, why);
    return;
  }
  if (c->fds[rank] >= 0) {
    snprintf(why, sizeof why, "rank %u has already joined (duplicate rank)", rank);
    refuse(a, p, 1, why);
    return;
  }
  plait_msg_welcome_t welcome;
  plait_writer_t w = {0};
  int ok = plait_auth_mac_epoch(c->secret, PLAIT_AUTH_SERVER, p->nonce, cnonce, rank, size,
                                c->epoch, welcome.mac) == PLAIT_SUCCESS &&
           plait_msg_encode_welcome(&w, &welcome) == PLAIT_SUCCESS &&
       plait_net_write_full(p->fd, w.data, w.len, plait_now() + 1.0) == PLAIT_IO_OK;
  plait_wr_free(&w);
  if (!ok) {
    refuse(a, p, 0, "could not send the welcome");
    return;
  }
  PLAIT_DEBUG("ctrl", "rank %u joined from %s (host %s)", rank, p->peer, m.host);
  memcpy(a->hosts[rank], m.host, PLAIT_HOST_MAX);
  a->lr[rank] = m.local_rank;
  a->ls[rank] = m.local_size;
  c->fds[rank] = p->fd;
  p->fd = -1;
  drop(p);
  a->joined++;
}

/* Reads what is available on a pending connection. */
static void serve(plait_control_t *c, pending_t *p, admit_t *a) {
  for (;;) {
    size_t want = p->got < PLAIT_WIRE_HEADER_SIZE ? PLAIT_WIRE_HEADER_SIZE - p->got
                                                  : PLAIT_WIRE_HEADER_SIZE + p->length - p->got;
    if (want == 0) break;
    uint8_t *dst = p->got < PLAIT_WIRE_HEADER_SIZE
                       ? p->hdr + p->got
                       : p->payload + (p->got - PLAIT_WIRE_HEADER_SIZE);
    ssize_t n;
    PLAIT_RETRY_EINTR(n, read(p->fd, dst, want));
    if (n == 0) {
      refuse(a, p, 0, "closed before authenticating");
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      refuse(a, p, 0, strerror(errno));
      return;
    }
    p->got += (size_t)n;
    if (p->got == PLAIT_WIRE_HEADER_SIZE) {
      plait_frame_header_t h;
      if (plait_wire_decode_header(p->hdr, PLAIT_HANDSHAKE_MAX_PAYLOAD, &h)) {
        refuse(a, p, 0, plait_last_error());
        return;
      }
      if (h.type != PLAIT_MSG_AUTH) {
        refuse(a, p, 0, "first message is not an authentication");
        return;
      }
      p->length = h.length;
      p->payload = malloc(h.length ? h.length : 1);
      if (!p->payload) {
        refuse(a, p, 0, "out of memory");
        return;
      }
    }
  }
  process_auth(c, p, a);
}

static void list_missing(plait_control_t *c, char *buf, size_t cap) {
  unsigned char *pick = calloc((size_t)c->size, 1);
  if (!pick) {
    snprintf(buf, cap, "some ranks");
    return;
  }
  for (int r = 1; r < c->size; r++) pick[r] = c->fds[r] < 0;
  plait_format_ranks(buf, cap, c->size, pick);
  free(pick);
}

/* Builds the poll set: listener, pending connections, joined ranks. */
static int build_poll(plait_control_t *c, pending_t *pend, struct pollfd *pfd) {
  int k = 0;
  pfd[k++] = (struct pollfd){c->listen_fd, POLLIN, 0};
  for (int i = 0; i < MAX_PENDING; i++)
    if (pend[i].fd >= 0) pfd[k++] = (struct pollfd){pend[i].fd, POLLIN, 0};
  for (int r = 1; r < c->size; r++)
    if (c->fds[r] >= 0) pfd[k++] = (struct pollfd){c->fds[r], POLLIN, 0};
  return k;
}

/* A joined rank has nothing to say before the topology: readable means it
 * closed or broke. */
static plait_result_t check_joined(plait_control_t *c, struct pollfd *pfd, int k) {
  for (int i = 0; i < k; i++) {
    if (!pfd[i].revents) continue;
    for (int r = 1; r < c->size; r++)
      if (c->fds[r] == pfd[i].fd)
        return plait_error(PLAIT_ERR_PEER_LOST, "rank %d was lost: its connection closed while "
                           "the other ranks were joining", r);
  }
  return PLAIT_SUCCESS;
}

/* A free slot, or the one to give up for a newcomer when all are taken:
 * the oldest connection that has sent nothing, else the oldest. */
static int pick_slot(admit_t *a, pending_t *pend) {
  int oldest = -1, oldest_silent = -1;
  for (int i = 0; i < MAX_PENDING; i++) {
    if (pend[i].fd < 0) return i;
    if (oldest < 0 || pend[i].accepted < pend[oldest].accepted) oldest = i;
    if (!pend[i].got &&
        (oldest_silent < 0 || pend[i].accepted < pend[oldest_silent].accepted))
      oldest_silent = i;
  }
  int i = oldest_silent >= 0 ? oldest_silent : oldest;
  refuse(a, &pend[i], 0, "replaced by a newer connection: all unauthenticated slots were taken");
  return i;
}

static void accept_new(plait_control_t *c, pending_t *pend, admit_t *a) {
  for (;;) {
    int fd;
    char peer[80];
    if (plait_net_accept(c->listen_fd, &fd, peer, sizeof peer) || fd < 0) return;
    pending_t *p = &pend[pick_slot(a, pend)];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    snprintf(p->peer, sizeof p->peer, "%s", peer);
    p->accepted = plait_now();
    p->deadline = p->accepted + HANDSHAKE_S;
    if (send_hello(p)) refuse(a, p, 0, "could not send the challenge");
  }
}

/* The deadline for everyone to join, and what missing it means. A job started
 * by a launcher waits PLAIT_START_TIMEOUT_S for its ranks to start. In an
 * elastic job every rank was running and ready when the driver formed it, so
 * one that has not joined within PLAIT_TIMEOUT_S is as silent as a rank that
 * stops answering: it is named lost, and the job re-forms without it. */
static double join_deadline(const plait_control_t *c, double start) {
  if (!c->epoch || start + c->timeout_s >= c->start_deadline) return c->start_deadline;
  return start + c->timeout_s;
}

static plait_result_t missed(plait_control_t *c) {
  char list[512];
  list_missing(c, list, sizeof list);
  if (c->epoch && plait_now() < c->start_deadline) {
    int many = strncmp(list, "ranks", 5) == 0;
    return plait_error(PLAIT_ERR_PEER_LOST, "%s %s lost: %s not join rank 0 at %s within "
                       "PLAIT_TIMEOUT_S=%g s of elastic job %llu forming", list,
                       many ? "were" : "was", many ? "they did" : "it did", c->rendezvous,
                       c->timeout_s, (unsigned long long)c->epoch);
  }
  return plait_error(PLAIT_ERR_TIMEOUT, "%s did not join rank 0 at %s within "
                     "PLAIT_START_TIMEOUT_S", list, c->rendezvous);
}

plait_result_t plait_control_accept_all(plait_control_t *c, char (*hosts)[PLAIT_HOST_MAX],
                                        int *local_ranks, int *local_sizes) {
  char host[PLAIT_HOST_MAX];
  int port;
  PLAIT_CHECK(plait_net_parse_hostport(c->rendezvous, "rendezvous address", host, sizeof host,
                                       &port));
  if (c->listen_fd < 0) /* an elastic rank 0 bound it before asking the driver */
    PLAIT_CHECK(plait_net_listen(host, port, &c->listen_fd));
  snprintf(c->local_ip, sizeof c->local_ip, "%.63s", host);
  plait_net_local_ip(c->listen_fd, c->local_ip, sizeof c->local_ip);
  PLAIT_DEBUG("ctrl", "rank 0 listening on %s for %d ranks", c->rendezvous, c->size - 1);

  pending_t pend[MAX_PENDING];
  for (int i = 0; i < MAX_PENDING; i++) pend[i].fd = -1, pend[i].payload = NULL;
  struct pollfd *pfd = malloc(sizeof *pfd * (size_t)(1 + MAX_PENDING + c->size));
  if (!pfd) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory accepting ranks");
  admit_t a = {hosts, local_ranks, local_sizes, 0, {0}};
  plait_result_t rc = PLAIT_SUCCESS;
  double start = plait_now(), deadline = join_deadline(c, start);
  /* Ranks that joined wait for the topology; they blame rank 0 after 2 x
   * PLAIT_TIMEOUT_S of silence, so rank 0 beats while it waits for the rest
   * and a rank that is slow to come is named, never rank 0. */
  double beat_every = c->timeout_s / 4 < BEAT_MAX_S ? c->timeout_s / 4 : BEAT_MAX_S;
  double next_beat = start + beat_every;
  while (a.joined < c->size - 1) {
    double now = plait_now();
    if (now >= deadline) {
      rc = missed(c);
      break;
    }
    if (a.joined && now >= next_beat) {
      plait_control_send_heartbeat(c);
      next_beat = now + beat_every;
    }
    int k = build_poll(c, pend, pfd);
    int ms = (int)((deadline - now) * 1000) + 1;
    if (ms > 100) ms = 100; /* wake to expire stuck handshakes and to beat */
    int ready = poll(pfd, (nfds_t)k, ms);
    if (ready < 0 && errno != EINTR) {
      rc = plait_error(PLAIT_ERR_SYSTEM, "poll failed: %s", strerror(errno));
      break;
    }
    if (ready > 0 && (rc = check_joined(c, pfd, k)) != PLAIT_SUCCESS) break;
    if (ready > 0 && pfd[0].revents) accept_new(c, pend, &a);
    for (int i = 0; i < MAX_PENDING; i++) {
      if (pend[i].fd < 0) continue;
      struct pollfd q = {pend[i].fd, POLLIN, 0};
      if (poll(&q, 1, 0) > 0) serve(c, &pend[i], &a);
      if (pend[i].fd >= 0 && plait_now() > pend[i].deadline)
        refuse(&a, &pend[i], 0, "did not authenticate in time");
    }
  }
  for (int i = 0; i < MAX_PENDING; i++)
    if (pend[i].fd >= 0) drop(&pend[i]);
  refusals_flush(&a.refusals, plait_now());
  free(pfd);
  /* Keep listening (later strays are refused at close); stop accepting now. */
  plait_net_close(&c->listen_fd);
  return rc;
}
