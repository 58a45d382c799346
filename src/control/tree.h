/*
 * Internal: the control-plane tree (PLAIT_CONTROL_FANOUT=k). Rank 0's
 * response lists go DOWN a tree of fan-out k instead of from rank 0 to every
 * rank: rank r > 0 has parent (r-1)/k and children r*k+1 .. r*k+k (those
 * below the job's size). Rank 0's children (ranks 1..k) keep their star
 * connection as their tree link; every other rank holds one more TCP
 * connection, to its parent, authenticated as the star's are (HMAC
 * challenge-response over the job secret, roles of their own). A rank relays
 * each list to its children before it runs it, so every rank still runs the
 * same lists in the same order.
 *
 * Announcements go UP the same links: a rank below rank 0's children sends
 * its REQUESTS payloads to its parent, and every rank forwards what its
 * subtree sent, batched into one RELAYED frame per cycle, each payload
 * with its origin rank; rank 0's children forward theirs over the star. So
 * rank 0 reads about k frames per operation instead of N-1, and records
 * every rank's requests exactly as if it had sent them itself (its own
 * acked count, its own order: one rank's requests all take one path).
 * A rank with children ANDs its subtree's cached ids on the way
 * (engine/negotiate/tree_and.h, through the hooks below): one item per id instead of
 * one payload per rank. Everything else stays on the star: heartbeats, failure reports, blame,
 * errors, ABORT. A job of up to k+1 ranks (or k < 2) has no tree: the
 * star of before, byte for byte. A rank whose parent link closes waits for
 * rank 0's ABORT on the star (rank 0 sees the lost rank's star connection
 * close and names it); after PLAIT_TIMEOUT_S without one it names its parent
 * itself.
 *
 * Not thread-safe: the control plane's one thread uses it (control.h).
 */
#ifndef PLAIT_CONTROL_TREE_H
#define PLAIT_CONTROL_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "plait/plait.h"
#include "control/wire.h"

struct plait_control;
struct plait_frame;

/* An item of a RELAYED frame is a REQUESTS payload of its origin rank, or
 * (origin | PLAIT_TREE_AND) the AND of one cached id (engine/negotiate/tree_and.h):
 * every rank of the subtree of its root announced the id, each with the
 * same acked count; with PLAIT_TREE_ONE its root rank alone did. Its blob
 * is the id (u32) and the acked count (u64). */
#define PLAIT_TREE_AND 0x80000000u
#define PLAIT_TREE_ONE 0x40000000u
#define PLAIT_TREE_AND_BLOB 12

typedef struct plait_tree_and {
  int root;       /* every rank below root (root included) announced id ... */
  int one;        /* ... or root alone */
  int32_t id;
  uint64_t acked;
} plait_tree_and_t;

/* What a relaying rank does with what its children sent (the engine's AND,
 * engine/negotiate/tree_and.h): origin's REQUESTS payload, or an AND item; without
 * hooks each goes up as it came. */
typedef struct plait_tree_hooks {
  plait_result_t (*payload)(void *arg, int origin, const uint8_t *p, size_t len);
  plait_result_t (*and_item)(void *arg, const plait_tree_and_t *a);
  void *arg;
} plait_tree_hooks_t;

typedef struct plait_tree {
  int fanout;      /* k; 0: no tree (the star carries every list) */
  int parent;      /* rank 0: -1 */
  int parent_fd;   /* -1: the parent is rank 0 (the star connection), or none */
  int first_child; /* children: first_child .. first_child + nchildren - 1 */
  int nchildren;
  int *child_fds;  /* rank > 0: one per child; rank 0: NULL (the star's) */
  int listen_fd;   /* only while the tree is being connected */
  double parent_lost_at; /* when the parent link closed; 0: it has not */
  plait_writer_t up;     /* the RELAYED frame being batched */
  uint32_t up_count;     /* payloads in it */
  plait_tree_hooks_t hooks; /* payload NULL: none */
} plait_tree_t;

/* The shape: whether a job of size ranks has a tree with fan-out k, rank r's
 * parent (-1 for rank 0), and its children (the count; *first the lowest). */
int plait_tree_active(int k, int size);
int plait_tree_parent(int r, int k);
int plait_tree_children(int r, int k, int size, int *first);
/* Hops from rank 0 down to the deepest rank (0 without a tree). */
int plait_tree_depth(int k, int size);

/* After the star is up (plait_control_start): connects and authenticates the
 * tree links of a job with fan-out k, every rank taking part. With no tree
 * (plait_tree_active false) does nothing and sends nothing. Fails within
 * the start timeout naming the rank at fault, never hangs. */
plait_result_t plait_tree_connect(struct plait_control *c, int k);

/* Whether this rank receives its lists from a parent other than rank 0. */
int plait_tree_has_parent_link(const struct plait_control *c);

/* Reads the next list from the parent link (rank > 0 with a parent above
 * rank 1..k). A closed link is not an error at once: it sets
 * parent_lost_at and returns PLAIT_SUCCESS with out->type 0 (no frame). */
plait_result_t plait_tree_recv(struct plait_control *c, struct plait_frame *out);

/* Relays a list frame (type and payload as received) to this rank's
 * children, before this rank runs it. A child whose link is gone is
 * skipped (rank 0 names it); a child that takes no bytes for
 * PLAIT_TIMEOUT_S is lost, named. */
plait_result_t plait_tree_relay(struct plait_control *c, const struct plait_frame *f);

/* Whether this rank's own announcements go up the tree (a rank below rank
 * 0's children) rather than over the star. */
int plait_tree_sends_up(const struct plait_control *c);
/* Adds origin's REQUESTS payload to the batch going up. */
void plait_tree_up_add(struct plait_control *c, int origin, const uint8_t *payload, size_t len);
/* Adds an AND item (see PLAIT_TREE_AND) to the batch going up. */
void plait_tree_up_and(struct plait_control *c, const plait_tree_and_t *a);
/* The batch as a frame (f->payload points into it; valid until the next
 * add or flush); f->type 0 when it is empty. */
void plait_tree_up_frame(struct plait_control *c, struct plait_frame *f);
/* Reads what child i (0 .. nchildren-1) sent (its readiness polled) into
 * the batch. A closed child link is dropped (rank 0 names the rank). */
plait_result_t plait_tree_up_read(struct plait_control *c, int i);
/* Sends the batch to the parent (rank 0's children: over the star); adds
 * the bytes sent to *bytes. Nothing to send: nothing sent. */
plait_result_t plait_tree_up_flush(struct plait_control *c, size_t *bytes);
/* Calls fn for each payload of a RELAYED frame that rank `via` sent, and
 * and_fn for each AND item, in the order they were sent, after checking
 * that its origin (root) lies below via; PLAIT_ERR_PROTOCOL naming via for
 * an origin that does not, or a malformed frame or item; a callback's
 * failure stops. and_fn NULL: AND items are checked and skipped. */
typedef plait_result_t (*plait_tree_payload_fn)(void *arg, int origin, const uint8_t *payload,
                                                size_t len);
typedef plait_result_t (*plait_tree_and_fn)(void *arg, const plait_tree_and_t *a);
plait_result_t plait_tree_each_item(const struct plait_control *c, int via,
                                    const struct plait_frame *f, plait_tree_payload_fn fn,
                                    plait_tree_and_fn and_fn, void *arg);
/* plait_tree_each_item without and_fn. */
plait_result_t plait_tree_each_relayed(const struct plait_control *c, int via,
                                      const struct plait_frame *f, plait_tree_payload_fn fn,
                                      void *arg);
/* Whether origin lies in the subtree of rank `via` (1..k). */
int plait_tree_below(int origin, int via, int k);

/* PLAIT_ERR_PEER_LOST naming the parent once its link has been closed for
 * PLAIT_TIMEOUT_S with no ABORT from rank 0; PLAIT_SUCCESS otherwise. */
plait_result_t plait_tree_check(struct plait_control *c);

void plait_tree_close(plait_tree_t *t);

#endif
