#include "coll.h"

#include <stdint.h>
#include <string.h>

#include "batch.h"
#include "errors.h"
#include "wait.h"

int nc_dtype(plait_dtype_t dtype, ncclDataType_t *out) {
  switch (dtype) {
    case PLAIT_UINT8: *out = ncclUint8; return 1;
    case PLAIT_INT8: *out = ncclInt8; return 1;
    case PLAIT_INT32: *out = ncclInt32; return 1;
    case PLAIT_INT64: *out = ncclInt64; return 1;
    case PLAIT_FLOAT16: *out = ncclFloat16; return 1;
    case PLAIT_BFLOAT16: *out = ncclBfloat16; return 1;
    case PLAIT_FLOAT32: *out = ncclFloat32; return 1;
    case PLAIT_FLOAT64: *out = ncclFloat64; return 1;
    case PLAIT_BOOL: *out = ncclUint8; return 1;
    default: return 0; /* uint16, int16: NCCL has no 16-bit integers */
  }
}

ncclRedOp_t nc_op(plait_dtype_t dtype, plait_op_t op) {
  if (dtype == PLAIT_BOOL) return op == PLAIT_OP_MIN || op == PLAIT_OP_PRODUCT ? ncclMin : ncclMax;
  switch (op) {
    case PLAIT_OP_MIN: return ncclMin;
    case PLAIT_OP_MAX: return ncclMax;
    case PLAIT_OP_PRODUCT: return ncclProd;
    default: return ncclSum;
  }
}

/* finish(), and for AVERAGE the division of the sum (count elements at
 * buf) by the ranks, as the core's plait_divide, before the wait. */
static plait_result_t finish_avg(nccl_state_t *st, const char *what, ncclResult_t r, void *buf,
                                 size_t count, plait_dtype_t dtype, plait_op_t op);

/* Starts a use of the communicator: takes the family's comm_mu (the waiter
 * may abort communicators meanwhile) and fails if the family broke. */
static plait_result_t begin(nccl_state_t *st) {
  pthread_mutex_lock(&st->fam->comm_mu);
  plait_result_t failed = nc_family_failed(st);
  if (failed == PLAIT_SUCCESS && st->comm) return PLAIT_SUCCESS;
  pthread_mutex_unlock(&st->fam->comm_mu);
  return nc_fail(st, failed != PLAIT_SUCCESS ? failed : PLAIT_ERR_TRANSPORT,
                 "the NCCL communicator failed earlier and was aborted: %s",
                 failed != PLAIT_SUCCESS ? st->fam->broken_msg : "(no message)");
}

/* Settles the enqueue r of `what`, ends the use begun by begin(), then waits
 * for the stream (unless notify is in use: nc_finish). */
static plait_result_t finish(nccl_state_t *st, const char *what, ncclResult_t r) {
  plait_result_t rc = nc_settle(st, st->comm, what, r);
  pthread_mutex_unlock(&st->fam->comm_mu);
  return rc != PLAIT_SUCCESS ? rc : nc_finish(st, what);
}

static plait_result_t finish_avg(nccl_state_t *st, const char *what, ncclResult_t r, void *buf,
                                 size_t count, plait_dtype_t dtype, plait_op_t op) {
  plait_result_t rc = nc_settle(st, st->comm, what, r);
  pthread_mutex_unlock(&st->fam->comm_mu);
  if (rc == PLAIT_SUCCESS && op == PLAIT_OP_AVERAGE && st->nranks > 1)
    rc = nc_batch_divide(st, buf, count, dtype, (uint32_t)st->nranks);
  return rc != PLAIT_SUCCESS ? rc : nc_finish(st, what);
}

plait_result_t nc_allreduce(nccl_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                            plait_op_t op) {
  NC_CHECK(begin(st));
  ncclDataType_t dt = ncclUint8;
  nc_dtype(dtype, &dt);
  ncclResult_t r = ncclAllReduce(buf, buf, count, dt, nc_op(dtype, op), st->comm, st->stream);
  return finish_avg(st, "ncclAllReduce", r, buf, count, dtype, op);
}

static int all_equal(const size_t *v, int n) {
  for (int i = 1; i < n; i++)
    if (v[i] != v[0]) return 0;
  return 1;
}

/* Ends a group even after a call inside it failed (first), so that NCCL's
 * group state is left clean; returns the first failure. */
static ncclResult_t group_end(ncclResult_t first) {
  ncclResult_t r = ncclGroupEnd();
  return first != ncclSuccess ? first : r;
}

plait_result_t nc_allgatherv(nccl_state_t *st, void *buf, const size_t *bytes) {
  NC_CHECK(begin(st));
  char *b = buf;
  if (all_equal(bytes, st->nranks)) /* in place: sendbuff == recvbuff + rank * count */
    return finish(st, "ncclAllGather",
                  ncclAllGather(b + (size_t)st->rank * bytes[0], b, bytes[0], ncclUint8,
                                st->comm, st->stream));
  ncclResult_t r = ncclGroupStart();
  size_t off = 0;
  for (int root = 0; root < st->nranks && r == ncclSuccess; root++) {
    if (bytes[root])
      r = ncclBroadcast(b + off, b + off, bytes[root], ncclUint8, root, st->comm, st->stream);
    off += bytes[root];
  }
  return finish(st, "ncclBroadcast (grouped, one per rank)", group_end(r));
}

plait_result_t nc_broadcast(nccl_state_t *st, void *buf, size_t bytes, int root) {
  NC_CHECK(begin(st));
  return finish(st, "ncclBroadcast",
                ncclBroadcast(buf, buf, bytes, ncclUint8, root, st->comm, st->stream));
}

plait_result_t nc_alltoallv(nccl_state_t *st, const void *send, const size_t *send_bytes,
                            void *recv, const size_t *recv_bytes) {
  NC_CHECK(begin(st));
  const char *s = send;
  char *d = recv;
  size_t so = 0, ro = 0;
  for (int peer = 0; peer < st->rank; peer++) so += send_bytes[peer], ro += recv_bytes[peer];
  if (send_bytes[st->rank]) { /* this rank's block to itself: before the group */
    cudaError_t e = cudaMemcpyAsync(d + ro, s + so, send_bytes[st->rank],
                                    cudaMemcpyDeviceToDevice, st->stream);
    if (e != cudaSuccess) {
      pthread_mutex_unlock(&st->fam->comm_mu);
      return nc_cuda_break(st, PLAIT_ERR_TRANSPORT, "cudaMemcpyAsync (this rank's block)", e);
    }
  }
  so = ro = 0;
  ncclResult_t r = ncclGroupStart();
  for (int peer = 0; peer < st->nranks && r == ncclSuccess; peer++) {
    if (peer != st->rank && send_bytes[peer])
      r = ncclSend(s + so, send_bytes[peer], ncclUint8, peer, st->comm, st->stream);
    if (peer != st->rank && r == ncclSuccess && recv_bytes[peer])
      r = ncclRecv(d + ro, recv_bytes[peer], ncclUint8, peer, st->comm, st->stream);
    so += send_bytes[peer];
    ro += recv_bytes[peer];
  }
  return finish(st, "ncclSend/ncclRecv (grouped)", group_end(r));
}

plait_result_t nc_reducescatter(nccl_state_t *st, const void *send, void *recv,
                                const size_t *counts, plait_dtype_t dtype, plait_op_t op) {
  NC_CHECK(begin(st));
  ncclDataType_t dt = ncclUint8;
  nc_dtype(dtype, &dt);
  ncclRedOp_t rop = nc_op(dtype, op);
  if (all_equal(counts, st->nranks))
    return finish_avg(st, "ncclReduceScatter",
                      ncclReduceScatter(send, recv, counts[0], dt, rop, st->comm, st->stream),
                      recv, counts[st->rank], dtype, op);
  const char *s = send;
  size_t es = plait_dtype_size_inline(dtype), off = 0;
  ncclResult_t r = ncclGroupStart();
  for (int root = 0; root < st->nranks && r == ncclSuccess; root++) {
    if (counts[root]) /* recvbuff may be NULL except on the root */
      r = ncclReduce(s + off * es, root == st->rank ? recv : NULL, counts[root], dt, rop, root,
                     st->comm, st->stream);
    off += counts[root];
  }
  return finish_avg(st, "ncclReduce (grouped, one per rank)", group_end(r), recv,
                    counts[st->rank], dtype, op);
}

plait_result_t nc_barrier(nccl_state_t *st) {
  NC_CHECK(begin(st));
  return finish(st, "ncclAllReduce (barrier)",
                ncclAllReduce(st->one, st->one, 1, ncclInt32, ncclSum, st->comm, st->stream));
}

/* Host memory the DMA engine can reach without staging (pinned or mapped). */
static int pinned(const void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged;
}

plait_result_t nc_mem_copy(nccl_state_t *st, void *dst, const void *src, size_t bytes,
                           plait_copy_kind_t kind) {
  static const enum cudaMemcpyKind kinds[] = {cudaMemcpyHostToHost, cudaMemcpyHostToDevice,
                                              cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
  if (kind == PLAIT_COPY_HOST_TO_HOST) {
    memmove(dst, src, bytes);
    return PLAIT_SUCCESS;
  }
  plait_result_t rc = nc_after_default_stream(st);
  if (rc != PLAIT_SUCCESS) return rc;
  /* cudaMemcpyAsync with pageable host memory may wait for the stream inside
   * CUDA, unbounded: the stream is drained first (bounded, polled), and the
   * copy is waited for. */
  const void *host = kind == PLAIT_COPY_HOST_TO_DEVICE ? src : dst;
  int sync = kind != PLAIT_COPY_DEVICE_TO_DEVICE && !pinned(host);
  if (sync) NC_CHECK(nc_wait(st, "the work before a copy with pageable host memory"));
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kinds[kind], st->stream);
  if (e != cudaSuccess) return nc_cuda_fail(st, PLAIT_ERR_TRANSPORT, "cudaMemcpyAsync", e);
  return sync ? nc_wait(st, "cudaMemcpyAsync") : nc_finish(st, "cudaMemcpyAsync");
}

plait_result_t nc_allreduce_scaled(nccl_state_t *st, const void *send, void *recv, size_t count,
                                   plait_dtype_t dtype, plait_op_t op, double postscale) {
  NC_CHECK(begin(st));
  ncclDataType_t dt = ncclUint8;
  nc_dtype(dtype, &dt);
  ncclResult_t r = ncclAllReduce(send, recv, count, dt, nc_op(dtype, op), st->comm, st->stream);
  plait_result_t rc = nc_settle(st, st->comm, "ncclAllReduce", r);
  pthread_mutex_unlock(&st->fam->comm_mu);
  if (rc != PLAIT_SUCCESS) return rc;
  if (op == PLAIT_OP_AVERAGE && st->nranks > 1) /* the core sends SUM; as allreduce if not */
    NC_CHECK(nc_batch_divide(st, recv, count, dtype, (uint32_t)st->nranks));
  if (postscale != 1.0) {
    plait_span_t span = {recv, recv, count};
    NC_CHECK(nc_batch_enqueue(st, &span, 1, dtype, PLAIT_OP_SUM, postscale, 0));
  }
  return nc_finish(st, postscale != 1.0 ? "ncclAllReduce and the scaling kernel" : "ncclAllReduce");
}
