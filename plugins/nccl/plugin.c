/*
 * The exported table plait_transport_v2 and its entry points: argument
 * checks (before anything is enqueued, leaving the state usable), the
 * calling thread's CUDA device, the broken state (after a failure inside a
 * collective every later one fails at once), then the collective (coll.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"
#include "batch.h"
#include "errors.h"
#include "notify.h"
#include "setup.h"
#include "wait.h"

/* Message of the last init failure (or call with a NULL state) on this
 * thread: last_error(NULL). */
static _Thread_local char t_error[1536];

/* mem_alloc and mem_free may run on any thread, concurrently with the core's
 * thread (transport.h), so they never write the state: a failure's message
 * stays in this thread's t_mem_error, and last_error(state) on this thread
 * returns it until the thread's next call on a state. */
static _Thread_local const void *t_mem_state;
static _Thread_local char t_mem_error[1536];

static plait_result_t null_state(const char *what) {
  snprintf(t_error, sizeof t_error, "%s: state is NULL", what);
  return PLAIT_ERR_INVALID_ARGUMENT;
}

/* cudaSetDevice on the calling thread: the core calls init on one thread and
 * everything after on its coordinator thread. */
static plait_result_t use_device(nccl_state_t *st) {
  cudaError_t e = cudaSetDevice(st->device);
  return e == cudaSuccess ? PLAIT_SUCCESS : nc_cuda_fail(st, PLAIT_ERR_TRANSPORT, "cudaSetDevice", e);
}

/* Starts a call: NULL state, device, broken state. */
#define ENTER(state, what)                                                     \
  t_mem_state = NULL;                                                          \
  if ((state) == NULL) return null_state(what);                                \
  nccl_state_t *st = (nccl_state_t *)(state);                                  \
  st->op = (what);                                                             \
  if (nc_family_failed(st) != PLAIT_SUCCESS)                                   \
    return nc_fail(st, nc_family_failed(st),                                   \
                   "the NCCL communicator failed earlier and was aborted: %s",  \
                   st->fam->broken_msg);                                       \
  NC_CHECK(use_device(st));

static plait_result_t check_reduction(nccl_state_t *st, plait_dtype_t dtype, plait_op_t op) {
  NC_REQUIRE(st, plait_dtype_valid_inline(dtype), "dtype %d is not a plait dtype", (int)dtype);
  NC_REQUIRE(st, plait_op_valid_inline(op), "op %d is not a plait op", (int)op);
  ncclDataType_t dt;
  if (!nc_dtype(dtype, &dt))
    return nc_fail(st, PLAIT_ERR_UNSUPPORTED,
                   "dtype %s cannot be reduced by NCCL, which has no 16-bit integer type "
                   "(it reduces uint8, int8, int32, int64, float16, bfloat16, float32, float64 "
                   "and bool)",
                   plait_dtype_name_inline(dtype));
  NC_REQUIRE(st, !(dtype == PLAIT_BOOL && op == PLAIT_OP_AVERAGE),
             "op average is not defined for dtype bool (sum and max are logical or, min "
             "and product logical and)");
  return PLAIT_SUCCESS;
}

/* A buffer the collective reads or writes must be device memory of this
 * state's device (or managed memory): NCCL would fail on host memory with a
 * less clear message, or read it wrongly. */
static plait_result_t check_device_ptr(nccl_state_t *st, const char *name, const void *p,
                                       size_t bytes) {
  if (bytes == 0) return PLAIT_SUCCESS;
  NC_REQUIRE(st, p != NULL, "%s is NULL but holds %zu bytes", name, bytes);
  struct cudaPointerAttributes a;
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return nc_cuda_fail(st, PLAIT_ERR_INVALID_ARGUMENT, "cudaPointerGetAttributes", e);
  }
  if (a.type == cudaMemoryTypeManaged) return PLAIT_SUCCESS;
  NC_REQUIRE(st, a.type == cudaMemoryTypeDevice,
             "%s (%p) is %s memory; the nccl transport takes CUDA device memory (tensors with "
             "device = %d)",
             name, p, a.type == cudaMemoryTypeHost ? "pinned host" : "host", st->device);
  NC_REQUIRE(st, a.device == st->device,
             "%s (%p) is on CUDA device %d, but this rank's communicator runs on device %d "
             "(local rank modulo the visible devices)",
             name, p, a.device, st->device);
  return PLAIT_SUCCESS;
}

static plait_result_t checked_sum(nccl_state_t *st, const char *name, const size_t *v, int n,
                                  size_t *total) {
  NC_REQUIRE(st, v != NULL, "%s is NULL", name);
  *total = 0;
  for (int r = 0; r < n; r++) {
    NC_REQUIRE(st, v[r] <= SIZE_MAX - *total, "the sum of %s[] overflows size_t", name);
    *total += v[r];
  }
  return PLAIT_SUCCESS;
}

static int overlap(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an && bn && !(x + an <= y || y + bn <= x);
}

static plait_result_t nccl_init(const plait_transport_init_args_t *args, void **state) {
  if (state == NULL) return null_state("init");
  nccl_state_t *st = NULL;
  plait_result_t rc = nc_start(args, &st, t_error, sizeof t_error);
  if (rc == PLAIT_SUCCESS) *state = st;
  return rc;
}

static plait_result_t nccl_finalize(void *state) {
  nc_stop((nccl_state_t *)state);
  return PLAIT_SUCCESS;
}

static const char *nccl_last_error(void *state) {
  if (state == NULL) return t_error;
  if (state == t_mem_state) return t_mem_error;
  return ((nccl_state_t *)state)->err;
}

static plait_result_t entry_allreduce(void *state, void *buf, size_t count, plait_dtype_t dtype,
                                      plait_op_t op) {
  ENTER(state, "allreduce");
  NC_CHECK(check_reduction(st, dtype, op));
  size_t es = plait_dtype_size_inline(dtype);
  NC_REQUIRE(st, count <= SIZE_MAX / es, "count %zu of %zu-byte elements overflows size_t",
             count, es);
  NC_CHECK(check_device_ptr(st, "buf", buf, count * es));
  NC_REQUIRE(st, op != PLAIT_OP_AVERAGE || (uintptr_t)buf % es == 0,
             "buf (%p) is not aligned to its %zu-byte elements", buf, es);
  if (count == 0) return PLAIT_SUCCESS; /* the same on every rank */
  NC_CHECK(nc_after_default_stream(st));
  return nc_allreduce(st, buf, count, dtype, op);
}

static plait_result_t entry_allgatherv(void *state, void *buf, const size_t *bytes) {
  ENTER(state, "allgatherv");
  size_t total = 0;
  NC_CHECK(checked_sum(st, "bytes", bytes, st->nranks, &total));
  NC_CHECK(check_device_ptr(st, "buf", buf, total));
  if (total == 0) return PLAIT_SUCCESS;
  NC_CHECK(nc_after_default_stream(st));
  return nc_allgatherv(st, buf, bytes);
}

static plait_result_t entry_broadcast(void *state, void *buf, size_t bytes, int root) {
  ENTER(state, "broadcast");
  NC_REQUIRE(st, root >= 0 && root < st->nranks, "root %d is not a rank (0 to %d)", root,
             st->nranks - 1);
  NC_CHECK(check_device_ptr(st, "buf", buf, bytes));
  if (bytes == 0) return PLAIT_SUCCESS;
  NC_CHECK(nc_after_default_stream(st));
  return nc_broadcast(st, buf, bytes, root);
}

static plait_result_t entry_alltoallv(void *state, const void *send, const size_t *send_bytes,
                                      void *recv, const size_t *recv_bytes) {
  ENTER(state, "alltoallv");
  size_t ts = 0, tr = 0;
  NC_CHECK(checked_sum(st, "send_bytes", send_bytes, st->nranks, &ts));
  NC_CHECK(checked_sum(st, "recv_bytes", recv_bytes, st->nranks, &tr));
  NC_REQUIRE(st, send_bytes[st->rank] == recv_bytes[st->rank],
             "send_bytes[%d] = %zu but recv_bytes[%d] = %zu (this rank's block to itself)",
             st->rank, send_bytes[st->rank], st->rank, recv_bytes[st->rank]);
  NC_CHECK(check_device_ptr(st, "send", send, ts));
  NC_CHECK(check_device_ptr(st, "recv", recv, tr));
  NC_REQUIRE(st, !overlap(send, ts, recv, tr), "send and recv overlap");
  if (ts == 0 && tr == 0) return PLAIT_SUCCESS; /* nothing to or from anyone */
  NC_CHECK(nc_after_default_stream(st));
  return nc_alltoallv(st, send, send_bytes, recv, recv_bytes);
}

static plait_result_t entry_reducescatter(void *state, const void *send, void *recv,
                                          const size_t *counts, plait_dtype_t dtype,
                                          plait_op_t op) {
  ENTER(state, "reducescatter");
  NC_CHECK(check_reduction(st, dtype, op));
  NC_REQUIRE(st, counts != NULL, "counts is NULL");
  size_t es = plait_dtype_size_inline(dtype), total = 0, mine = counts[st->rank];
  for (int r = 0; r < st->nranks; r++) {
    NC_REQUIRE(st, counts[r] <= SIZE_MAX / es - total, "the sum of counts[] overflows");
    total += counts[r];
  }
  NC_CHECK(check_device_ptr(st, "send", send, total * es));
  NC_CHECK(check_device_ptr(st, "recv", recv, mine * es));
  NC_REQUIRE(st, !overlap(send, total * es, recv, mine * es), "send and recv overlap");
  NC_REQUIRE(st, op != PLAIT_OP_AVERAGE || (uintptr_t)recv % es == 0,
             "recv (%p) is not aligned to its %zu-byte elements", recv, es);
  if (total == 0) return PLAIT_SUCCESS;
  NC_CHECK(nc_after_default_stream(st));
  return nc_reducescatter(st, send, recv, counts, dtype, op);
}

static plait_result_t entry_barrier(void *state) {
  ENTER(state, "barrier");
  return nc_barrier(st);
}

/* Memory functions: local, usable even after the communicator failed. */
#define ENTER_LOCAL(state, what)                                               \
  t_mem_state = NULL;                                                          \
  if ((state) == NULL) return null_state(what);                                \
  nccl_state_t *st = (nccl_state_t *)(state);                                  \
  st->op = (what);                                                             \
  NC_CHECK(use_device(st));

/* A failure of mem_alloc / mem_free, in this thread's message. */
static plait_result_t mem_fail(const nccl_state_t *st, plait_result_t code, const char *what,
                               const char *call, cudaError_t e) {
  if (call)
    snprintf(t_mem_error, sizeof t_mem_error, "%s: %s failed: %s: %s on rank %d (CUDA device %d)",
             what, call, cudaGetErrorName(e), cudaGetErrorString(e), nc_job_rank(st, st->rank),
             st->device);
  else
    snprintf(t_mem_error, sizeof t_mem_error, "%s: ptr is NULL", what);
  t_mem_state = st;
  return code;
}

/* Any thread, concurrently with the other entries: reads only the state's
 * device, sets it on the calling thread (cudaMalloc and cudaFree are
 * thread-safe). */
static plait_result_t entry_mem_alloc(void *state, size_t bytes, void **ptr) {
  t_mem_state = NULL;
  if (state == NULL) return null_state("mem_alloc");
  const nccl_state_t *st = state;
  if (ptr == NULL) return mem_fail(st, PLAIT_ERR_INVALID_ARGUMENT, "mem_alloc", NULL, cudaSuccess);
  *ptr = NULL;
  cudaError_t e = cudaSetDevice(st->device);
  if (e != cudaSuccess) return mem_fail(st, PLAIT_ERR_TRANSPORT, "mem_alloc", "cudaSetDevice", e);
  e = cudaMalloc(ptr, bytes ? bytes : 1);
  if (e == cudaSuccess) return PLAIT_SUCCESS;
  *ptr = NULL;
  cudaGetLastError(); /* allocation failures are not sticky: clear it */
  return mem_fail(st, PLAIT_ERR_NO_MEMORY, "mem_alloc", "cudaMalloc", e);
}

static plait_result_t entry_mem_free(void *state, void *ptr) {
  t_mem_state = NULL;
  if (state == NULL) return null_state("mem_free");
  const nccl_state_t *st = state;
  if (ptr == NULL) return PLAIT_SUCCESS;
  cudaError_t e = cudaSetDevice(st->device);
  if (e == cudaSuccess) e = cudaFree(ptr);
  if (e == cudaSuccess) return PLAIT_SUCCESS;
  return mem_fail(st, PLAIT_ERR_TRANSPORT, "mem_free", "cudaFree", e);
}

static plait_result_t entry_mem_copy(void *state, void *dst, const void *src, size_t bytes,
                                     plait_copy_kind_t kind) {
  ENTER_LOCAL(state, "mem_copy");
  NC_REQUIRE(st, (unsigned)kind <= PLAIT_COPY_DEVICE_TO_DEVICE, "kind %d is not a plait_copy_kind_t",
             (int)kind);
  NC_REQUIRE(st, bytes == 0 || (dst != NULL && src != NULL), "%s is NULL with %zu bytes",
             dst ? "src" : "dst", bytes);
  if (bytes == 0) return PLAIT_SUCCESS;
  if (kind == PLAIT_COPY_HOST_TO_DEVICE || kind == PLAIT_COPY_DEVICE_TO_DEVICE)
    NC_CHECK(check_device_ptr(st, "dst", dst, bytes));
  if (kind == PLAIT_COPY_DEVICE_TO_HOST || kind == PLAIT_COPY_DEVICE_TO_DEVICE)
    NC_CHECK(check_device_ptr(st, "src", src, bytes));
  return nc_mem_copy(st, dst, src, bytes, kind);
}

static plait_result_t entry_allreduce_scaled(void *state, const void *send, void *recv,
                                             size_t count, plait_dtype_t dtype, plait_op_t op,
                                             double postscale) {
  ENTER(state, "allreduce_scaled");
  NC_CHECK(check_reduction(st, dtype, op));
  NC_REQUIRE(st, !(dtype == PLAIT_BOOL && postscale != 1.0),
             "postscale %g on dtype bool: bool cannot be scaled", postscale);
  size_t es = plait_dtype_size_inline(dtype);
  NC_REQUIRE(st, count <= SIZE_MAX / es, "count %zu of %zu-byte elements overflows size_t",
             count, es);
  NC_CHECK(check_device_ptr(st, "send", send, count * es));
  NC_CHECK(check_device_ptr(st, "recv", recv, count * es));
  NC_REQUIRE(st, send == recv || !overlap(send, count * es, recv, count * es),
             "send and recv overlap without being the same buffer");
  NC_REQUIRE(st, postscale == 1.0 || (uintptr_t)recv % es == 0,
             "recv (%p) is not aligned to its %zu-byte elements", recv, es);
  if (count == 0) return PLAIT_SUCCESS;
  NC_CHECK(nc_after_default_stream(st));
  return nc_allreduce_scaled(st, send, recv, count, dtype, op, postscale);
}

static int entry_device(void *state) {
  return state ? ((nccl_state_t *)state)->device : -1;
}

static plait_result_t entry_batch_copy(void *state, const plait_span_t *spans, size_t n,
                                       plait_dtype_t dtype, plait_op_t op, double factor) {
  ENTER(state, "batch_copy");
  NC_REQUIRE(st, plait_dtype_valid_inline(dtype), "dtype %d is not a plait dtype", (int)dtype);
  NC_REQUIRE(st, plait_op_valid_inline(op), "op %d is not a plait op", (int)op);
  NC_REQUIRE(st, !(dtype == PLAIT_BOOL && factor != 1.0),
             "factor %g on dtype bool: bool cannot be scaled", factor);
  NC_REQUIRE(st, n == 0 || spans != NULL, "spans is NULL with n = %zu", n);
  size_t es = plait_dtype_size_inline(dtype);
  for (size_t i = 0; i < n; i++) {
    if (spans[i].count == 0) continue;
    NC_REQUIRE(st, spans[i].count <= SIZE_MAX / es, "spans[%zu].count %zu overflows size_t", i,
               spans[i].count);
    NC_REQUIRE(st, (uintptr_t)spans[i].dst % es == 0 && (uintptr_t)spans[i].src % es == 0,
               "spans[%zu] (dst %p, src %p) is not aligned to its %zu-byte elements", i,
               spans[i].dst, spans[i].src, es);
    char name[48];
    snprintf(name, sizeof name, "spans[%zu].dst", i);
    NC_CHECK(check_device_ptr(st, name, spans[i].dst, spans[i].count * es));
    if (spans[i].src) {
      snprintf(name, sizeof name, "spans[%zu].src", i);
      NC_CHECK(check_device_ptr(st, name, spans[i].src, spans[i].count * es));
    }
  }
  NC_CHECK(nc_after_default_stream(st));
  NC_CHECK(nc_batch_enqueue(st, spans, n, dtype, op, factor, 0));
  return nc_finish(st, "batch_copy");
}

static plait_result_t entry_ready(void *state, void *stream) {
  ENTER(state, "ready");
  NC_CHECK(nc_after_stream(st, stream ? (cudaStream_t)stream : cudaStreamLegacy,
                           stream ? "the caller's stream" : "the legacy default stream"));
  st->fam->readied = 1; /* from now on the core names the streams */
  return PLAIT_SUCCESS;
}

static plait_result_t entry_notify(void *state, plait_done_fn done, void *ctx) {
  if (state == NULL) return null_state("notify");
  nccl_state_t *st = (nccl_state_t *)state;
  st->op = "notify";
  NC_REQUIRE(st, done != NULL, "done is NULL");
  NC_CHECK(use_device(st));
  return nc_notify(st, done, ctx);
}

static plait_result_t entry_interrupt(void *state, plait_result_t rc, const char *why) {
  if (state == NULL) return null_state("interrupt");
  nccl_state_t *st = (nccl_state_t *)state;
  st->op = "interrupt";
  NC_CHECK(use_device(st));
  if (nc_family_failed(st) != PLAIT_SUCCESS) return PLAIT_SUCCESS; /* already stopped */
  nc_break(st, rc != PLAIT_SUCCESS ? rc : PLAIT_ERR_PEER_LOST,
           "the job failed (rank %d, CUDA device %d stopped waiting for its peers): %s",
           nc_job_rank(st, st->rank), st->device, why ? why : "(no reason given)");
  return PLAIT_SUCCESS;
}

/* NCCL picks its algorithm per call (ring, tree, NVLS, CollNet) from its own
 * tuning; the plugin can only name the NCCL call it makes. */
static const char *entry_algorithm(void *state, uint64_t collective, uint64_t bytes) {
  (void)bytes;
  if (state == NULL) return NULL;
  switch (collective) {
    case PLAIT_CAP_ALLREDUCE: return "ncclAllReduce";
    case PLAIT_CAP_ALLGATHERV: return "ncclAllGather (equal parts) or grouped ncclBroadcast";
    case PLAIT_CAP_BROADCAST: return "ncclBroadcast";
    case PLAIT_CAP_REDUCESCATTER: return "ncclReduceScatter (equal parts) or grouped ncclReduce";
    case PLAIT_CAP_ALLTOALLV: return "grouped ncclSend/ncclRecv";
    case PLAIT_CAP_BARRIER: return "one-element ncclAllReduce";
    default: return NULL;
  }
}

static plait_result_t entry_subset(void *state, const int *ranks, int n, void **sub) {
  ENTER(state, "subset");
  NC_REQUIRE(st, sub != NULL, "sub is NULL");
  *sub = NULL;
  nccl_state_t *made = NULL;
  NC_CHECK(nc_subset(st, ranks, n, &made));
  *sub = made;
  return PLAIT_SUCCESS;
}

/* The ABI's one allreduce (plait_transport_v2_t.allreduce): one span
 * (allreduce_flags has no PLAIT_ALLREDUCE_SPANS), reduced by
 * allreduce_scaled as the core called it before version 2; a prescale is a
 * batch_copy of src into dst first; an in-place, unscaled AVERAGE (which the
 * core never passes) NCCL's own. */
static plait_result_t entry_allreduce_v2(void *state, const plait_span_t *spans, size_t n,
                                         plait_dtype_t dtype, plait_op_t op, double prescale,
                                         double postscale) {
  ENTER(state, "allreduce");
  NC_REQUIRE(st, spans != NULL && n == 1,
             "%zu spans: the nccl transport takes one (no PLAIT_ALLREDUCE_SPANS)",
             spans ? n : (size_t)0);
  const plait_span_t *s = spans;
  if (op == PLAIT_OP_AVERAGE && s->src == s->dst && prescale == 1.0 && postscale == 1.0)
    return entry_allreduce(state, s->dst, s->count, dtype, op);
  if (prescale == 1.0)
    return entry_allreduce_scaled(state, s->src, s->dst, s->count, dtype, op, postscale);
  NC_CHECK(entry_batch_copy(state, s, 1, dtype, op, prescale));
  return entry_allreduce_scaled(state, s->dst, s->dst, s->count, dtype, op, postscale);
}

/* Every dtype NCCL reduces (not uint16, int16). */
#define NCCL_DTYPES                                                            \
  (PLAIT_DTYPE_MASK_ALL & ~(PLAIT_DTYPE_BIT(PLAIT_UINT16) | PLAIT_DTYPE_BIT(PLAIT_INT16)))

/* The one exported symbol (with -fvisibility=hidden and exports.map). */
__attribute__((visibility("default"))) extern const plait_transport_t plait_transport_v2;

const plait_transport_t plait_transport_v2 = {
    .abi_version = PLAIT_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(plait_transport_t),
    .name = "nccl",
    .caps = PLAIT_CAP_DEVICE_MEMORY | PLAIT_CAP_ALLREDUCE | PLAIT_CAP_ALLGATHERV |
            PLAIT_CAP_BROADCAST | PLAIT_CAP_ALLTOALLV | PLAIT_CAP_REDUCESCATTER |
            PLAIT_CAP_BARRIER,
    .dtypes = NCCL_DTYPES,
    .ops = PLAIT_OP_MASK_ALL,
    .allreduce_flags = PLAIT_ALLREDUCE_SCALED,
    /* not a candidate of PLAIT_TRANSPORT=auto: it takes device memory only
     * and would fail every host tensor (PLAIT_TRANSPORT=nccl chooses it) */
    .auto_place = 0,
    .init = nccl_init,
    .finalize = nccl_finalize,
    .last_error = nccl_last_error,
    .allreduce = entry_allreduce_v2,
    .allgatherv = entry_allgatherv,
    .broadcast = entry_broadcast,
    .alltoallv = entry_alltoallv,
    .reducescatter = entry_reducescatter,
    .barrier = entry_barrier,
    .mem_alloc = entry_mem_alloc,
    .mem_free = entry_mem_free,
    .mem_copy = entry_mem_copy,
    .algorithm = entry_algorithm,
    .subset = entry_subset,
    .device = entry_device,
    .batch_copy = entry_batch_copy,
    .ready = entry_ready,
    .notify = entry_notify,
    .interrupt = entry_interrupt,
};
