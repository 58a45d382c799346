/* Bootstrap collectives: gather at rank 0, check, answer every rank. */
#include "control/bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"
#include "control/messages.h"

typedef plait_msg_boot_data_t contribution_t;

/* KIND_FAIL: not a collective but a rank's failure (root: the code, data: the
 * message), sent in place of whatever the others call; rank 0 fails that
 * collective on every rank with it. */
enum { KIND_ALLGATHER = 1, KIND_BROADCAST = 2, KIND_BARRIER = 3, KIND_FAIL = 4 };

static const char *kind_name(unsigned k) {
  return k == KIND_ALLGATHER ? "allgather" : k == KIND_BROADCAST ? "broadcast"
                                           : k == KIND_BARRIER   ? "barrier"
                                           : k == KIND_FAIL      ? "failure" : "?";
}

/* The first rank that sent a failure, as this collective's error; 0 if none. */
static plait_result_t reported_failure(const contribution_t *cs, int n) {
  for (int r = 1; r < n; r++) {
    if (cs[r].kind != KIND_FAIL) continue;
    int code = cs[r].root;
    int len = cs[r].data_len > 1000 ? 1000 : (int)cs[r].data_len;
    return plait_error(code > 0 && code < PLAIT_RESULT_COUNT_ ? (plait_result_t)code
                                                              : PLAIT_ERR_PROTOCOL,
                       "rank %d failed: %.*s", r, len, (const char *)cs[r].data);
  }
  return PLAIT_SUCCESS;
}

void plait_boot_init(plait_boot_t *b, plait_control_t *ctrl) {
  memset(b, 0, sizeof *b);
  b->ctrl = ctrl;
  b->api.size = sizeof b->api;
  b->api.ctx = b;
  b->api.rank = ctrl->rank;
  b->api.nranks = ctrl->size;
  b->api.allgather = plait_boot_allgather;
  b->api.broadcast = plait_boot_broadcast;
  b->api.barrier = plait_boot_barrier;
}

static plait_result_t parse(const plait_frame_t *f, contribution_t *c, int from) {
  plait_result_t rc = plait_msg_decode_boot_data(f->payload, f->length, c);
  return rc ? plait_error_context(rc, "from rank %d", from) : PLAIT_SUCCESS;
}

/* Every rank must have called the same collective with the same arguments. */
static plait_result_t check(const contribution_t *mine, const contribution_t *c, int r) {
  if (c->seq != mine->seq || c->kind != mine->kind || c->root != mine->root ||
      c->bytes != mine->bytes)
    return plait_error(PLAIT_ERR_PROTOCOL,
                       "bootstrap mismatch: rank 0 called %s #%u (root %d, %llu bytes) but rank "
                       "%d called %s #%u (root %d, %llu bytes)",
                       kind_name(mine->kind), mine->seq, mine->root,
                       (unsigned long long)mine->bytes, r, kind_name(c->kind), c->seq, c->root,
                       (unsigned long long)c->bytes);
  size_t expect = c->kind == KIND_ALLGATHER || (c->kind == KIND_BROADCAST && c->root == r)
                      ? (size_t)c->bytes : 0;
  if (c->data_len != expect)
    return plait_error(PLAIT_ERR_PROTOCOL, "bootstrap %s: rank %d sent %zu bytes, expected %zu",
                       kind_name(c->kind), r, c->data_len, expect);
  return PLAIT_SUCCESS;
}

/* Rank 0: gather, check, build and send the answer; result gets the data
 * (allgather: size*bytes, broadcast: bytes). */
static plait_result_t root_exchange(plait_boot_t *b, const contribution_t *mine, uint8_t *result) {
  plait_control_t *c = b->ctrl;
  int n = c->size;
  plait_frame_t *frames = calloc((size_t)n, sizeof *frames);
  contribution_t *cs = calloc((size_t)n, sizeof *cs);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!frames || !cs) {
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory in bootstrap");
    goto out;
  }
  PLAIT_CHECK_GOTO(rc, plait_control_gather(c, PLAIT_MSG_BOOT_DATA, frames), out);
  cs[0] = *mine;
  for (int r = 1; r < n && rc == PLAIT_SUCCESS; r++) rc = parse(&frames[r], &cs[r], r);
  if (rc == PLAIT_SUCCESS) rc = reported_failure(cs, n);
  for (int r = 1; r < n && rc == PLAIT_SUCCESS; r++) rc = check(mine, &cs[r], r);
  if (rc == PLAIT_SUCCESS && mine->kind == KIND_ALLGATHER) {
    for (int r = 0; r < n; r++)
      if (mine->bytes) memcpy(result + (size_t)r * mine->bytes, cs[r].data, mine->bytes);
  } else if (rc == PLAIT_SUCCESS && mine->kind == KIND_BROADCAST && mine->bytes) {
    memmove(result, cs[mine->root].data, mine->bytes);
  }
  size_t out_len = mine->kind == KIND_ALLGATHER ? (size_t)n * mine->bytes
                   : mine->kind == KIND_BROADCAST ? mine->bytes : 0;
  plait_msg_boot_result_t answer = {mine->seq, (uint32_t)rc, "", result, rc ? 0 : out_len};
  if (rc) snprintf(answer.text, sizeof answer.text, "%s", plait_last_error());
  plait_writer_t w = {0};
  plait_result_t wrc = plait_msg_encode_boot_result(&w, &answer);
  for (int r = 1; r < n && wrc == PLAIT_SUCCESS; r++) wrc = plait_control_send(c, r, &w);
  plait_wr_free(&w);
  if (rc == PLAIT_SUCCESS) rc = wrc;
out:
  if (frames)
    for (int r = 0; r < n; r++) plait_frame_free(&frames[r]);
  free(frames);
  free(cs);
  return rc;
}

/* Rank > 0: send the contribution, wait for rank 0's answer. */
static plait_result_t peer_exchange(plait_boot_t *b, const contribution_t *mine, uint8_t *result,
                                    size_t result_len) {
  plait_control_t *c = b->ctrl;
  plait_writer_t w = {0};
  plait_result_t rc = plait_msg_encode_boot_data(&w, mine);
  if (rc == PLAIT_SUCCESS) rc = plait_control_send(c, 0, &w);
  plait_wr_free(&w);
  PLAIT_CHECK(rc);
  plait_frame_t f;
  PLAIT_CHECK(plait_control_recv(c, 0, PLAIT_MSG_BOOT_RESULT, &f));
  plait_msg_boot_result_t a;
  rc = plait_msg_decode_boot_result(f.payload, f.length, &a);
  uint32_t seq = a.seq, status = a.status;
  const char *msg = a.text;
  size_t len = a.data_len;
  const uint8_t *data = a.data;
  if (rc == PLAIT_SUCCESS && seq != mine->seq)
    rc = plait_error(PLAIT_ERR_PROTOCOL, "bootstrap answer #%u from rank 0, expected #%u", seq,
                     mine->seq);
  if (rc == PLAIT_SUCCESS && status != 0)
    rc = plait_error(status < PLAIT_RESULT_COUNT_ ? (plait_result_t)status : PLAIT_ERR_PROTOCOL,
                     "%s", msg);
  if (rc == PLAIT_SUCCESS && len != result_len)
    rc = plait_error(PLAIT_ERR_PROTOCOL, "bootstrap answer of %zu bytes, expected %zu", len,
                     result_len);
  if (rc == PLAIT_SUCCESS && len) memcpy(result, data, len);
  plait_frame_free(&f);
  return rc;
}

static plait_result_t exchange(plait_boot_t *b, uint8_t kind, int root, const void *data,
                               size_t data_len, uint64_t bytes, uint8_t *result,
                               size_t result_len) {
  if (b->ctrl->size == 1) {
    if (result_len && data) memmove(result, data, result_len);
    return PLAIT_SUCCESS;
  }
  contribution_t mine = {b->seq++, kind, root, bytes, data, data_len};
  plait_result_t rc = b->ctrl->rank == 0 ? root_exchange(b, &mine, result)
                                         : peer_exchange(b, &mine, result, result_len);
  if (rc) PLAIT_DEBUG("boot", "%s #%u failed: %s", kind_name(kind), mine.seq, plait_last_error());
  if (rc && !b->failed) {
    b->failed = rc;
    snprintf(b->fail_msg, sizeof b->fail_msg, "%s", plait_last_error());
  }
  return rc;
}

plait_result_t plait_boot_allgather(void *ctx, const void *send, size_t bytes, void *recv) {
  plait_boot_t *b = ctx;
  if (!b || (bytes && (!send || !recv)))
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "bootstrap allgather: NULL buffer");
  size_t total = bytes * (size_t)b->ctrl->size;
  if (bytes && total / bytes != (size_t)b->ctrl->size)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "bootstrap allgather: size overflow");
  if (b->ctrl->size == 1) {
    if (bytes) memmove(recv, send, bytes);
    return PLAIT_SUCCESS;
  }
  return exchange(b, KIND_ALLGATHER, 0, send, bytes, bytes, recv, total);
}

plait_result_t plait_boot_broadcast(void *ctx, void *buf, size_t bytes, int root) {
  plait_boot_t *b = ctx;
  if (!b || (bytes && !buf))
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "bootstrap broadcast: NULL buffer");
  if (root < 0 || root >= b->ctrl->size)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "bootstrap broadcast: root %d is not a rank "
                       "of %d", root, b->ctrl->size);
  if (b->ctrl->size == 1) return PLAIT_SUCCESS;
  int is_root = b->ctrl->rank == root;
  return exchange(b, KIND_BROADCAST, root, is_root ? buf : NULL, is_root ? bytes : 0, bytes, buf,
                  bytes);
}

plait_result_t plait_boot_barrier(void *ctx) {
  plait_boot_t *b = ctx;
  if (!b) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "bootstrap barrier: NULL context");
  if (b->ctrl->size == 1) return PLAIT_SUCCESS;
  return exchange(b, KIND_BARRIER, 0, NULL, 0, 0, NULL, 0);
}

plait_result_t plait_boot_fail(plait_boot_t *b, plait_result_t rc) {
  char why[PLAIT_MSG_TEXT_MAX - 64];
  snprintf(why, sizeof why, "%s", plait_last_error());
  plait_control_t *c = b->ctrl;
  if (b->failed) /* the cause was elsewhere, and every rank knows it */
    return plait_error(b->failed, "%s (on this rank: %.700s)", b->fail_msg, why);
  if (c->size == 1 || c->failed) return plait_error(rc, "%s", why); /* nobody left to tell */
  if (c->rank == 0) {
    plait_error(rc, "rank 0 failed: %s", why);
    plait_control_fail(c, rc); /* ABORT with that message to every rank */
    return plait_error(rc, "%s", why);
  }
  contribution_t mine = {b->seq++, KIND_FAIL, (int32_t)rc, strlen(why), (const uint8_t *)why,
                         strlen(why)};
  plait_writer_t w = {0};
  plait_result_t src = plait_msg_encode_boot_data(&w, &mine);
  if (src == PLAIT_SUCCESS) src = plait_control_send(c, 0, &w);
  plait_wr_free(&w);
  plait_frame_t f;
  /* Rank 0's answer (or ABORT) says the others know; bounded by the timeout. */
  if (src == PLAIT_SUCCESS && plait_control_recv(c, 0, PLAIT_MSG_BOOT_RESULT, &f) == PLAIT_SUCCESS)
    plait_frame_free(&f);
  return plait_error(rc, "%s", why);
}
