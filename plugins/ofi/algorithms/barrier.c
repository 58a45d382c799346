/*
 * barrier: dissemination (Hensgen, Finkel & Manber). In round k = 0, 1, ...
 * rank r sends an empty message to r + 2^k and waits for one from r - 2^k;
 * after ceil(log2 n) rounds every rank has heard, indirectly, from all.
 */
#include <string.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "engine/progress.h"

plait_result_t ofi_barrier(ofi_state_t *st) {
  int n = st->nranks, r = st->rank;
  uint32_t round = 0;
  for (int dist = 1; dist < n; dist <<= 1, round++) {
    ofi_req_t q[2];
    memset(q, 0, sizeof q);
    OFI_CHECK(ofi_post_recv(st, &q[0], (r - dist + n) % n, NULL, 0, NULL, round));
    OFI_CHECK(ofi_post_send(st, &q[1], (r + dist) % n, NULL, 0, NULL, round));
    OFI_CHECK(ofi_wait_all(st, q, 2));
  }
  return PLAIT_SUCCESS;
}
