/* Control plane: start, framed messaging with rank 0, failure propagation. */
#include "control/control.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/error.h"
#include "util/log.h"
#include "control/elastic_client.h"
#include "control/messages.h"
#include "control/net.h"

void plait_frame_free(plait_frame_t *f) {
  free(f->payload);
  memset(f, 0, sizeof *f);
}

static plait_result_t io_error(plait_io_t io, const char *who, const char *doing) {
  switch (io) {
  case PLAIT_IO_EOF:
    return plait_error(PLAIT_ERR_PEER_LOST, "%s was lost: connection closed while %s", who, doing);
  case PLAIT_IO_TIMEOUT:
    return plait_error(PLAIT_ERR_PEER_LOST, "%s was lost: no answer while %s before the timeout",
                       who, doing);
  default:
    if (errno == ECONNRESET || errno == EPIPE) /* the same event as EOF, seen a moment later */
      return plait_error(PLAIT_ERR_PEER_LOST, "%s was lost: connection closed while %s", who, doing);
    return plait_error(PLAIT_ERR_PEER_LOST, "%s was lost: %s while %s", who, strerror(errno),
                       doing);
  }
}

plait_result_t plait_control_read_frame(int fd, uint32_t max_payload, double deadline,
                                        const char *who, plait_frame_t *out) {
  memset(out, 0, sizeof *out);
  uint8_t hdr[PLAIT_WIRE_HEADER_SIZE];
  plait_io_t io = plait_net_read_full(fd, hdr, sizeof hdr, deadline);
  if (io) return io_error(io, who, "reading a message");
  plait_frame_header_t h;
  plait_result_t rc = plait_wire_decode_header(hdr, max_payload, &h);
  if (rc) return plait_error_context(rc, "bad message from %s", who);
  if (h.length) {
    out->payload = malloc(h.length);
    if (!out->payload)
      return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for a %u-byte message", h.length);
    io = plait_net_read_full(fd, out->payload, h.length, deadline);
    if (io) {
      plait_frame_free(out);
      return io_error(io, who, "reading a message");
    }
  }
  out->type = h.type;
  out->length = h.length;
  return PLAIT_SUCCESS;
}

static plait_result_t sticky(plait_control_t *c) {
  return plait_error(c->failed, "%s", c->fail_msg);
}

plait_result_t plait_control_fail(plait_control_t *c, plait_result_t rc) {
  if (c->failed) return rc;
  c->failed = rc;
  snprintf(c->fail_msg, sizeof c->fail_msg, "%s", plait_last_error());
  PLAIT_WARN("ctrl", "job failed: %s", c->fail_msg);
  if (rc == PLAIT_ERR_PEER_LOST) /* an elastic job's next JOIN names them */
    plait_el_note_failure(c->epoch, c->size, c->fail_msg);
  if (c->rank != 0 || !c->fds) return rc;
  plait_writer_t w = {0};
  if (plait_msg_encode_abort(&w, (uint32_t)rc, c->fail_msg) == PLAIT_SUCCESS) {
    for (int r = 1; r < c->size; r++)
      if (c->fds[r] >= 0) /* best effort: the survivors learn why at once */
        plait_net_write_full(c->fds[r], w.data, w.len, plait_now() + 1.0);
  }
  plait_wr_free(&w);
  plait_error(rc, "%s", c->fail_msg);
  return rc;
}

static int peer_fd(plait_control_t *c, int peer) {
  if (c->rank == 0) return peer > 0 && peer < c->size ? c->fds[peer] : -1;
  return peer == 0 ? c->fds[0] : -1;
}

plait_result_t plait_control_send(plait_control_t *c, int peer, const plait_writer_t *w) {
  if (c->failed) return sticky(c);
  int fd = peer_fd(c, peer);
  if (fd < 0) return plait_error(PLAIT_ERR_INTERNAL, "no control connection to rank %d", peer);
  plait_io_t io = plait_net_write_full(fd, w->data, w->len, plait_now() + c->timeout_s);
  if (io) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", peer);
    return plait_control_fail(c, io_error(io, who, "sending to it"));
  }
  return PLAIT_SUCCESS;
}

/* One heartbeat to fd: all of it, or nothing when the buffer is full. */
static void heartbeat_to(int fd, const plait_writer_t *w) {
  ssize_t n = send(fd, w->data, w->len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0 && (size_t)n < w->len) /* rare: finish the frame, briefly */
    plait_net_write_full(fd, w->data + n, w->len - (size_t)n, plait_now() + 1.0);
}

int plait_control_send_heartbeat(plait_control_t *c) {
  if (c->failed || !c->fds) return 0;
  plait_writer_t w = {0};
  plait_wr_begin(&w, PLAIT_MSG_ALIVE);
  if (plait_wr_end(&w) != PLAIT_SUCCESS) {
    plait_wr_free(&w);
    return 0;
  }
  if (c->rank == 0) {
    for (int r = 1; r < c->size; r++)
      if (c->fds[r] >= 0) heartbeat_to(c->fds[r], &w);
  } else if (c->fds[0] >= 0) {
    heartbeat_to(c->fds[0], &w);
  }
  plait_wr_free(&w);
  return 1;
}

/* Turns an ABORT frame into the error it carries. */
static plait_result_t take_abort(plait_control_t *c, const plait_frame_t *f) {
  plait_msg_text_t m;
  if (plait_msg_decode_text(f->payload, f->length, 1, &m) || m.code == 0 ||
      m.code >= PLAIT_RESULT_COUNT_)
    return plait_control_fail(c, plait_error(PLAIT_ERR_PROTOCOL, "rank 0 aborted the job"));
  return plait_control_fail(c, plait_error((plait_result_t)m.code, "%s", m.text));
}

static plait_result_t check_type(plait_control_t *c, plait_frame_t *f, plait_msg_type_t type,
                                 int peer) {
  if (f->type == type) return PLAIT_SUCCESS;
  if (f->type == PLAIT_MSG_ABORT && peer == 0) {
    plait_result_t rc = take_abort(c, f);
    plait_frame_free(f);
    return rc;
  }
  unsigned got = f->type;
  plait_frame_free(f);
  return plait_control_fail(c, plait_error(PLAIT_ERR_PROTOCOL,
                                           "rank %d sent message type %u where %u was expected",
                                           peer, got, (unsigned)type));
}

void plait_control_started(plait_control_t *c) { c->starting = 0; }

/* How long to wait for a silent peer: `wait`, or while plait_init runs
 * (control.h, plait_control_started), rank 0 until its start deadline, and
 * the others past rank 0's, so that rank 0 names a rank slow to start, never
 * they rank 0: their own deadline is at most one start timeout before rank
 * 0's (they joined it before their deadline, and it listened before that). */
static double silence_wait(const plait_control_t *c, double wait) {
  double left = c->start_deadline - plait_now();
  if (c->rank > 0) left += c->start_timeout_s + wait;
  return c->starting && left > wait ? left : wait;
}

static plait_result_t recv_frame(plait_control_t *c, int peer, plait_msg_type_t type, int polled,
                                 plait_frame_t *out) {
  if (c->failed) return sticky(c);
  int fd = peer_fd(c, peer);
  if (fd < 0) return plait_error(PLAIT_ERR_INTERNAL, "no control connection to rank %d", peer);
  char who[32];
  snprintf(who, sizeof who, "rank %d", peer);
  /* Rank 0 detects silent ranks within timeout_s and then tells everyone; a
   * rank waiting on rank 0 gives it that long and more before blaming it.
   * Each heartbeat or stale frame skipped starts the wait again (a loop: rank
   * 0 may beat for as long as PLAIT_START_TIMEOUT_S while others join). */
  for (;;) {
    double wait = silence_wait(c, c->rank == 0 ? c->timeout_s : 2 * c->timeout_s + 1);
    plait_result_t rc = plait_control_read_frame(fd, PLAIT_WIRE_MAX_PAYLOAD, plait_now() + wait,
                                                 who, out);
    if (rc) return plait_control_fail(c, rc);
    if (out->type == PLAIT_MSG_ALIVE && polled) return PLAIT_SUCCESS;
    if (out->type == PLAIT_MSG_RELAYED && type == PLAIT_MSG_REQUESTS && c->tree.fanout)
      return PLAIT_SUCCESS; /* rank 0: a child's subtree's requests (tree.h) */
    if ((out->type == PLAIT_MSG_RESPONSES && type != PLAIT_MSG_RESPONSES) || /* stale */
        (out->type == PLAIT_MSG_RELAYED && type != PLAIT_MSG_REQUESTS) ||
        out->type == PLAIT_MSG_ALIVE) {
      plait_frame_free(out);
      continue;
    }
    return check_type(c, out, type, peer);
  }
}

plait_result_t plait_control_recv(plait_control_t *c, int peer, plait_msg_type_t type,
                                  plait_frame_t *out) {
  return recv_frame(c, peer, type, 0, out);
}

plait_result_t plait_control_recv_polled(plait_control_t *c, int peer, plait_msg_type_t type,
                                         plait_frame_t *out) {
  return recv_frame(c, peer, type, 1, out);
}

/* "rank 3 was" / "ranks 1, 3 were": the ranks in [1, size) still missing. */
static void missing_ranks(plait_control_t *c, const char *have, char *buf, size_t cap) {
  unsigned char *pick = calloc((size_t)c->size, 1);
  if (!pick) {
    snprintf(buf, cap, "some ranks were");
    return;
  }
  for (int r = 1; r < c->size; r++) pick[r] = !have[r];
  int count = plait_format_ranks(buf, cap - 6, c->size, pick);
  size_t used = strlen(buf);
  snprintf(buf + used, cap - used, " %s", count == 1 ? "was" : "were");
  free(pick);
}

plait_result_t plait_control_gather(plait_control_t *c, plait_msg_type_t type,
                                    plait_frame_t *frames) {
  if (c->failed) return sticky(c);
  int n = c->size;
  struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
  char *have = calloc((size_t)n, 1);
  if (!pfd || !have) {
    free(pfd);
    free(have);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory gathering control messages");
  }
  memset(frames, 0, sizeof *frames * (size_t)n);
  plait_result_t rc = PLAIT_SUCCESS;
  int left = n - 1;
  double t0 = plait_now(), deadline = t0 + silence_wait(c, c->timeout_s);
  while (left > 0 && rc == PLAIT_SUCCESS) {
    int k = 0;
    for (int r = 1; r < n; r++)
      if (!have[r]) pfd[k++] = (struct pollfd){c->fds[r], POLLIN, 0};
    double wait = deadline - plait_now();
    int ready = wait > 0 ? poll(pfd, (nfds_t)k, (int)(wait * 1000) + 1) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0 && plait_now() >= deadline) {
      char list[256];
      missing_ranks(c, have, list, sizeof list);
      rc = plait_error(PLAIT_ERR_PEER_LOST, "%s lost: silent for %.1f s (%s=%g)", list,
                       plait_now() - t0, c->starting ? "while starting: PLAIT_START_TIMEOUT_S"
                                                     : "PLAIT_TIMEOUT_S",
                       c->starting ? c->start_timeout_s : c->timeout_s);
      break;
    }
    for (int i = 0, r = 1; i < k && rc == PLAIT_SUCCESS; r++) {
      if (have[r]) continue;
      if (pfd[i++].revents == 0) continue;
      char who[32];
      snprintf(who, sizeof who, "rank %d", r);
      rc = plait_control_read_frame(c->fds[r], PLAIT_WIRE_MAX_PAYLOAD, deadline, who, &frames[r]);
      if (rc == PLAIT_SUCCESS && (((frames[r].type == PLAIT_MSG_REQUESTS ||
                                    frames[r].type == PLAIT_MSG_RELAYED) &&
                                   type != PLAIT_MSG_REQUESTS) ||
                                  frames[r].type == PLAIT_MSG_ALIVE)) {
        plait_frame_free(&frames[r]); /* sent before coordination ended: stale */
        continue;
      }
      if (rc == PLAIT_SUCCESS && frames[r].type != type)
        rc = plait_error(PLAIT_ERR_PROTOCOL, "rank %d sent message type %u where %u was expected",
                         r, frames[r].type, type);
      if (rc == PLAIT_SUCCESS) {
        have[r] = 1;
        left--;
      }
    }
  }
  free(pfd);
  free(have);
  if (rc) {
    for (int r = 0; r < n; r++) plait_frame_free(&frames[r]);
    return plait_control_fail(c, rc);
  }
  return PLAIT_SUCCESS;
}

/* Rank 0 tells every rank every rank's host identity and launcher-given local
 * rank and size; all ranks then derive local and cross values. */
static plait_result_t share_topology(plait_control_t *c, char (*hosts)[PLAIT_HOST_MAX], int *lr, int *ls) {
  plait_result_t rc = PLAIT_SUCCESS;
  plait_msg_topology_t m = {(uint32_t)c->size, hosts, lr, ls};
  if (c->rank == 0) {
    plait_writer_t w = {0};
    rc = plait_msg_encode_topology(&w, &m);
    for (int r = 1; r < c->size && rc == PLAIT_SUCCESS; r++) rc = plait_control_send(c, r, &w);
    plait_wr_free(&w);
    return rc;
  }
  plait_frame_t f;
  PLAIT_CHECK(plait_control_recv(c, 0, PLAIT_MSG_TOPOLOGY, &f));
  rc = plait_msg_decode_topology(f.payload, f.length, &m);
  plait_frame_free(&f);
  return rc ? plait_control_fail(c, rc) : PLAIT_SUCCESS;
}

plait_result_t plait_control_start(plait_control_t *c, plait_topology_t *t,
                                   const plait_config_t *cfg) {
  memset(c, 0, sizeof *c);
  c->rank = t->rank;
  c->size = t->size;
  c->timeout_s = cfg->timeout_s;
  c->start_deadline = plait_now() + cfg->start_timeout_s;
  c->start_timeout_s = cfg->start_timeout_s;
  c->starting = !t->epoch; /* an elastic job's ranks were ready: join_deadline's rule */
  c->secret = cfg->secret;
  c->listen_fd = -1;
  c->tree.parent_fd = c->tree.listen_fd = -1;
  c->epoch = t->epoch;
  if (t->epoch && t->rank == 0) { /* bound before the driver was asked: ours now */
    c->listen_fd = t->listen_fd;
    t->listen_fd = -1;
  }
  plait_net_format_hostport(t->rendezvous_host, t->rendezvous_port, c->rendezvous,
                            sizeof c->rendezvous);
  if (t->size == 1) {
    plait_net_close(&c->listen_fd);
    snprintf(c->local_ip, sizeof c->local_ip, "127.0.0.1");
    return PLAIT_SUCCESS;
  }
  if (!c->secret || !*c->secret) {
    plait_net_close(&c->listen_fd);
    return plait_error(PLAIT_ERR_CONFIG,
                       "PLAIT_SECRET is not set: a job of %d ranks needs a shared secret. plaitrun "
                       "sets one; under mpirun/srun/torchrun export the same value on every rank, "
                       "e.g. export PLAIT_SECRET=$(openssl rand -hex 32)",
                       t->size);
  }
  if (strlen(c->secret) < 16)
    PLAIT_WARN("ctrl", "PLAIT_SECRET is only %zu characters; use at least 32 random ones",
               strlen(c->secret));
  size_t n = (size_t)t->size;
  c->fds = malloc(sizeof(int) * n);
  char (*hosts)[PLAIT_HOST_MAX] = calloc(n, PLAIT_HOST_MAX);
  int *lr = malloc(sizeof(int) * n), *ls = malloc(sizeof(int) * n);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!c->fds || !hosts || !lr || !ls) {
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the control plane");
    goto out;
  }
  for (size_t i = 0; i < n; i++) c->fds[i] = -1;
  double t0 = plait_now();
  if (t->rank == 0) {
    snprintf(hosts[0], PLAIT_HOST_MAX, "%s", t->host);
    lr[0] = t->local_rank;
    ls[0] = t->local_size;
    PLAIT_CHECK_GOTO(rc, plait_control_accept_all(c, hosts, lr, ls), out);
  } else {
    PLAIT_CHECK_GOTO(rc, plait_control_join(c, t), out);
  }
  PLAIT_CHECK_GOTO(rc, share_topology(c, hosts, lr, ls), out);
  int cross_rank = t->cross_rank, cross_size = t->cross_size;
  PLAIT_CHECK_GOTO(rc, plait_topology_derive(t, hosts, lr, ls), out);
  if (t->epoch) { /* the driver's (Horovod's definition), not derived */
    t->cross_rank = cross_rank;
    t->cross_size = cross_size;
  }
  PLAIT_CHECK_GOTO(rc, plait_tree_connect(c, (int)cfg->control_fanout), out);
  PLAIT_DEBUG("ctrl", "%d ranks joined at %s in %.1f ms (control tree: %s)", c->size,
              c->rendezvous, (plait_now() - t0) * 1e3, c->tree.fanout ? "yes" : "no");
out:
  free(hosts);
  free(lr);
  free(ls);
  if (rc) {
    if (c->fds) plait_control_fail(c, rc);
    plait_control_close(c);
  }
  return rc;
}

struct pollfd plait_control_pollfd(const plait_control_t *c, int peer) {
  struct pollfd p = {c->fds ? c->fds[peer] : -1, POLLIN, 0};
  return p;
}

int plait_control_readable(const plait_control_t *c, int peer) {
  struct pollfd p = plait_control_pollfd(c, peer);
  return poll(&p, 1, 0) > 0;
}

plait_result_t plait_control_recv_any(plait_control_t *c, int peer, double deadline,
                                      const char *who, plait_frame_t *out) {
  return plait_control_read_frame(c->fds[peer], PLAIT_WIRE_MAX_PAYLOAD, deadline, who, out);
}

plait_result_t plait_control_send_by(plait_control_t *c, int peer, const plait_writer_t *w,
                                     double deadline) {
  if (plait_net_write_full(c->fds[peer], w->data, w->len, deadline) != PLAIT_IO_OK)
    return plait_error(PLAIT_ERR_PEER_LOST, "cannot send to rank %d", peer);
  return PLAIT_SUCCESS;
}

void plait_control_close(plait_control_t *c) {
  plait_tree_close(&c->tree);
  if (c->fds) {
    int n = c->rank == 0 ? c->size : 1;
    for (int r = 0; r < n; r++) plait_net_close(&c->fds[r]);
    free(c->fds);
    c->fds = NULL;
  }
  plait_net_close(&c->listen_fd);
}
