/*
 * Which algorithm a size gets: below each switch point (tunables.h, the
 * PLAIT_OFI_*_MIN settings, rank 0's on every rank) and within the
 * provider's largest message, the small one. algorithms/ follow these
 * rules, plugin.c's algorithm() reports them and engine/spans.c asks one.
 */
#ifndef PLAIT_OFI_SIZES_H
#define PLAIT_OFI_SIZES_H

#include "state.h"

/* total: bytes in all; largest: the largest single message the small
 * algorithm would send. */
static inline int ofi_allreduce_small(const ofi_state_t *st, size_t bytes) {
  return bytes < st->tun.allreduce_ring_min && bytes <= st->max_msg;
}
static inline int ofi_allgatherv_small(const ofi_state_t *st, size_t total, size_t largest) {
  return total < st->tun.allgatherv_ring_min && largest <= st->max_msg;
}
static inline int ofi_broadcast_small(const ofi_state_t *st, size_t bytes) {
  return bytes < st->tun.broadcast_chain_min && bytes <= st->max_msg;
}
static inline int ofi_reducescatter_small(const ofi_state_t *st, size_t total, size_t largest) {
  return total < st->tun.reducescatter_ring_min && largest <= st->max_msg;
}

#endif
