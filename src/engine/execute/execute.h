/*
 * Internal: running a response on this rank, the same on every rank. The
 * coordinator thread calls it for each response rank 0 decided, in order.
 *
 * This is the execute wing's interface, what the hall (coordinator.c) calls:
 * the executor's state, init and free, run, finish, fail_all, settle; device work still
 * running is in pending.h. What the wing's own files share is in
 * execute_internal.h, which nothing outside engine/execute/ includes.
 */
#ifndef PLAIT_EXECUTE_H
#define PLAIT_EXECUTE_H

#include "engine/submit/namemap.h"
#include "util/error.h"
#include "engine/negotiate/messages.h"
#include "plait/transport.h"
#include "engine/observe/stats.h"
#include "engine/submit/table.h"
#include "engine/observe/timeline.h"

struct plait_pending; /* pending.h: device work awaiting the plugin's done */
struct plait_devmem;  /* execute_device.c: device outputs owned by handles */
struct plait_scratch; /* execute_internal.h: device memory freed after a response */

/* The cached epoch's round of one small tensor, whose allreduce carries this
 * rank's vote (the transport's vote_allreduce; coordinator_epoch.c): what
 * goes in, and what came of it. */
typedef struct plait_exec_carry {
  uint8_t mine;   /* this rank's vote */
  double wait_s;  /* how long a waiting caller may stay in it (< 0: no limit) */
  int pending;    /* out: left unfinished (PLAIT_ERR_TIMEOUT), to go on with */
  int agreed;     /* out: every rank voted 1, and the tensor is reduced */
} plait_exec_carry_t;

typedef struct plait_exec {
  int rank, size;
  const plait_transport_t *t;
  void *ts;
  void *ts0; /* the job's state (ts is a process set's in a view): device outputs */
  void *fusion; /* the fusion buffer (transport memory), reused */
  size_t fusion_cap;
  int joined;   /* this rank has joined: it contributes identities */
  uint64_t threshold; /* PLAIT_FUSION_THRESHOLD: the buffer's nominal size */
  size_t piece;       /* host fused responses go through the buffer in pieces
                       * of at most this many bytes (0: whole; allreduce_fused) */
  plait_table_t *table;
  plait_namemap_t *local; /* name -> entry waiting for its response */
  plait_counters_t *stats;  /* the engine's counters */
  plait_timeline_t *tl;     /* the engine's timeline (NULL: none) */
  struct plait_psets *psets; /* the engine's process sets (process_set.h) */
  struct plait_hier *hier;   /* the hierarchical allreduce's sub-states (hierarchy.h);
                              * NULL: flat (and in a process set's view) */
  char hier_msg[512];        /* why the last hierarchical allreduce failed ("": none) */
  char activity[PLAIT_COLL_MAX_ + 1][48]; /* "GLOO_ALLREDUCE", ... */
  /* The device-memory path (execute_device.c). */
  struct plait_pending *pending; /* NULL unless the transport has notify */
  struct plait_devmem *devmem;   /* NULL unless it takes device memory */
  struct plait_scratch *scratch; /* this response's temporary device buffers */
  int interrupted;               /* interrupt() was called (plait_exec_settle) */
  plait_exec_carry_t *carry;     /* set: the lone allreduce run carries the vote */
} plait_exec_t;

void plait_exec_init(plait_exec_t *x, int rank, int size, const plait_transport_t *t, void *ts,
                     plait_table_t *table, plait_namemap_t *local);
void plait_exec_free(plait_exec_t *x);

/* Runs r. An error response fails its entries on this rank; that is not a
 * failure of the job. A transport failure is returned (the job is then
 * failed by the caller); the entries of r are failed with it first. */
plait_result_t plait_exec_run(plait_exec_t *x, const plait_response_t *r);

/* Largest tensor whose allreduce carries the cached epoch's vote. */
#define PLAIT_EXEC_CARRY_MAX_BYTES 65536
/* Whether the cached round of one tensor with metadata m (the cache's, the
 * same on every rank) carries the vote in its allreduce: the transport has
 * vote_allreduce, m is a host allreduce of the global set of at most
 * PLAIT_EXEC_CARRY_MAX_BYTES without prescale (the input is read as it is)
 * and not hierarchical. The same answer on every rank. */
int plait_exec_carries(const plait_exec_t *x, const plait_meta_t *m);
/* x->carry set, this rank holding no operation of the round (it votes 0):
 * its part of the carried allreduce of m's shape, no tensor touched. */
plait_result_t plait_exec_carry_absent(plait_exec_t *x, const plait_meta_t *m);

/* Finishes e (removes it from the local map and the table, completes its
 * handle with rc and msg, frees it). */
void plait_exec_finish(plait_exec_t *x, plait_entry_t *e, plait_result_t rc, const char *msg);

/* Coordination ended (rc: PLAIT_ERR_SHUTDOWN, or the job's failure, msg its
 * message): the table refuses later submissions, and every entry still
 * waiting (in the table or in the local map) fails with rc. Its message is
 * msg, or, when ended_by >= 0, names that rank's plait_shutdown. */
void plait_exec_fail_all(plait_exec_t *x, plait_result_t rc, const char *msg, int ended_by);

/* At the end of coordination (coordinator thread): with rc a failure,
 * interrupt() every state once; then wait for outstanding device work
 * (PLAIT_TIMEOUT_S at most). After a clean end (rc 0) what finished
 * completes as usual, and what did not is interrupted and fails; after a
 * failure every entry still pending fails with rc and why. */
void plait_exec_settle(plait_exec_t *x, plait_result_t rc, const char *why);

#endif
