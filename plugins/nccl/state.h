/*
 * The nccl plugin's state: one per successful init (and one per subset()
 * member), passed back by the core as the `void *state` of every call, and
 * the family they share (the init state and its subsets: one device, one
 * stream, one waiter thread).
 *
 * Threads: the core calls the plugin from one thread at a time; the family's
 * waiter thread (notify.c) and CUDA's host functions touch only the family
 * fields marked so, under the locks named there.
 */
#ifndef PLAIT_NCCL_STATE_H
#define PLAIT_NCCL_STATE_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "elem.h"
#include "plait/transport.h"

#define NC_MSG_LEN 1536
#define NC_STAGE_SLOTS 8

struct nccl_state;

/* One notify: done(ctx) once marker `seq` has run on the stream. */
typedef struct nc_pending {
  struct nc_pending *next;
  plait_done_fn done;
  void *ctx;
  uint64_t seq;
  double since; /* when notify was called (nc_now) */
} nc_pending_t;

/* A pinned host table batch_copy stages (batch.c); reused once `ev` has
 * passed. Outgrown buffers wait in `retired` until finalize. */
typedef struct nc_slot {
  nc_span_ent_t *host;
  size_t cap; /* entries */
  cudaEvent_t ev;
  int used;
} nc_slot_t;

typedef struct nc_retired {
  struct nc_retired *next;
  void *host;
} nc_retired_t;

typedef struct nc_family {
  int device;
  cudaStream_t stream; /* cudaStreamNonBlocking, owned by the init state */
  double timeout_s;
  struct nccl_state *root;

  /* comm_mu (recursive): held around every use of a member's communicator
   * (the core's thread) and by the waiter while it polls or aborts them;
   * guards `members` and the breaking below. */
  pthread_mutex_t comm_mu;
  struct nccl_state *members; /* linked through nccl_state.next_member */
  /* Set once, under comm_mu, after broken_msg is written: the family
   * failed, every communicator is aborted, every later call fails. */
  _Atomic int broken;
  char broken_msg[NC_MSG_LEN];

  /* q_mu guards the pending queue, the marker counts and the waiter's
   * life; q_cv wakes the waiter (a marker ran, a break, finalize) and
   * finalize (the queue emptied). */
  pthread_mutex_t q_mu;
  pthread_cond_t q_cv;
  nc_pending_t *head, *tail;
  uint64_t enqueued;  /* markers enqueued (core thread) */
  uint64_t completed; /* markers run (CUDA's host-function thread) */
  int stopping;
  int delivering; /* the waiter is calling done for entries it took */
  int has_waiter;
  pthread_t waiter;

  /* The core's thread only. */
  int async;   /* notify was called: work returns once enqueued */
  int readied; /* ready was called: no waits on the legacy default stream */
  nc_slot_t slots[NC_STAGE_SLOTS];
  unsigned next_slot;
  nc_retired_t *retired;
  nc_span_ent_t *dev_tab; /* device copy of the staged table */
  size_t dev_cap;
} nc_family_t;

typedef struct nccl_state {
  int rank, nranks; /* in this communicator */
  int device;       /* the CUDA device every call runs on (cudaSetDevice) */
  double timeout_s; /* one collective's limit, from PLAIT_TIMEOUT_S */
  plait_log_fn log;
  int log_level;

  ncclComm_t comm;     /* NULL once aborted or destroyed (under comm_mu) */
  cudaStream_t stream; /* the family's */
  cudaEvent_t done;    /* recorded after each synchronous operation, polled */
  cudaEvent_t ready;   /* recorded on the stream the work waits for (wait.h) */
  int owns_stream;     /* init's state made the stream; a subset's did not */
  void *one;           /* 4 device bytes: barrier's one-element allreduce */
  int *global_ranks;   /* a subset's ranks in the init state (NULL there) */
  struct nccl_state *parent;
  nc_family_t *fam;
  struct nccl_state *next_member;

  const char *op; /* the call running ("allreduce"), prefixes messages */
  /* This state's own record of the failure that broke it (the family's
   * broken_msg is what later calls report). */
  plait_result_t broken;
  char broken_msg[NC_MSG_LEN];
  char err[NC_MSG_LEN]; /* message of the last failure: last_error() */
} nccl_state_t;

#endif
