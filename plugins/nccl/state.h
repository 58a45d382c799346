/*
 * The nccl plugin's state: one per successful init (and one per subset()
 * member), passed back by the core as the `void *state` of every call. Only
 * the one thread the core calls the plugin from touches it, so it holds no
 * lock.
 */
#ifndef PLAIT_NCCL_STATE_H
#define PLAIT_NCCL_STATE_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "plait/transport.h"

typedef struct nccl_state {
  int rank, nranks; /* in this communicator */
  int device;       /* the CUDA device every call runs on (cudaSetDevice) */
  double timeout_s; /* one collective's limit, from PLAIT_TIMEOUT_S */
  plait_log_fn log;
  int log_level;

  ncclComm_t comm;     /* NULL once aborted or destroyed */
  cudaStream_t stream; /* cudaStreamNonBlocking; a subset uses its parent's */
  cudaEvent_t done;    /* recorded after each operation, polled */
  cudaEvent_t ready;   /* recorded on the legacy default stream before each
                        * operation; the stream waits for it (wait.h) */
  int owns_stream;     /* init's state made the stream; a subset's did not */
  void *one;           /* 4 device bytes: barrier's one-element allreduce */
  int *global_ranks;   /* a subset's ranks in the init state (NULL there) */
  struct nccl_state *parent;

  const char *op; /* the call running ("allreduce"), prefixes messages */
  /* After a failure inside a collective the communicator is aborted: every
   * later collective fails at once with this code and message. */
  plait_result_t broken;
  char broken_msg[1536];
  char err[1536]; /* message of the last failure: last_error() */
} nccl_state_t;

#endif
