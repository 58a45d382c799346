/*
 * subset(): a communicator over some of the ranks (transport.h, subset).
 *
 * Every rank's endpoint is already in the address vector, so a subset needs
 * no communication: a member makes a state that shares its parent's
 * libfabric objects (endpoint, completion queue, address vector, domain)
 * with the subset's addresses and peers, its own rank numbering, collective
 * counter, scratch buffers and registrations, and its own communicator bits
 * in every tag (progress.h), so that its messages never match the parent's
 * or another subset's receives. Every rank of the parent counts the calls
 * (they are collective, made in the same order everywhere), so the same
 * subset gets the same bits on every member: 1 + (call number mod 15). Two
 * subsets made 15 calls apart share bits; their messages could only meet
 * if both ran collectives between the same two ranks at the same moment with
 * equal 12-bit collective numbers.
 */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "robustness/rescue.h"
#include "setup.h"
#include "subset.h"

plait_result_t ofi_subset(ofi_state_t *parent, const int *ranks, int n, ofi_state_t **out) {
  *out = NULL;
  OFI_REQUIRE(parent, ranks != NULL, "subset: ranks is NULL");
  OFI_REQUIRE(parent, n >= 1 && n <= parent->nranks, "subset: n is %d, not in [1, %d]", n,
              parent->nranks);
  int me = -1;
  for (int i = 0; i < n; i++) {
    OFI_REQUIRE(parent, ranks[i] >= 0 && ranks[i] < parent->nranks,
                "subset: ranks[%d] is %d, not a rank of [0, %d)", i, ranks[i], parent->nranks);
    OFI_REQUIRE(parent, i == 0 || ranks[i] > ranks[i - 1],
                "subset: ranks[] is not increasing at index %d (%d after %d)", i, ranks[i],
                ranks[i - 1]);
    if (ranks[i] == parent->rank) me = i;
  }
  uint32_t call = parent->subsets_made++;
  if (me < 0) return PLAIT_SUCCESS; /* not a member: nothing to make */
  ofi_state_t *st = calloc(1, sizeof *st);
  if (st) {
    st->addrs = parent->addrs ? calloc((size_t)n, sizeof *st->addrs) : NULL;
    st->peers = parent->peers ? calloc((size_t)n, sizeof *st->peers) : NULL;
    st->global_ranks = calloc((size_t)n, sizeof *st->global_ranks);
  }
  if (!st || (parent->addrs && !st->addrs) || (parent->peers && !st->peers) ||
      !st->global_ranks) {
    if (st) free(st->addrs), free(st->peers), free(st->global_ranks);
    free(st);
    return ofi_fail(parent, PLAIT_ERR_NO_MEMORY, "subset: out of memory");
  }
  for (int i = 0; i < n; i++) {
    if (st->addrs) st->addrs[i] = parent->addrs[ranks[i]];
    if (st->peers) st->peers[i] = parent->peers[ranks[i]];
    st->global_ranks[i] = ranks[i];
  }
  st->rank = me;
  st->nranks = n;
  st->timeout_s = parent->timeout_s;
  st->yield_s = parent->yield_s;
  st->log = parent->log;
  st->log_level = parent->log_level;
  st->reduce = parent->reduce;
  st->scale = parent->scale;
  st->reduce_scale = parent->reduce_scale;
  st->divide = parent->divide;
  st->tun = parent->tun;
  st->info = parent->info;
  st->fabric = parent->fabric;
  st->domain = parent->domain;
  st->av = parent->av;
  st->cq = parent->cq;
  st->ep = parent->ep;
  memcpy(st->provider, parent->provider, sizeof st->provider);
  st->need_mr = parent->need_mr;
  st->mr_endpoint = parent->mr_endpoint;
  st->mr_prov_key = parent->mr_prov_key;
  st->next_key = ((uint64_t)(call + 1) << 40) + 1; /* keys apart from the parent's */
  st->inject_size = parent->inject_size;
  st->max_msg = parent->max_msg;
  st->iov_limit = parent->iov_limit;
  st->direct = parent->direct; /* members of a set that could all read each other */
  st->comm = 1 + call % 15;
  st->parent = parent;
  if (n > 1 && ofi_rescue_start(st) != PLAIT_SUCCESS) { /* its own watchdog (rescue.h) */
    plait_result_t rc = ofi_fail(parent, PLAIT_ERR_SYSTEM, "subset: %s", st->err);
    ofi_stop(st);
    return rc;
  }
  *out = st;
  OFI_DEBUG(st, "subset of %d ranks made: rank %d there (rank %d of the parent), tag bits %u",
            n, me, parent->rank, st->comm);
  return PLAIT_SUCCESS;
}
