/*
 * Internal: the AND of cached ids on the way up the control tree
 * (control/tree.h). A relaying rank (one with children in the tree) holds
 * the cached-id announcements of its subtree, one slot per part of it: its
 * own and each child's whole subtree. Once every slot has announced an id,
 * with one acked count, it sends one AND item up (PLAIT_TREE_AND: "every
 * rank below me announced id"), so its parent, and at last rank 0, reads
 * one item per id and per child whatever the job's size: the bytes each
 * rank sends up per operation are constant in N.
 *
 * Everything else goes up as before, as its origin's own REQUESTS payload:
 * names, flags (shutdown, failure reports), ids of other process sets than
 * the global one, and everything while a JOIN is pending in the subtree.
 * Before such a payload, what this rank holds for the slot it came through
 * goes up first, as items of that slot, so one rank's announcements keep
 * their order. An id held longer than hold_s, announced with another
 * acked count, or whose name comes by name from below (another shape: a
 * mismatch rank 0 must see at once), goes up slot by slot (the detail: a child's AND, or this
 * rank's own id with PLAIT_TREE_ONE), and the rest of that id's slots
 * follow as they come, so rank 0 names the ranks missing in a stall as it
 * does on the star. Rank 0 records an AND item once for the ranks it covers
 * (plait_neg_add_cover, cover.c), each counted as if it had announced the
 * id itself, so agreement, order and errors are the star's.
 *
 * Not thread-safe: the coordinator thread of a relaying rank owns it.
 */
#ifndef PLAIT_TREE_AND_H
#define PLAIT_TREE_AND_H

#include <stdint.h>

#include "control/control.h"
#include "engine/negotiate/cache.h"
#include "engine/negotiate/messages.h"

typedef struct plait_and_entry plait_and_entry_t;

typedef struct plait_and {
  plait_control_t *ctrl;
  const plait_cache_t *cache; /* this rank's: which ids are of the global set */
  int nslots;                 /* 1 + children */
  double hold_s;              /* longest an id waits for its slots before its detail goes */
  int joins;                  /* a JOIN went up: nothing is held until a join response ran */
  plait_and_entry_t **by_id;  /* held ids; NULL where none */
  int cap, nactive;
  uint64_t anded, detailed;   /* AND items of the whole subtree / items of one slot, sent */
} plait_and_t;

/* Off (nslots 0) unless this rank relays in a tree: then it sets the tree's
 * hooks to itself. hold_s > 0. */
plait_result_t plait_and_init(plait_and_t *a, plait_control_t *ctrl, const plait_cache_t *cache,
                              double hold_s);
void plait_and_free(plait_and_t *a);
int plait_and_on(const plait_and_t *a);

/* hold_s for a job: a quarter of the stall warning or abort time (the
 * smaller that is set), at most 1 s, at least the cycle time. */
double plait_and_hold_s(double stall_warn_s, double stall_abort_s, double cycle_s);

/* origin's REQUESTS payload (this rank's own, or one from below). */
plait_result_t plait_and_payload(plait_and_t *a, int origin, const uint8_t *p, size_t len,
                                 double now);
/* An AND item a child sent. */
plait_result_t plait_and_item(plait_and_t *a, const plait_tree_and_t *it, double now);
/* Sends up the detail of ids held longer than hold_s (before a flush). */
void plait_and_tick(plait_and_t *a, double now);
/* When the next id's hold ends; 0 when nothing is held. */
double plait_and_until(const plait_and_t *a);
/* This rank ran list l: a join response ends the pass-through of a JOIN. */
void plait_and_ran(plait_and_t *a, const plait_response_list_t *l);

#endif
