/* A rank > 0 joins rank 0: connect with retry and back-off until the start
 * deadline, answer the challenge, check rank 0's own proof. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "control/auth.h"
#include "control/control.h"
#include "util/error.h"
#include "util/log.h"
#include "control/messages.h"
#include "control/net.h"

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static plait_result_t send_auth(plait_control_t *c, int fd, const plait_topology_t *t,
                                const uint8_t *snonce, uint8_t *cnonce) {
  plait_msg_auth_t m;
  memset(&m, 0, sizeof m);
  m.rank = (uint32_t)c->rank;
  m.size = (uint32_t)c->size;
  PLAIT_CHECK(plait_auth_nonce(m.nonce));
  memcpy(cnonce, m.nonce, sizeof m.nonce);
  m.epoch = c->epoch;
  PLAIT_CHECK(plait_auth_mac_epoch(c->secret, PLAIT_AUTH_CLIENT, snonce, cnonce, m.rank, m.size,
                                   m.epoch, m.mac));
  snprintf(m.host, sizeof m.host, "%s", t->host);
  m.local_rank = t->local_rank;
  m.local_size = t->local_size;
  plait_writer_t w = {0};
  plait_result_t rc = plait_msg_encode_auth(&w, &m);
  if (rc == PLAIT_SUCCESS &&
      plait_net_write_full(fd, w.data, w.len, plait_now() + 5.0) != PLAIT_IO_OK)
    rc = plait_error(PLAIT_ERR_PEER_LOST, "rank 0 closed the connection during authentication");
  plait_wr_free(&w);
  return rc;
}

/* Reads rank 0's verdict. PLAIT_ERR_AUTH is final; other errors may be retried. */
static plait_result_t read_verdict(plait_control_t *c, int fd, const uint8_t *snonce,
                                   const uint8_t *cnonce, double deadline) {
  plait_frame_t f;
  PLAIT_CHECK(plait_control_read_frame(fd, PLAIT_HANDSHAKE_MAX_PAYLOAD, deadline, "rank 0", &f));
  plait_result_t rc = PLAIT_SUCCESS;
  if (f.type == PLAIT_MSG_REJECT) {
    plait_msg_text_t why;
    int bad = plait_msg_decode_text(f.payload, f.length, 0, &why) != PLAIT_SUCCESS;
    rc = plait_error(PLAIT_ERR_AUTH, "rank 0 at %s refused rank %d: %s", c->rendezvous, c->rank,
                     bad ? "(no reason given)" : why.text);
  } else if (f.type == PLAIT_MSG_WELCOME) {
    plait_msg_welcome_t welcome;
    rc = plait_msg_decode_welcome(f.payload, f.length, &welcome);
    if (rc == PLAIT_SUCCESS &&
        !plait_auth_verify_epoch(c->secret, PLAIT_AUTH_SERVER, snonce, cnonce, (uint32_t)c->rank,
                                 (uint32_t)c->size, c->epoch, welcome.mac))
      rc = plait_error(PLAIT_ERR_AUTH, "the process at %s could not prove it knows this job's "
                       "PLAIT_SECRET: it is not this job's rank 0", c->rendezvous);
  } else {
    rc = plait_error(PLAIT_ERR_PROTOCOL, "rank 0 sent message type %u during authentication",
                     f.type);
  }
  plait_frame_free(&f);
  return rc;
}

/* One attempt on a connected socket. */
static plait_result_t handshake(plait_control_t *c, int fd, const plait_topology_t *t) {
  double deadline = plait_now() + 10.0;
  if (deadline > c->start_deadline) deadline = c->start_deadline;
  plait_frame_t hello;
  PLAIT_CHECK(plait_control_read_frame(fd, PLAIT_HANDSHAKE_MAX_PAYLOAD, deadline, "rank 0", &hello));
  plait_msg_hello_t challenge;
  uint8_t cnonce[PLAIT_WIRE_NONCE_SIZE];
  plait_result_t rc = hello.type == PLAIT_MSG_HELLO
                          ? plait_msg_decode_hello(hello.payload, hello.length, &challenge)
                          : plait_error(PLAIT_ERR_PROTOCOL, "rank 0 did not send a challenge");
  plait_frame_free(&hello);
  PLAIT_CHECK(rc);
  PLAIT_CHECK(send_auth(c, fd, t, challenge.nonce, cnonce));
  return read_verdict(c, fd, challenge.nonce, cnonce, deadline);
}

plait_result_t plait_control_join(plait_control_t *c, const plait_topology_t *t) {
  double backoff = 0.01;
  int attempts = 0;
  char last[512] = "no attempt made";
  for (;;) {
    double now = plait_now();
    if (now >= c->start_deadline)
      return plait_error(PLAIT_ERR_TIMEOUT, "rank %d could not join rank 0 at %s within "
                         "PLAIT_START_TIMEOUT_S (%d attempts; last: %s)", c->rank, c->rendezvous,
                         attempts, last);
    attempts++;
    int fd = -1, transient = 0;
    double try_deadline = now + 5.0 < c->start_deadline ? now + 5.0 : c->start_deadline;
    plait_result_t rc = plait_net_connect(t->rendezvous_host, t->rendezvous_port, try_deadline,
                                          &fd, &transient);
    if (rc == PLAIT_SUCCESS) {
      rc = handshake(c, fd, t);
      if (rc == PLAIT_SUCCESS) {
        c->fds[0] = fd;
        plait_net_local_ip(fd, c->local_ip, sizeof c->local_ip);
        return PLAIT_SUCCESS;
      }
      plait_net_close(&fd);
      if (rc == PLAIT_ERR_AUTH) return rc;
      transient = 1;
    }
    snprintf(last, sizeof last, "%s", plait_last_error());
    if (!transient) return rc;
    PLAIT_TRACE("ctrl", "join attempt %d failed: %s; retrying in %.0f ms", attempts, last,
                backoff * 1e3);
    sleep_s(backoff);
    backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
  }
}
