/* The control-plane tree: its shape, and relaying rank 0's lists down it
 * (tree.h). Connecting the links is tree_connect.c. */
#include "control/tree.h"

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

void plait_tree_close(plait_tree_t *t) {
  plait_net_close(&t->parent_fd);
  plait_net_close(&t->listen_fd);
  if (t->child_fds)
    for (int i = 0; i < t->nchildren; i++) plait_net_close(&t->child_fds[i]);
  free(t->child_fds);
  t->child_fds = NULL;
  t->fanout = 0;
}
