/* Connecting the control-plane tree (tree.h): every rank with children
 * listens; rank 0 learns the addresses over the star and tells each rank its
 * parent's; children connect and prove the job secret, parents prove it
 * back. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/auth.h"
#include "control/control.h"
#include "control/net.h"
#include "control/tree.h"
#include "util/error.h"
#include "util/log.h"

/* One frame of type `type` on the tree link fd, by deadline. */
static plait_result_t read_typed(int fd, plait_msg_type_t type, double deadline, const char *who,
                                 plait_frame_t *f) {
  PLAIT_CHECK(plait_control_read_frame(fd, PLAIT_HANDSHAKE_MAX_PAYLOAD, deadline, who, f));
  if (f->type == type) return PLAIT_SUCCESS;
  unsigned got = f->type;
  plait_frame_free(f);
  return plait_error(PLAIT_ERR_PROTOCOL, "%s sent message type %u while connecting the control "
                     "tree where %u was expected", who, got, (unsigned)type);
}

static plait_result_t send_frame(int fd, plait_writer_t *w, double deadline, const char *who) {
  plait_result_t rc = plait_wr_end(w);
  if (rc == PLAIT_SUCCESS && plait_net_write_full(fd, w->data, w->len, deadline) != PLAIT_IO_OK)
    rc = plait_error(PLAIT_ERR_PEER_LOST, "%s was lost while connecting the control tree", who);
  plait_wr_free(w);
  return rc;
}

/* Parent side, one accepted connection: challenge, check the child's proof
 * (a child of this rank not seen before), prove back. Sets *child. */
static plait_result_t admit_child(plait_control_t *c, int fd, double deadline, int *child) {
  uint8_t snonce[PLAIT_WIRE_NONCE_SIZE], cnonce[PLAIT_WIRE_NONCE_SIZE];
  uint8_t mac[PLAIT_WIRE_MAC_SIZE];
  PLAIT_CHECK(plait_auth_nonce(snonce));
  plait_writer_t w = {0};
  plait_wr_begin(&w, PLAIT_MSG_HELLO);
  plait_wr_raw(&w, snonce, sizeof snonce);
  PLAIT_CHECK(send_frame(fd, &w, deadline, "a child in the control tree"));
  plait_frame_t f;
  PLAIT_CHECK(read_typed(fd, PLAIT_MSG_AUTH, deadline, "a child in the control tree", &f));
  plait_reader_t r;
  plait_rd_init(&r, f.payload, f.length);
  uint32_t rank = plait_rd_u32(&r);
  plait_rd_raw(&r, cnonce, sizeof cnonce);
  plait_rd_raw(&r, mac, sizeof mac);
  plait_result_t rc = plait_rd_finish(&r, "control-tree proof");
  plait_frame_free(&f);
  PLAIT_CHECK(rc);
  int i = (int)rank - c->tree.first_child;
  if (rank > (uint32_t)c->size || i < 0 || i >= c->tree.nchildren || c->tree.child_fds[i] >= 0)
    return plait_error(PLAIT_ERR_AUTH, "rank %u is not a child of rank %d in the control tree "
                       "(or connected twice)", rank, c->rank);
  if (!plait_auth_verify_epoch(c->secret, PLAIT_AUTH_TREE_CHILD, snonce, cnonce, rank,
                               (uint32_t)c->size, c->epoch, mac))
    return plait_error(PLAIT_ERR_AUTH, "a process claiming rank %u failed authentication on "
                       "the control tree (wrong PLAIT_SECRET)", rank);
  PLAIT_CHECK(plait_auth_mac_epoch(c->secret, PLAIT_AUTH_TREE_PARENT, snonce, cnonce,
                                   (uint32_t)c->rank, (uint32_t)c->size, c->epoch, mac));
  plait_wr_begin(&w, PLAIT_MSG_WELCOME);
  plait_wr_raw(&w, mac, sizeof mac);
  *child = i;
  return send_frame(fd, &w, deadline, "a child in the control tree");
}

/* Parent side: every child connects and proves itself by the deadline. */
static plait_result_t accept_children(plait_control_t *c, double deadline) {
  int left = c->tree.nchildren;
  while (left > 0) {
    struct pollfd p = {c->tree.listen_fd, POLLIN, 0};
    double wait = deadline - plait_now();
    if (wait <= 0 || poll(&p, 1, (int)(wait * 1000) + 1) < 0) {
      if (plait_now() < deadline) continue; /* EINTR */
      return plait_error(PLAIT_ERR_TIMEOUT, "rank %d: %d of its %d children in the control tree "
                         "(ranks %d..%d) did not connect within PLAIT_START_TIMEOUT_S",
                         c->rank, left, c->tree.nchildren, c->tree.first_child,
                         c->tree.first_child + c->tree.nchildren - 1);
    }
    int fd = -1, child = -1;
    char peer[128];
    PLAIT_CHECK(plait_net_accept(c->tree.listen_fd, &fd, peer, sizeof peer));
    if (fd < 0) continue;
    if (admit_child(c, fd, deadline, &child)) {
      PLAIT_WARN("ctrl", "refused a control-tree connection from %s: %s", peer, plait_last_error());
      plait_net_close(&fd);
      continue;
    }
    c->tree.child_fds[child] = fd;
    left--;
  }
  plait_net_close(&c->tree.listen_fd);
  return PLAIT_SUCCESS;
}

/* Child side: prove the secret to the parent, check its proof. */
static plait_result_t greet_parent(plait_control_t *c, double deadline) {
  char who[64];
  snprintf(who, sizeof who, "rank %d (parent in the control tree)", c->tree.parent);
  plait_frame_t f;
  PLAIT_CHECK(read_typed(c->tree.parent_fd, PLAIT_MSG_HELLO, deadline, who, &f));
  uint8_t snonce[PLAIT_WIRE_NONCE_SIZE], cnonce[PLAIT_WIRE_NONCE_SIZE], mac[PLAIT_WIRE_MAC_SIZE];
  plait_reader_t r;
  plait_rd_init(&r, f.payload, f.length);
  plait_rd_raw(&r, snonce, sizeof snonce);
  plait_result_t rc = plait_rd_finish(&r, "control-tree challenge");
  plait_frame_free(&f);
  PLAIT_CHECK(rc);
  PLAIT_CHECK(plait_auth_nonce(cnonce));
  PLAIT_CHECK(plait_auth_mac_epoch(c->secret, PLAIT_AUTH_TREE_CHILD, snonce, cnonce,
                                   (uint32_t)c->rank, (uint32_t)c->size, c->epoch, mac));
  plait_writer_t w = {0};
  plait_wr_begin(&w, PLAIT_MSG_AUTH);
  plait_wr_u32(&w, (uint32_t)c->rank);
  plait_wr_raw(&w, cnonce, sizeof cnonce);
  plait_wr_raw(&w, mac, sizeof mac);
  PLAIT_CHECK(send_frame(c->tree.parent_fd, &w, deadline, who));
  PLAIT_CHECK(read_typed(c->tree.parent_fd, PLAIT_MSG_WELCOME, deadline, who, &f));
  int ok = f.length == sizeof mac &&
           plait_auth_verify_epoch(c->secret, PLAIT_AUTH_TREE_PARENT, snonce, cnonce,
                                   (uint32_t)c->tree.parent, (uint32_t)c->size, c->epoch,
                                   f.payload);
  plait_frame_free(&f);
  if (!ok)
    return plait_error(PLAIT_ERR_AUTH, "%s failed authentication on the control tree", who);
  return PLAIT_SUCCESS;
}

/* Rank 0: every rank's listening address (port 0: a leaf), then each rank
 * its parent's (port 0: rank 0, over the star). */
static plait_result_t share_addresses(plait_control_t *c) {
  int n = c->size;
  plait_frame_t *frames = calloc((size_t)n, sizeof *frames);
  char (*ips)[64] = calloc((size_t)n, 64);
  uint32_t *ports = calloc((size_t)n, sizeof *ports);
  plait_result_t rc = frames && ips && ports ? PLAIT_SUCCESS
                      : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory connecting the tree");
  if (rc == PLAIT_SUCCESS) rc = plait_control_gather(c, PLAIT_MSG_TREE, frames);
  for (int r = 1; r < n && rc == PLAIT_SUCCESS; r++) {
    plait_reader_t rd;
    plait_rd_init(&rd, frames[r].payload, frames[r].length);
    uint32_t k = plait_rd_u32(&rd);
    ports[r] = plait_rd_u32(&rd);
    plait_rd_str(&rd, ips[r], 64);
    rc = plait_rd_finish(&rd, "control-tree address");
    if (rc) rc = plait_error_context(rc, "from rank %d", r);
    else if (k != (uint32_t)c->tree.fanout)
      rc = plait_error(PLAIT_ERR_CONFIG, "PLAIT_CONTROL_FANOUT differs between ranks: rank 0 has "
                       "%d, rank %d has %u (it must be the same on every rank)",
                       c->tree.fanout, r, k);
  }
  for (int r = 1; r < n && rc == PLAIT_SUCCESS; r++) {
    int p = plait_tree_parent(r, c->tree.fanout);
    plait_writer_t w = {0};
    plait_wr_begin(&w, PLAIT_MSG_TREE);
    plait_wr_u32(&w, p > 0 ? ports[p] : 0);
    plait_wr_str(&w, p > 0 ? ips[p] : "");
    rc = plait_wr_end(&w);
    if (rc == PLAIT_SUCCESS) rc = plait_control_send(c, r, &w);
    plait_wr_free(&w);
  }
  for (int r = 0; frames && r < n; r++) plait_frame_free(&frames[r]);
  free(frames);
  free(ips);
  free(ports);
  return rc;
}

/* Rank > 0: tell rank 0 where this rank listens; learn the parent's. */
static plait_result_t learn_parent(plait_control_t *c, char *ip, size_t cap, int *port) {
  plait_writer_t w = {0};
  plait_wr_begin(&w, PLAIT_MSG_TREE);
  plait_wr_u32(&w, (uint32_t)c->tree.fanout);
  plait_wr_u32(&w, c->tree.listen_fd >= 0 ? (uint32_t)plait_net_local_port(c->tree.listen_fd) : 0);
  plait_wr_str(&w, c->local_ip);
  plait_result_t rc = plait_wr_end(&w);
  if (rc == PLAIT_SUCCESS) rc = plait_control_send(c, 0, &w);
  plait_wr_free(&w);
  PLAIT_CHECK(rc);
  plait_frame_t f;
  PLAIT_CHECK(plait_control_recv(c, 0, PLAIT_MSG_TREE, &f));
  plait_reader_t rd;
  plait_rd_init(&rd, f.payload, f.length);
  *port = (int)plait_rd_u32(&rd);
  plait_rd_str(&rd, ip, cap);
  rc = plait_rd_finish(&rd, "control-tree parent address");
  plait_frame_free(&f);
  if (rc == PLAIT_SUCCESS && c->tree.parent > 0 && (*port <= 0 || *port > 65535))
    rc = plait_error(PLAIT_ERR_PROTOCOL, "rank 0 gave port %d for rank %d", *port, c->tree.parent);
  return rc ? plait_control_fail(c, rc) : PLAIT_SUCCESS;
}

static plait_result_t connect_parent(plait_control_t *c, const char *ip, int port,
                                     double deadline) {
  for (;;) {
    int transient = 0;
    plait_result_t rc = plait_net_connect(ip, port, deadline, &c->tree.parent_fd, &transient);
    if (rc == PLAIT_SUCCESS || !transient || plait_now() >= deadline)
      return rc ? plait_error_context(rc, "rank %d connecting to its control-tree parent, "
                                      "rank %d", c->rank, c->tree.parent) : rc;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

plait_result_t plait_tree_connect(plait_control_t *c, int k) {
  plait_tree_t *t = &c->tree;
  memset(t, 0, sizeof *t);
  t->parent_fd = t->listen_fd = -1;
  if (!plait_tree_active(k, c->size)) return PLAIT_SUCCESS;
  t->fanout = k;
  t->parent = plait_tree_parent(c->rank, k);
  t->nchildren = plait_tree_children(c->rank, k, c->size, &t->first_child);
  if (c->rank == 0) { /* its children are its star connections */
    plait_result_t rc0 = share_addresses(c);
    if (rc0 == PLAIT_SUCCESS)
      PLAIT_INFO("control", "a tree of fan-out %d over %d ranks: rank 0 sends each list to "
                 "ranks 1-%d, each rank relays it to its own children", k, c->size, t->nchildren);
    return rc0;
  }
  plait_result_t rc = PLAIT_SUCCESS;
  if (t->nchildren) {
    if (!(t->child_fds = malloc(sizeof(int) * (size_t)t->nchildren)))
      return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory connecting the tree");
    for (int i = 0; i < t->nchildren; i++) t->child_fds[i] = -1;
    rc = plait_net_listen(c->local_ip, 0, &t->listen_fd);
  }
  char ip[64] = "";
  int port = 0;
  if (rc == PLAIT_SUCCESS) rc = learn_parent(c, ip, sizeof ip, &port);
  double deadline = c->start_deadline;
  if (rc == PLAIT_SUCCESS && t->parent > 0) rc = connect_parent(c, ip, port, deadline);
  if (rc == PLAIT_SUCCESS && t->nchildren) rc = accept_children(c, deadline);
  if (rc == PLAIT_SUCCESS && t->parent > 0) rc = greet_parent(c, deadline);
  if (rc) plait_tree_close(t);
  return rc;
}
