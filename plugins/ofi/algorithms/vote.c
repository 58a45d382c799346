/*
 * vote: one byte's MIN over every rank, by dissemination (as barrier.c): in
 * round k = 0, 1, ... rank r sends its MIN so far to r + 2^k and takes the
 * MIN with the byte from r - 2^k; after ceil(log2 n) rounds every rank has
 * the MIN of all (MIN does not mind a byte counted twice).
 *
 * The caller may leave it at any look at the completion queue, or while a
 * send is refused for now (-FI_EAGAIN: rxm connects to a peer on the first
 * send, which needs the peer's progress): the round, what of it is posted
 * and the bytes live in st->vote, what is posted stays posted, and the next
 * call goes on from there. The core calls nothing else on the state
 * meanwhile.
 */
#include <math.h>
#include <string.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "engine/progress.h"

/* st->vote.posted: nothing of the round yet, its receive, or both. */
enum { NONE, RECV, BOTH };

static plait_result_t give_up(ofi_state_t *st, plait_result_t rc) {
  st->vote.pending = 0;
  return rc;
}

plait_result_t ofi_vote(ofi_state_t *st, uint8_t mine, uint8_t *out, double wait_s) {
  int n = st->nranks, r = st->rank;
  if (!st->vote.pending) {
    ofi_begin(st, "vote");
    memset(&st->vote, 0, sizeof st->vote);
    st->vote.acc = mine;
    st->vote.pending = 1;
  }
  double deadline = wait_s < 0 ? INFINITY : ofi_now() + wait_s;
  ofi_req_t *q = st->vote.q;
  for (int dist; (dist = 1 << st->vote.round) < n;) {
    uint32_t id = (uint32_t)st->vote.round;
    plait_result_t rc = PLAIT_SUCCESS;
    if (st->vote.posted == NONE) {
      memset(q, 0, 2 * sizeof *q);
      rc = ofi_post_recv(st, &q[0], (r - dist + n) % n, &st->vote.in, 1, NULL, id);
      if (rc) return give_up(st, rc);
      st->vote.posted = RECV;
    }
    if (st->vote.posted == RECV) {
      rc = ofi_post_send_until(st, &q[1], (r + dist) % n, &st->vote.acc, 1, NULL, id, deadline);
      if (rc == PLAIT_ERR_TIMEOUT) return rc; /* pending: the next call posts it */
      if (rc) return give_up(st, rc);
      st->vote.posted = BOTH;
    }
    rc = ofi_wait_all_until(st, q, 2, deadline);
    if (rc == PLAIT_ERR_TIMEOUT) return rc; /* pending: the next call goes on */
    if (rc) return give_up(st, rc);
    if (st->vote.in < st->vote.acc) st->vote.acc = st->vote.in;
    st->vote.posted = NONE;
    st->vote.round++;
  }
  st->vote.pending = 0;
  *out = st->vote.acc;
  return PLAIT_SUCCESS;
}
