/*
 * The ofi plugin's state: one per successful init, passed back by the core as
 * the `void *state` of every call. Only the one thread the core calls the
 * plugin from touches it, so it holds no lock.
 */
#ifndef PLAIT_OFI_STATE_H
#define PLAIT_OFI_STATE_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "plait/transport.h"
#include "engine/hugepages.h"
#include "tunables.h"

/* One posted send or receive. The provider's op_context points at ctx, the
 * first member, so a completion leads back to the request. */
typedef struct ofi_req {
  struct fi_context2 ctx;
  int peer;      /* the rank it goes to or comes from */
  int used;      /* posted at some point (ofi_wait_all skips the others) */
  int is_send;
  int done;      /* completed (or injected: no completion to wait for) */
  int posted;    /* on the outstanding list */
  uint64_t tag;
  size_t len;
  int step, chunk, slot; /* for the algorithm that posted it */
  struct ofi_req *prev, *next;  /* outstanding list */
  struct ofi_req *done_next;    /* completion queue (FIFO) */
} ofi_req_t;

/* A memory registration: one per plugin-owned buffer (fusion buffers from
 * mem_alloc, scratch), looked up by address range. */
typedef struct ofi_mr {
  char *base;
  size_t len;
  struct fid_mr *mr; /* NULL when the provider needs none */
  struct ofi_mr *next;
} ofi_mr_t;

/* What each rank tells the others at init (see setup.c). */
typedef struct ofi_peer {
  int64_t pid;
  uint64_t start_time; /* /proc/<pid>/stat field 22: guards against pid reuse */
  int same_kernel;     /* same boot id, pid and time namespace: pid is checkable */
} ofi_peer_t;

/* A plugin-owned, registered, growable buffer. */
typedef struct ofi_scratch {
  char *buf;
  size_t len;
} ofi_scratch_t;

/* One exchange of a vote_allreduce (algorithms/vote_allreduce.c). */
typedef struct ofi_vred_phase {
  int peer;          /* -1: no message (AVERAGE's divide) */
  int send, recv;    /* recv: 0 none, 1 into the scratch half, 2 into the running half */
  int combine, theirs_first;
  double post;       /* the postscale this exchange's reduction applies */
  uint32_t id;       /* tag id */
} ofi_vred_phase_t;
/* The fold, a step per doubling of 2^20 ranks (the tags' 20 rank bits), the
 * divide and the unfold. */
#define OFI_VRED_PHASES 24

typedef struct ofi_state {
  int rank, nranks;
  double timeout_s;
  double yield_s; /* idle: yield this long before sleeping (engine/crowding.h) */
  plait_log_fn log;
  int log_level;
  plait_reduce_fn reduce;
  plait_divide_fn divide;
  plait_scale_fn scale;
  plait_reduce_scale_fn reduce_scale; /* NULL from a core older than it */
  ofi_tunables_t tun;

  /* libfabric objects; all NULL for a job of one rank and after teardown. */
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  fi_addr_t *addrs; /* by rank */
  ofi_peer_t *peers; /* by rank */
  char provider[64];
  int need_mr;       /* FI_MR_LOCAL (or PLAIT_OFI_MR=always): descriptors */
  int mr_endpoint;   /* FI_MR_ENDPOINT: bind each MR to the endpoint */
  int mr_prov_key;
  uint64_t next_key;
  size_t inject_size;
  size_t max_msg;
  size_t iov_limit;   /* pieces per message (tx and rx), at most OFI_IOV_MAX */

  ofi_mr_t *mrs; /* registrations of plugin-owned memory */
  ofi_huge_t huge; /* user buffers moved into huge pages (hugepages.h) */
  uint64_t spans_in_place, spans_packed; /* allreduce_spans calls each way: tests, log */
  uint64_t spans_direct;                 /* ... and by direct reads (direct.c) */
  int direct;                            /* direct.c: 1 on, 0 or 2 off */
  uint64_t direct_cookie;                /* read by the peers at init (direct.c) */
  ofi_scratch_t slots, work, tmp;
  ofi_scratch_t vred_buf; /* vote_allreduce.c: its two messages' buffers */

  /* Progress engine (progress.c). */
  ofi_req_t *outstanding;            /* posted, not complete */
  ofi_req_t *done_head, *done_tail;  /* completed, not yet taken */
  double last_progress;              /* time of the last completion */
  double last_liveness;              /* time of the last pid check */
  double last_watch;                 /* time of the last empty poll (progress.c, idle) */
  uint32_t seq;                      /* collective number: part of tags */
  uint32_t comm;                     /* communicator's tag bits: 0 for init's
                                      * state, 1..15 for subsets (subset.c) */
  uint32_t subsets_made;             /* subset() calls on this state so far */
  struct ofi_state *parent;          /* a subset's parent, whose libfabric
                                      * objects it uses; NULL for init's */
  int *global_ranks;                 /* a subset's ranks in the parent */
  const char *op;                    /* the collective running ("allreduce") */
  /* A vote (algorithms/vote.c) left unfinished by a caller whose wait ended:
   * its dissemination round, whether that round's messages are posted, the
   * MIN so far and the byte being received. */
  struct {
    int pending, round, posted;
    uint8_t acc, in;
    ofi_req_t q[2];
  } vote;
  /* A vote carried with a small allreduce (algorithms/vote_allreduce.c),
   * left unfinished the same way: its exchanges (planned when it starts),
   * the one under way and what of it is posted; the running MIN and sums
   * live in vred_buf until it ends. */
  struct {
    int pending, phase, nphases, posted, split;
    size_t count, bytes;
    plait_dtype_t dtype;
    plait_op_t op;
    double post;
    void *recv;
    ofi_req_t q[4];
    ofi_vred_phase_t ph[OFI_VRED_PHASES];
  } vred;

  /* After a failure inside a collective the ranks may be out of step: every
   * later collective fails at once with this code and message. */
  plait_result_t broken;
  char broken_msg[1536];

  /* Rescue from a libfabric call that cannot return (rescue.h). */
  _Atomic uint64_t turns;    /* progress-loop turns */
  atomic_int inside;         /* a guarded collective runs on `caller` */
  atomic_int rescue_wanted;  /* the watchdog decided to rescue it */
  atomic_int rescue_stop;
  int rescue_started;
  pthread_t rescue_thread;
  /* Written by the guarded thread, read by the watchdog while it runs: the
   * thread that calls may change from one collective to the next (the
   * coordinator, then finalize from plait_shutdown's thread). */
  _Atomic(pthread_t) caller;
  _Atomic(clockid_t) caller_cpu;
  atomic_int caller_tid; /* its kernel thread id, for its user CPU time */
  atomic_uint guard_seq; /* guarded sessions begun: the watchdog starts over on each */
  double stuck_cpu_s;
  int abandoned; /* rescued: libfabric never called again on it */
  int rescued;   /* by the watchdog (rescue.h) outside a teardown: its objects
                  * are whole, parked at teardown (parked.h) */
  int rescued_tid; /* the thread got out: owns what it held (orphan_lock.h) */
  int in_teardown; /* ofi_teardown runs (a rescue there leaves them half closed) */
  int park_sends; /* broken with this many sends posted to a peer that may be
                   * alive: parked at teardown, not closed (parked.h) */
  unsigned char *park_peers; /* by rank: 1 for the peers of those sends */
  char err[1536]; /* message of the last failure: last_error() */
} ofi_state_t;

#endif
