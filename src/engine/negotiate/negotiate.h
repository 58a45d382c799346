/*
 * Internal: rank 0's side of negotiation. Every rank's requests (rank 0's own
 * included) are recorded by name within their process set; an operation is
 * ready when every rank of its set has announced it (a rank that joined counts as present for allreduce and
 * allgather). Ready operations are checked for agreement (a mismatch becomes
 * an error response naming the tensor, each value and the ranks that sent
 * it). Each tick (plait_neg_plan) then, in this order: looks for a deadlock
 * (engine/negotiate/deadlock.h: ranks that each wait on operations only the others
 * could complete, with nothing moving for PLAIT_STALL_WARN_S), inspects stalls
 * (warns about, and optionally fails, operations that some ranks have not
 * announced), releases the ready operations (a group only whole), plans them
 * with plait_fusion_plan (engine/negotiate/fusion.h: allreduces with the same dtype,
 * op, scale factors and device fused up to the fusion threshold, looking past
 * operations of other kinds in between) and builds the response list.
 * Not thread-safe: the coordinator thread of rank 0 owns the negotiator.
 */
#ifndef PLAIT_NEGOTIATE_H
#define PLAIT_NEGOTIATE_H

#include "engine/negotiate/burst.h"
#include "engine/negotiate/cache.h"
#include "engine/negotiate/deadlock.h"
#include "util/config.h"
#include "engine/negotiate/fusion.h"
#include "engine/submit/namemap.h"
#include "engine/negotiate/messages.h"

typedef struct plait_record {
  char *name;
  char *key;           /* name within its process set (plait_op_key); name itself
                          for the global set */
  int32_t pset;        /* its process set */
  uint8_t *member;     /* per rank: a member of pset; NULL when pset is unknown
                          (member, metas and have: in the record's own block) */
  int nmembers;
  plait_meta_t *metas; /* per rank, valid where have[r] */
  uint8_t *have;       /* 1: announced (metas[r] its own); 2: covered by a subtree's AND
                          item (metas[r] unset: plait_record_meta finds the root's; cover.c) */
  int fanout;          /* the control tree's, where a slot is covered (have 2) */
  int nown;            /* slots with have 1 (their metadata to free) */
  int count;
  int cache_id;        /* >= 0 when known to be cached with this metadata */
  double first_seen;
  uint64_t arrival;
  int warned;
  int counted;         /* counted towards its group */
  uint32_t status;     /* set when agreed: 0 or an error */
  char *message;
} plait_record_t;

void plait_record_free(plait_record_t *rec, int size);
/* Rank r's metadata in rec (have[r] set): its own, or for a rank covered by
 * a subtree's AND item, the subtree root's. */
const plait_meta_t *plait_record_meta(const plait_record_t *rec, int r);
/* The first rank that announced rec: its metadata stands for every rank's
 * once they agree. */
int plait_record_ref(const plait_record_t *rec, int size);

typedef struct plait_psets plait_psets_t;

typedef struct plait_negotiator {
  int size;
  plait_psets_t *psets;     /* the engine's process sets: who must announce what */
  uint64_t threshold;       /* fusion threshold, bytes; 0: no fusion */
  uint64_t max_tensor;      /* larger allreduces are never fused; 0: no limit */
  int device_solo;          /* device tensors never fuse (the transport has no batch_copy) */
  double stall_warn_s, stall_abort_s;
  plait_cache_t *cache;     /* rank 0's response cache */
  plait_namemap_t records;  /* name -> record, until planned */
  plait_namemap_t groups;   /* group -> count of ready members */
  plait_record_t **ready;   /* agreed, in order, waiting to be planned */
  int nready, cap;
  uint8_t *joined;
  int njoined, last_joined;
  uint64_t arrivals;        /* numbers records in order of first arrival */
  double last_stall_check;
  int shutdown_rank;        /* first rank to ask to shut down, -1 none */
  uint64_t lists_sent;      /* response lists sent so far (numbered from 1) */
  /* Records failed before every rank announced them: name -> tombstone, so an
   * announcement already in flight then is recognised and dropped. */
  plait_namemap_t tombstones;
  /* Dispatch: ready operations go in the tick they become ready, unless one
   * of them still misses a companion from its last burst (engine/negotiate/burst.h);
   * then they are held, at most hold_s (PLAIT_CYCLE_TIME_MS) from the tick
   * that first held them, or until they fill the fusion threshold. */
  plait_bursts_t bursts;
  double hold_s;            /* 0: never hold */
  double held_since;        /* the tick that first held the ready ones, < 0 none */
  int holding;              /* the last tick held ready operations back */
  int *scratch;             /* cache ids of a tick, kept between ticks */
  int scratch_cap;
  plait_deadlock_t deadlock; /* who moved when (engine/negotiate/deadlock.h) */
  uint64_t rank_scans;      /* ranks the readiness rule looked at (none without a join) */
  uint64_t lookups;         /* records looked up by key: one per announcement, and one per
                               subtree's AND item (plait_neg_add_cover), not per rank it covers */
} plait_negotiator_t;

/* Whether rank r must still announce rec: a member of its set that has not,
 * and not a joined rank of the global set (the readiness rule counts it as
 * present, or fails rec naming it). */
int plait_neg_missing(const plait_negotiator_t *n, const plait_record_t *rec, int r);

/* Fails a pending record before every rank announced it: an error response
 * with status and message (taken; NULL: the code's text), and a tombstone
 * so that announcements of it still on their way are dropped. */
plait_result_t plait_neg_fail_record(plait_negotiator_t *n, plait_record_t *rec,
                                     uint32_t status, char *message);

/* While holding: when the tick must run again at the latest. */
double plait_neg_hold_until(const plait_negotiator_t *n);

plait_result_t plait_neg_init(plait_negotiator_t *n, int size, const plait_config_t *cfg,
                              plait_cache_t *cache);
void plait_neg_free(plait_negotiator_t *n);

/* Records one request from rank (cache ids already resolved into name and
 * metadata). A request that cannot be right (the rank announced the name
 * twice) is PLAIT_ERR_PROTOCOL naming the rank. */
plait_result_t plait_neg_add(plait_negotiator_t *n, int rank, const char *name,
                             const plait_meta_t *meta, int cache_id, uint64_t acked);

/* cover.c: records an AND item of the control tree (tree_and.h): every rank
 * of root's subtree in a tree of fan-out k (root alone when k is 0)
 * announced name with meta (from the cache, so the same for each). One
 * record lookup and one metadata copy for the whole subtree; each covered
 * rank's slot is marked (have 2) with a shallow copy of it, so stalls,
 * deadlocks, agreement and responses see every rank as plait_neg_add would
 * record it. Where a rank-by-rank rule applies (a tombstone of name, a
 * join, a rank that already announced it, a process set other than the
 * global one) it records rank by rank with plait_neg_add, errors included. */
plait_result_t plait_neg_add_cover(plait_negotiator_t *n, int root, int k, const char *name,
                                   const plait_meta_t *meta, int cache_id, uint64_t acked);

/* The tick: inspects stalls (at now), releases what is ready (unless it
 * holds it for expected companions, see hold_s), plans fusion and builds the
 * next response list into out (which the caller frees with
 * plait_responses_free); *any says whether it holds anything to send. */
plait_result_t plait_neg_plan(plait_negotiator_t *n, double now, plait_response_list_t *out,
                              int *any);

/* Fails every pending record (used at shutdown): each becomes an error
 * response with rc and a message naming the tensor. */
plait_result_t plait_neg_fail_all(plait_negotiator_t *n, plait_result_t rc, const char *why,
                                  plait_response_list_t *out);

/* The tick's last step (responses.c): the response list for count released
 * records (taken in order, not freed) planned into nb bins; join_rank is the
 * last rank to join, for a join response. Gives cache ids in n->cache. */
/* negotiate_pset.c: fills rec->member (n->size bytes, allocated with the
 * record) and rec->nmembers from rec->pset (member becomes NULL for a set
 * that does not exist); 0. */
int plait_neg_set_members(plait_negotiator_t *n, plait_record_t *rec);
/* negotiate_pset.c: an agreed PSET_REMOVE record fails (status, message)
 * when its set does not exist or has operations pending. */
void plait_neg_check_removal(plait_negotiator_t *n, plait_record_t *rec);

plait_result_t plait_neg_respond(plait_negotiator_t *n, plait_record_t **recs, int count,
                                 const plait_fusion_bin_t *bins, int nb, const int *bin_of,
                                 int join_rank, plait_response_list_t *out);

#endif
