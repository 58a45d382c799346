/* The control-plane tree: its shape, and relaying rank 0's lists down it
 * (tree.h). Connecting the links is tree_connect.c. */
#include "control/tree.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"
#include "control/net.h"
#include "util/error.h"
#include "util/log.h"

int plait_tree_active(int k, int size) { return k >= 2 && size > k + 1; }

int plait_tree_parent(int r, int k) { return r <= 0 || k < 1 ? -1 : (r - 1) / k; }

int plait_tree_children(int r, int k, int size, int *first) {
  long lo = (long)r * k + 1;
  *first = lo < size ? (int)lo : size;
  long n = (long)size - lo;
  return n <= 0 ? 0 : n < k ? (int)n : k;
}

int plait_tree_depth(int k, int size) {
  if (!plait_tree_active(k, size)) return 0;
  int depth = 0;
  for (int r = size - 1; r > 0; r = plait_tree_parent(r, k)) depth++;
  return depth;
}

int plait_tree_has_parent_link(const plait_control_t *c) {
  return c->tree.fanout && c->rank > 0 && c->tree.parent > 0;
}

plait_result_t plait_tree_recv(plait_control_t *c, plait_frame_t *out) {
  memset(out, 0, sizeof *out);
  if (c->tree.parent_fd < 0) return PLAIT_SUCCESS; /* already closed */
  char who[96];
  snprintf(who, sizeof who, "rank %d (this rank's parent in the control tree)", c->tree.parent);
  plait_result_t rc = plait_control_read_frame(c->tree.parent_fd, PLAIT_WIRE_MAX_PAYLOAD,
                                               plait_now() + 2 * c->timeout_s + 1, who, out);
  if (rc == PLAIT_ERR_PEER_LOST) { /* rank 0 names who was lost: wait for its ABORT */
    PLAIT_DEBUG("ctrl", "%s; waiting for rank 0's verdict", plait_last_error());
    plait_net_close(&c->tree.parent_fd);
    c->tree.parent_lost_at = plait_now();
    memset(out, 0, sizeof *out);
    return PLAIT_SUCCESS;
  }
  if (rc) return plait_control_fail(c, rc);
  if (out->type != PLAIT_MSG_RESPONSES) {
    unsigned got = out->type;
    plait_frame_free(out);
    return plait_control_fail(c, plait_error(PLAIT_ERR_PROTOCOL, "rank %d sent message type "
                                             "%u on the control tree where %u was expected",
                                             c->tree.parent, got, PLAIT_MSG_RESPONSES));
  }
  return PLAIT_SUCCESS;
}

plait_result_t plait_tree_relay(plait_control_t *c, const plait_frame_t *f) {
  if (!c->tree.fanout || c->rank == 0 || !c->tree.nchildren) return PLAIT_SUCCESS;
  plait_writer_t w = {0};
  plait_wr_begin(&w, (plait_msg_type_t)f->type);
  if (f->length) plait_wr_raw(&w, f->payload, f->length);
  plait_result_t rc = plait_wr_end(&w);
  for (int i = 0; i < c->tree.nchildren && rc == PLAIT_SUCCESS; i++) {
    int *fd = &c->tree.child_fds[i];
    if (*fd < 0) continue;
    plait_io_t io = plait_net_write_full(*fd, w.data, w.len, plait_now() + c->timeout_s);
    if (io == PLAIT_IO_TIMEOUT)
      rc = plait_control_fail(c, plait_error(PLAIT_ERR_PEER_LOST, "rank %d was lost: it took "
                                             "no control message for %g s (PLAIT_TIMEOUT_S)",
                                             c->tree.first_child + i, c->timeout_s));
    else if (io) /* closed: rank 0 sees its star connection close too, and names it */
      plait_net_close(fd);
  }
  plait_wr_free(&w);
  return rc;
}

plait_result_t plait_tree_check(plait_control_t *c) {
  if (c->tree.parent_lost_at <= 0 || plait_now() < c->tree.parent_lost_at + c->timeout_s)
    return PLAIT_SUCCESS;
  return plait_control_fail(c, plait_error(PLAIT_ERR_PEER_LOST,
                                           "rank %d was lost: its control-tree connection to "
                                           "rank %d closed and rank 0 did not end the job within "
                                           "%g s (PLAIT_TIMEOUT_S)", c->tree.parent, c->rank,
                                           c->timeout_s));
}

int plait_tree_sends_up(const plait_control_t *c) { return plait_tree_has_parent_link(c); }

int plait_tree_below(int origin, int via, int k) {
  if (via <= 0 || origin <= via) return origin == via && via > 0;
  int p = origin;
  while (p > via) p = plait_tree_parent(p, k);
  return p == via;
}

static void up_item(plait_tree_t *t, uint32_t origin, const void *p, size_t len) {
  if (!t->up_count) {
    plait_wr_begin(&t->up, PLAIT_MSG_RELAYED);
    plait_wr_u32(&t->up, 0); /* the count, filled in at the flush */
  }
  plait_wr_u32(&t->up, origin);
  plait_wr_blob(&t->up, p, len);
  t->up_count++;
}

void plait_tree_up_add(plait_control_t *c, int origin, const uint8_t *payload, size_t len) {
  up_item(&c->tree, (uint32_t)origin, payload, len);
}

void plait_tree_up_and(plait_control_t *c, const plait_tree_and_t *a) {
  uint8_t b[PLAIT_TREE_AND_BLOB];
  plait_store_le32(b, (uint32_t)a->id);
  plait_store_le32(b + 4, (uint32_t)a->acked);
  plait_store_le32(b + 8, (uint32_t)(a->acked >> 32));
  up_item(&c->tree, (uint32_t)a->root | PLAIT_TREE_AND | (a->one ? PLAIT_TREE_ONE : 0), b,
          sizeof b);
}

void plait_tree_up_frame(plait_control_t *c, plait_frame_t *f) {
  plait_tree_t *t = &c->tree;
  memset(f, 0, sizeof *f);
  if (!t->up_count || !t->up.data || t->up.len < PLAIT_WIRE_HEADER_SIZE + 4) return;
  plait_store_le32(t->up.data + PLAIT_WIRE_HEADER_SIZE, t->up_count);
  f->type = PLAIT_MSG_RELAYED;
  f->length = (uint32_t)(t->up.len - PLAIT_WIRE_HEADER_SIZE);
  f->payload = t->up.data + PLAIT_WIRE_HEADER_SIZE;
}

/* An AND item's blob; PLAIT_ERR_PROTOCOL naming via when malformed. */
static plait_result_t read_and(uint32_t origin, const uint8_t *p, size_t len, int via,
                               plait_tree_and_t *a) {
  if (len != PLAIT_TREE_AND_BLOB)
    return plait_error(PLAIT_ERR_PROTOCOL, "rank %d relayed a malformed cached-id AND (%zu "
                       "bytes)", via, len);
  plait_reader_t r;
  plait_rd_init(&r, p, len);
  a->root = (int)(origin & ~(PLAIT_TREE_AND | PLAIT_TREE_ONE));
  a->one = (origin & PLAIT_TREE_ONE) != 0;
  a->id = plait_rd_i32(&r);
  a->acked = plait_rd_u64(&r);
  if (a->id < 0)
    return plait_error(PLAIT_ERR_PROTOCOL, "rank %d relayed the AND of cached id %d", via, a->id);
  return PLAIT_SUCCESS;
}

plait_result_t plait_tree_each_item(const plait_control_t *c, int via, const plait_frame_t *f,
                                    plait_tree_payload_fn fn, plait_tree_and_fn and_fn,
                                    void *arg) {
  plait_reader_t r;
  plait_rd_init(&r, f->payload, f->length);
  uint32_t n = plait_rd_u32(&r);
  for (uint32_t j = 0; j < n && !r.bad; j++) {
    uint32_t item = plait_rd_u32(&r), origin = item & ~(PLAIT_TREE_AND | PLAIT_TREE_ONE);
    size_t len;
    const uint8_t *p = plait_rd_blob(&r, &len);
    if (r.bad) break;
    if (origin >= (uint32_t)c->size || !plait_tree_below((int)origin, via, c->tree.fanout) ||
        (item & PLAIT_TREE_ONE && !(item & PLAIT_TREE_AND)))
      return plait_error(PLAIT_ERR_PROTOCOL, "rank %d relayed requests of rank %u, which is not "
                         "below it in the control tree", via, origin);
    if (!(item & PLAIT_TREE_AND)) {
      PLAIT_CHECK(fn(arg, (int)origin, p, len));
      continue;
    }
    plait_tree_and_t a;
    PLAIT_CHECK(read_and(item, p, len, via, &a));
    if (and_fn) PLAIT_CHECK(and_fn(arg, &a));
  }
  return plait_rd_finish(&r, "relayed requests");
}

plait_result_t plait_tree_each_relayed(const plait_control_t *c, int via, const plait_frame_t *f,
                                      plait_tree_payload_fn fn, void *arg) {
  return plait_tree_each_item(c, via, f, fn, NULL, arg);
}

/* Without hooks: what came goes up as it came. */
static plait_result_t add_cb(void *arg, int origin, const uint8_t *p, size_t len) {
  plait_control_t *c = arg;
  if (c->tree.hooks.payload) return c->tree.hooks.payload(c->tree.hooks.arg, origin, p, len);
  plait_tree_up_add(c, origin, p, len);
  return PLAIT_SUCCESS;
}

static plait_result_t and_cb(void *arg, const plait_tree_and_t *a) {
  plait_control_t *c = arg;
  if (c->tree.hooks.and_item) return c->tree.hooks.and_item(c->tree.hooks.arg, a);
  plait_tree_up_and(c, a);
  return PLAIT_SUCCESS;
}

/* One frame from child i into the batch: its own REQUESTS, or its subtree's. */
static plait_result_t take_child_frame(plait_control_t *c, int i, const plait_frame_t *f) {
  int child = c->tree.first_child + i;
  if (f->type == PLAIT_MSG_REQUESTS) return add_cb(c, child, f->payload, f->length);
  if (f->type != PLAIT_MSG_RELAYED)
    return plait_error(PLAIT_ERR_PROTOCOL, "rank %d sent message type %u on the control tree",
                       child, f->type);
  return plait_tree_each_item(c, child, f, add_cb, and_cb, c);
}

plait_result_t plait_tree_up_read(plait_control_t *c, int i) {
  int *fd = &c->tree.child_fds[i];
  while (*fd >= 0) {
    struct pollfd p = {*fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return PLAIT_SUCCESS;
    char who[64];
    snprintf(who, sizeof who, "rank %d", c->tree.first_child + i);
    plait_frame_t f;
    plait_result_t rc = plait_control_read_frame(*fd, PLAIT_WIRE_MAX_PAYLOAD,
                                                 plait_now() + c->timeout_s, who, &f);
    if (rc == PLAIT_ERR_PEER_LOST) { /* its star connection closed too: rank 0 names it */
      plait_net_close(fd);
      return PLAIT_SUCCESS;
    }
    if (rc == PLAIT_SUCCESS) rc = take_child_frame(c, i, &f);
    plait_frame_free(&f);
    if (rc) return plait_control_fail(c, rc);
  }
  return PLAIT_SUCCESS;
}

plait_result_t plait_tree_up_flush(plait_control_t *c, size_t *bytes) {
  plait_tree_t *t = &c->tree;
  if (!t->up_count) return PLAIT_SUCCESS;
  plait_frame_t f;
  plait_tree_up_frame(c, &f); /* the count filled in */
  t->up_count = 0;
  plait_result_t rc = plait_wr_end(&t->up);
  if (rc == PLAIT_SUCCESS && t->parent == 0) {
    rc = plait_control_send(c, 0, &t->up);
  } else if (rc == PLAIT_SUCCESS && t->parent_fd >= 0) {
    plait_io_t io = plait_net_write_full(t->parent_fd, t->up.data, t->up.len,
                                         plait_now() + c->timeout_s);
    if (io == PLAIT_IO_TIMEOUT)
      rc = plait_control_fail(c, plait_error(PLAIT_ERR_PEER_LOST, "rank %d was lost: it took no "
                                             "control message for %g s (PLAIT_TIMEOUT_S)",
                                             t->parent, c->timeout_s));
    else if (io && !t->parent_lost_at) /* rank 0 names who was lost (tree.h) */
      t->parent_lost_at = plait_now();
  }
  if (rc == PLAIT_SUCCESS) *bytes += t->up.len;
  plait_wr_free(&t->up);
  return rc;
}

void plait_tree_close(plait_tree_t *t) {
  plait_wr_free(&t->up);
  t->up_count = 0;
  plait_net_close(&t->parent_fd);
  plait_net_close(&t->listen_fd);
  if (t->child_fds)
    for (int i = 0; i < t->nchildren; i++) plait_net_close(&t->child_fds[i]);
  free(t->child_fds);
  t->child_fds = NULL;
  t->fanout = 0;
}
