#include "setup.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "notify.h"
#include "wait.h"

/* What each rank tells the others before the communicator is made, so that
 * a rank without a usable GPU fails every rank's init with its reason
 * instead of leaving them waiting in ncclCommInitRank. */
typedef struct card {
  int32_t ok;
  int32_t device;
  char why[248];
} card_t;

/* Rank 0's unique id (or why it has none), broadcast over the bootstrap. */
typedef struct id_msg {
  int32_t ok;
  char why[252];
  ncclUniqueId id;
} id_msg_t;

/* The longest wait in nc_stop for a healthy communicator to flush. */
#define FLUSH_LIMIT_S 10.0

static plait_result_t check_args(const plait_transport_init_args_t *a, char *err, size_t len) {
  const char *why = NULL;
  char buf[256];
  if (!a) {
    why = "args is NULL";
  } else if (a->size < PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1) {
    snprintf(buf, sizeof buf, "plait_transport_init_args_t is %zu bytes, at least %zu needed",
             a->size, (size_t)PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1);
    why = buf;
  } else if (!a->bootstrap) {
    why = "args->bootstrap is NULL";
  } else if (a->bootstrap->size < PLAIT_BOOTSTRAP_SIZE_V1) {
    snprintf(buf, sizeof buf, "plait_bootstrap_t is %zu bytes, at least %zu needed",
             a->bootstrap->size, (size_t)PLAIT_BOOTSTRAP_SIZE_V1);
    why = buf;
  } else if (a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks || a->local_rank < 0) {
    snprintf(buf, sizeof buf, "rank %d, nranks %d, local_rank %d are not a valid position",
             a->rank, a->nranks, a->local_rank);
    why = buf;
  }
  if (!why) return PLAIT_SUCCESS;
  snprintf(err, len, "init: %s", why);
  return PLAIT_ERR_INVALID_ARGUMENT;
}

/* The device (local rank modulo the visible devices), the stream, the event
 * and barrier's word. On failure fills me->why; what was made stays in st
 * for release_cuda. */
static void local_start(nccl_state_t *st, int local_rank, card_t *me) {
  int count = 0;
  const char *call = "cudaGetDeviceCount";
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count < 1) {
    snprintf(me->why, sizeof me->why, "no usable CUDA device: cudaGetDeviceCount found none");
    return;
  }
  if (e == cudaSuccess) {
    st->device = local_rank % count;
    call = "cudaSetDevice";
    e = cudaSetDevice(st->device);
  }
  if (e == cudaSuccess) {
    call = "cudaStreamCreateWithFlags";
    e = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);
    st->owns_stream = e == cudaSuccess;
  }
  if (e == cudaSuccess) {
    call = "cudaEventCreateWithFlags";
    e = cudaEventCreateWithFlags(&st->done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&st->ready, cudaEventDisableTiming);
  }
  if (e == cudaSuccess) {
    call = "cudaMalloc";
    e = cudaMalloc(&st->one, 4);
  }
  if (e != cudaSuccess) {
    snprintf(me->why, sizeof me->why, "no usable CUDA device: %s failed: %s: %s", call,
             cudaGetErrorName(e), cudaGetErrorString(e));
    return;
  }
  me->ok = 1;
  me->device = st->device;
}

static void release_cuda(nccl_state_t *st) {
  if (st->one) cudaFree(st->one);
  if (st->done) cudaEventDestroy(st->done);
  if (st->ready) cudaEventDestroy(st->ready);
  if (st->stream && st->owns_stream) cudaStreamDestroy(st->stream);
  st->one = NULL;
  st->done = NULL;
  st->ready = NULL;
  st->stream = NULL;
}

static plait_result_t boot_failed(nccl_state_t *st, const char *what, plait_result_t rc) {
  return nc_fail(st, rc,
                 "the core's bootstrap %s failed (%s) on rank %d: a peer rank was lost "
                 "while the nccl transport started",
                 what, plait_result_name_inline(rc), st->rank);
}

/* Every rank learns whether every rank has its device; the first rank
 * without one is named, with its reason, on every rank. */
static plait_result_t exchange_cards(nccl_state_t *st, const plait_bootstrap_t *b,
                                     const card_t *me) {
  card_t *all = calloc((size_t)st->nranks, sizeof *all);
  if (!all) return nc_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  plait_result_t rc = b->allgather(b->ctx, me, sizeof *me, all);
  if (rc != PLAIT_SUCCESS) {
    rc = boot_failed(st, "allgather", rc);
  } else {
    int bad = 0, first = -1;
    for (int r = 0; r < st->nranks; r++)
      if (!all[r].ok && bad++ == 0) first = r;
    if (bad) {
      all[first].why[sizeof all[first].why - 1] = '\0';
      char others[64] = "";
      if (bad > 1) snprintf(others, sizeof others, " (and %d more of the %d ranks)", bad - 1,
                            st->nranks);
      rc = nc_fail(st, PLAIT_ERR_UNSUPPORTED, "rank %d%s cannot run the nccl transport: %s%s",
                   first, others, all[first].why,
                   first == st->rank ? "" : " (reported by that rank)");
    }
  }
  free(all);
  return rc;
}

/* Rank 0 makes the unique id; the bootstrap carries it to the others; every
 * rank joins the communicator (non-blocking, so that a rank that never
 * arrives times out instead of hanging). */
static plait_result_t make_comm(nccl_state_t *st, const plait_bootstrap_t *b) {
  id_msg_t msg;
  memset(&msg, 0, sizeof msg);
  if (st->rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&msg.id);
    msg.ok = r == ncclSuccess;
    if (!msg.ok)
      snprintf(msg.why, sizeof msg.why, "ncclGetUniqueId failed on rank 0: %s (%s)",
               ncclGetErrorString(r), ncclGetLastError(NULL));
  }
  plait_result_t rc = b->broadcast(b->ctx, &msg, sizeof msg, 0);
  if (rc != PLAIT_SUCCESS) return boot_failed(st, "broadcast", rc);
  msg.why[sizeof msg.why - 1] = '\0';
  if (!msg.ok) return nc_fail(st, PLAIT_ERR_TRANSPORT, "%s", msg.why);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&st->comm, st->nranks, msg.id, st->rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    char text[1024];
    nc_nccl_text(st, "ncclCommInitRankConfig", r, text, sizeof text);
    if (st->comm) ncclCommAbort(st->comm);
    st->comm = NULL;
    return nc_fail(st, nc_code(r), "%s", text);
  }
  return nc_settle(st, st->comm, "ncclCommInitRankConfig", r);
}

plait_result_t nc_start(const plait_transport_init_args_t *args, nccl_state_t **out, char *err,
                        size_t err_len) {
  *out = NULL;
  plait_result_t rc = check_args(args, err, err_len);
  if (rc != PLAIT_SUCCESS) return rc;
  nccl_state_t *st = calloc(1, sizeof *st);
  if (!st) {
    snprintf(err, err_len, "init: out of memory");
    return PLAIT_ERR_NO_MEMORY;
  }
  st->rank = args->rank;
  st->nranks = args->nranks;
  st->device = -1;
  st->timeout_s = args->timeout_s > 0 ? args->timeout_s : 60.0;
  st->log = args->log;
  st->log_level = args->log_level;
  st->op = "init";
  card_t me;
  memset(&me, 0, sizeof me);
  local_start(st, args->local_rank, &me);
  if (me.ok && !(st->fam = nc_family_new(st))) {
    me.ok = 0;
    snprintf(me.why, sizeof me.why, "out of memory (the plugin's locks)");
  }
  rc = exchange_cards(st, args->bootstrap, &me);
  if (rc == PLAIT_SUCCESS) rc = make_comm(st, args->bootstrap);
  if (rc != PLAIT_SUCCESS) {
    snprintf(err, err_len, "%s", st->err);
    if (st->comm) ncclCommAbort(st->comm); /* nc_settle aborted it on a timeout */
    nc_family_free(st->fam);
    release_cuda(st);
    free(st);
    return rc;
  }
  nc_family_join(st->fam, st);
  int version = 0;
  ncclGetVersion(&version);
  NC_INFO(st, "rank %d of %d on CUDA device %d (local rank %d), NCCL %d", st->rank, st->nranks,
          st->device, args->local_rank, version);
  st->op = NULL;
  *out = st;
  return PLAIT_SUCCESS;
}

void nc_stop(nccl_state_t *st) {
  if (!st) return;
  st->op = "finalize";
  if (st->device >= 0) cudaSetDevice(st->device);
  /* Every outstanding done first (notify.h), with the work's result. */
  nc_family_drain(st);
  if (st->fam) pthread_mutex_lock(&st->fam->comm_mu);
  if (st->comm && nc_family_failed(st) == PLAIT_SUCCESS) {
    /* Healthy: let NCCL flush, for a bounded time (a peer that is gone
     * must not stall the shutdown), then free. */
    double limit = st->timeout_s;
    if (limit > FLUSH_LIMIT_S) st->timeout_s = FLUSH_LIMIT_S;
    ncclResult_t r = ncclCommFinalize(st->comm);
    if (nc_settle(st, st->comm, "ncclCommFinalize", r) == PLAIT_SUCCESS && st->comm) {
      r = ncclCommDestroy(st->comm);
      if (r != ncclSuccess) NC_WARN(st, "ncclCommDestroy: %s", ncclGetErrorString(r));
      st->comm = NULL;
    }
    st->timeout_s = limit;
  }
  if (st->comm) ncclCommAbort(st->comm); /* broken, or the flush failed */
  st->comm = NULL;
  if (st->fam) {
    pthread_mutex_unlock(&st->fam->comm_mu);
    nc_family_leave(st->fam, st);
    if (st->fam->root == st) nc_family_free(st->fam);
  }
  release_cuda(st);
  free(st->global_ranks);
  free(st);
}

static plait_result_t check_ranks(nccl_state_t *parent, const int *ranks, int n, int *me) {
  NC_REQUIRE(parent, ranks != NULL, "ranks is NULL");
  NC_REQUIRE(parent, n >= 1 && n <= parent->nranks, "n is %d, not in [1, %d]", n,
             parent->nranks);
  *me = -1;
  for (int i = 0; i < n; i++) {
    NC_REQUIRE(parent, ranks[i] >= 0 && ranks[i] < parent->nranks,
               "ranks[%d] is %d, not a rank of [0, %d)", i, ranks[i], parent->nranks);
    NC_REQUIRE(parent, i == 0 || ranks[i] > ranks[i - 1],
               "ranks[] is not increasing at index %d (%d after %d)", i, ranks[i],
               ranks[i - 1]);
    if (ranks[i] == parent->rank) *me = i;
  }
  return PLAIT_SUCCESS;
}

/* A member's state: the parent's device and stream, its own event, word and
 * communicator; ranks named in the job's numbering. */
static plait_result_t member_state(nccl_state_t *parent, const int *ranks, int n, int me,
                                   nccl_state_t **out) {
  nccl_state_t *st = calloc(1, sizeof *st);
  int *global = st ? calloc((size_t)n, sizeof *global) : NULL;
  if (!global) {
    free(st);
    return nc_fail(parent, PLAIT_ERR_NO_MEMORY, "out of memory");
  }
  for (int i = 0; i < n; i++) global[i] = nc_job_rank(parent, ranks[i]);
  st->rank = me;
  st->nranks = n;
  st->device = parent->device;
  st->timeout_s = parent->timeout_s;
  st->log = parent->log;
  st->log_level = parent->log_level;
  st->stream = parent->stream;
  st->parent = parent;
  st->fam = parent->fam;
  st->global_ranks = global;
  cudaError_t e = cudaEventCreateWithFlags(&st->done, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&st->ready, cudaEventDisableTiming);
  const char *call = "cudaEventCreateWithFlags";
  if (e == cudaSuccess) {
    call = "cudaMalloc";
    e = cudaMalloc(&st->one, 4);
  }
  if (e != cudaSuccess) {
    plait_result_t rc = nc_cuda_fail(parent, PLAIT_ERR_NO_MEMORY, call, e);
    nc_stop(st);
    return rc;
  }
  *out = st;
  return PLAIT_SUCCESS;
}

plait_result_t nc_subset(nccl_state_t *parent, const int *ranks, int n, nccl_state_t **out) {
  *out = NULL;
  int me = -1;
  NC_CHECK(check_ranks(parent, ranks, n, &me));
  nccl_state_t *st = NULL;
  if (me >= 0) NC_CHECK(member_state(parent, ranks, n, me, &st));
  /* Every rank of the parent takes part; non-members get no communicator. */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  pthread_mutex_lock(&parent->fam->comm_mu);
  ncclResult_t r = ncclCommSplit(parent->comm, me >= 0 ? 0 : NCCL_SPLIT_NOCOLOR,
                                 me >= 0 ? me : 0, &comm, &cfg);
  plait_result_t rc = nc_settle(parent, parent->comm, "ncclCommSplit", r);
  pthread_mutex_unlock(&parent->fam->comm_mu);
  if (rc == PLAIT_SUCCESS && comm) {
    st->comm = comm;
    nc_family_join(st->fam, st);
    rc = nc_settle(st, comm, "ncclCommSplit (the new communicator)", ncclSuccess);
    if (rc != PLAIT_SUCCESS) nc_fail(parent, rc, "%s", st->err);
  } else if (comm && rc != PLAIT_SUCCESS) {
    ncclCommAbort(comm);
  }
  if (rc == PLAIT_SUCCESS && me >= 0 && !comm)
    rc = nc_fail(parent, PLAIT_ERR_INTERNAL, "ncclCommSplit made no communicator for a member");
  if (rc != PLAIT_SUCCESS) {
    nc_stop(st);
    return rc;
  }
  *out = st;
  if (st)
    NC_DEBUG(st, "subset of %d ranks made: rank %d there (rank %d of the parent)", n, me,
             parent->rank);
  return PLAIT_SUCCESS;
}
