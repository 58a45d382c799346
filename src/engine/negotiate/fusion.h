/*
 * Internal: fusion as pure functions of their arguments (no I/O, no globals,
 * no allocation, no callbacks): which released operations share one
 * collective (plait_fusion_plan, rank 0), and where each tensor lies in the
 * fusion buffer (plait_fusion_layout_add, which rank 0's planner and every
 * rank's executor both call, so they cannot disagree about the buffer).
 * Any thread; nothing here blocks or fails.
 */
#ifndef PLAIT_FUSION_H
#define PLAIT_FUSION_H

#include <stdint.h>

/* Fusion-buffer entries start at multiples of this many bytes (when there
 * are two or more of them). */
#define PLAIT_FUSION_ALIGN 64

/* The layout of a fusion buffer, built one tensor at a time from {0}. */
typedef struct plait_fusion_layout {
  uint32_t n;      /* tensors laid out */
  uint64_t padded; /* their slots' bytes, each padded to PLAIT_FUSION_ALIGN */
  uint64_t size;   /* the buffer's bytes: padded, or a lone tensor's own bytes */
} plait_fusion_layout_t;

/* Appends a tensor of `bytes` bytes to l and returns its offset (0, then
 * multiples of PLAIT_FUSION_ALIGN). A lone tensor is not padded: every rank
 * passes the transport the same count whether it holds the tensor or stands
 * in for it after a join; with two or more every slot is padded. */
uint64_t plait_fusion_layout_add(plait_fusion_layout_t *l, uint64_t bytes);

/* What fusion compares: allreduces fuse only when all of these are equal. */
typedef struct plait_fusion_key {
  uint8_t dtype, op; /* plait_dtype_t, plait_op_t */
  int32_t device;
  double prescale, postscale;
  int32_t pset; /* process set: each runs on its own communicator */
} plait_fusion_key_t;

/* One released operation, as the planner sees it. */
typedef struct plait_fusion_item {
  uint8_t coll;   /* plait_coll_t: only allreduces fuse */
  uint8_t failed; /* an error response: runs alone */
  uint8_t solo;   /* runs alone: device memory on a transport without batch_copy */
  plait_fusion_key_t key;
  uint64_t bytes; /* the tensor's own bytes */
} plait_fusion_item_t;

/* One planned response: its members are the items i with bin_of[i] == its
 * index, in item order. */
typedef struct plait_fusion_bin {
  int first;                    /* its first item; bins are in order of it */
  int count;                    /* its items */
  int open;                     /* still taking members when planning ended */
  plait_fusion_layout_t layout; /* its members' fusion-buffer layout */
} plait_fusion_bin_t;

/* Plans n items (in release order) into bins, one response each, and
 * returns how many. An allreduce that has not failed, with threshold > 0 and
 * bytes <= max_tensor (0: no limit), joins the first open bin of the same
 * key whose layout with it stays within threshold bytes; a bin it does not
 * fit closes (later ones of that key start a new bin). Anything else is a bin
 * of its own. Bins look past items of other kinds and keys in between.
 * bins and bin_of hold n each (NULL allowed when n is 0). */
int plait_fusion_plan(const plait_fusion_item_t *items, int n, uint64_t threshold,
                      uint64_t max_tensor, plait_fusion_bin_t *bins, int *bin_of);

#endif
