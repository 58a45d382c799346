/*
 * plait transport plugin ABI, version 1: FROZEN. Nothing here changes again;
 * a plugin built against this header keeps loading, served by the core's
 * v1 adapter (src/engine/plugin_v1.c), which maps the current table's calls
 * onto this one's exactly as the core made them when version 1 was current.
 * New plugins use include/plait/transport.h (the current version).
 *
 * A version-1 plugin is a shared object named libplait-transport-<name>.so
 * that exports one symbol, PLAIT_TRANSPORT_SYMBOL_V1 ("plait_transport_v1"),
 * a const plait_transport_v1_t whose abi_version is
 * PLAIT_TRANSPORT_V1_ABI_VERSION. The shared types (init arguments,
 * bootstrap, spans, capability bits) are in transport_common.h.
 */
#ifndef PLAIT_TRANSPORT_V1_H
#define PLAIT_TRANSPORT_V1_H

#include "plait/transport_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLAIT_TRANSPORT_V1_ABI_VERSION 1
#define PLAIT_TRANSPORT_SYMBOL_V1 "plait_transport_v1"

typedef struct plait_transport_v1 {
  uint32_t abi_version; /* PLAIT_TRANSPORT_V1_ABI_VERSION (1) */
  uint32_t struct_size; /* sizeof(plait_transport_v1_t) */
  const char *name;     /* "gloo": the <name> of its file name */
  uint64_t caps;        /* PLAIT_CAP_* */
  uint32_t dtypes;      /* PLAIT_DTYPE_BIT of every dtype allreduce takes */
  uint32_t ops;         /* PLAIT_OP_BIT of every op allreduce takes */

  /* Start the transport; *state is passed to every later call. On failure
   * *state is not used and finalize is not called. */
  plait_result_t (*init)(const plait_transport_init_args_t *args,
                         void **state);
  /* Release everything init made. Called once; never fails the job. */
  plait_result_t (*finalize)(void *state);
  /* Message of the last failure on this state (or, with state NULL, of the
   * last init failure on this thread). Never NULL. */
  const char *(*last_error)(void *state);

  /* In place: buf holds count elements; afterwards every rank's buf holds the
   * reduction over all ranks. */
  plait_result_t (*allreduce)(void *state, void *buf, size_t count,
                              plait_dtype_t dtype, plait_op_t op);
  /* In place: buf holds sum(bytes[]) bytes, rank r's part at offset
   * sum(bytes[0..r)); this rank's part is filled on entry, the rest on
   * return. */
  plait_result_t (*allgatherv)(void *state, void *buf, const size_t *bytes);
  /* In place: buf (bytes long on every rank) takes root's contents. */
  plait_result_t (*broadcast)(void *state, void *buf, size_t bytes, int root);
  /* send_bytes[r] bytes from send (packed in rank order) go to rank r;
   * recv_bytes[r] bytes from rank r land in recv (packed in rank order).
   * send and recv must not overlap. */
  plait_result_t (*alltoallv)(void *state, const void *send,
                              const size_t *send_bytes, void *recv,
                              const size_t *recv_bytes);
  /* send holds sum(counts[]) elements on every rank; recv receives this
   * rank's counts[rank] elements of the reduction (rank r's block starts at
   * element sum(counts[0..r))). send and recv must not overlap. */
  plait_result_t (*reducescatter)(void *state, const void *send, void *recv,
                                  const size_t *counts, plait_dtype_t dtype,
                                  plait_op_t op);
  plait_result_t (*barrier)(void *state);

  /* Memory of the plugin's memory space (host for gloo/ofi, device for nccl),
   * used by the core for fusion buffers, and for the outputs the core
   * allocates for device tensors (allgather, alltoall, reducescatter): those
   * are freed by plait_release on the caller's thread, so a plugin with
   * PLAIT_CAP_DEVICE_MEMORY makes mem_alloc and mem_free safe to call from
   * any thread, concurrently with its other entries. */
  plait_result_t (*mem_alloc)(void *state, size_t bytes, void **ptr);
  plait_result_t (*mem_free)(void *state, void *ptr);
  plait_result_t (*mem_copy)(void *state, void *dst, const void *src,
                             size_t bytes, plait_copy_kind_t kind);

  /* ---- Appended after the first version: read only when struct_size
   * reaches past the field (PLAIT_TRANSPORT_V1_HAS). ---- */

  /* Optional (may be NULL): the name of the algorithm this plugin runs for a
   * collective (one PLAIT_CAP_<collective> bit) of `bytes` bytes in all, e.g.
   * "ring" or "recursive doubling"; NULL when it cannot say. For benchmarks
   * and logs. May be called from any thread, concurrently with collectives:
   * a pure function of its settings. Static storage. */
  const char *(*algorithm)(void *state, uint64_t collective, uint64_t bytes);

  /* Optional (may be NULL: the core then refuses every process set but the
   * global one, naming the transport): a communicator over a subset of the
   * ranks of `state`, for process sets (plait_process_set_add).
   *
   * A collective over `state`: every rank of `state`, member of the subset
   * or not, calls it with the same ranks[], in the same order relative to
   * its other collectives on `state`. ranks[] holds n distinct ranks of
   * `state` in increasing order (1 <= n <= nranks); the plugin never keeps
   * the pointer. On a member, *sub receives a new state usable with every
   * entry of this table (collectives, mem_*, last_error, algorithm,
   * subset): its rank is the member's index in ranks[], its nranks is n, and
   * collectives on it involve the members only. On a non-member *sub is set
   * to NULL. The sub-state is released with finalize, before its parent.
   * A plugin makes the sub-state from what the parent already has (gloo: a
   * context connected through the parent's collectives; ofi: the subset's
   * addresses in the parent's address vector): it never uses the bootstrap,
   * which after init belongs to the core's control plane. Messages of a
   * sub-state never match receives of its parent or of another sub-state.
   * Same threading as every call: one thread at a time over a parent and
   * all its sub-states. Errors: PLAIT_ERR_INVALID_ARGUMENT (bad ranks[],
   * nothing communicated), PLAIT_ERR_PEER_LOST / PLAIT_ERR_TRANSPORT as for
   * any collective. */
  plait_result_t (*subset)(void *state, const int *ranks, int n, void **sub);

  /* Optional (may be NULL: the core then takes a plugin that loads as one
   * that can start): whether init with these args could start on this rank,
   * decided here alone, for PLAIT_TRANSPORT=auto. It must not use
   * args->bootstrap or reach other ranks, and leaves nothing open. Returns
   * PLAIT_SUCCESS and writes what init would use (e.g. "shm", at most
   * detail_len bytes with its NUL) into detail; or the code init would fail
   * with and why, in detail. Every rank's answer is exchanged and the same
   * transport is chosen on every rank, so a rank whose detail differs from
   * rank 0's (another provider) keeps the job off this transport. Called
   * from the thread that later calls init, before init; may take as long as
   * init's local part. */
  plait_result_t (*probe)(const plait_transport_init_args_t *args, char *detail,
                          size_t detail_len);

  /* Optional (may be NULL: the core then copies the input into the output
   * and scales the result itself, each a pass over memory of its own): an
   * allreduce from send into recv whose result is multiplied by postscale,
   * with the copy and the scaling folded into the transport's own passes
   * over the data (a ring reads send where it would read buf and scales
   * each block as it finishes reducing it).
   *
   * send holds count elements on every rank; afterwards recv holds, on
   * every rank, the reduction over all ranks of send with each element then
   * multiplied by postscale exactly as plait_scale_fn does it (the rounding
   * of plait_reduce_fn followed by plait_scale_fn; postscale 1.0: as
   * allreduce). send == recv is in place; otherwise the two must not
   * overlap and send is only read. op as for allreduce; the core passes
   * SUM for AVERAGE with 1/nranks folded into postscale (Horovod's
   * arithmetic). Same arguments on every rank, same errors as allreduce;
   * PLAIT_ERR_INVALID_ARGUMENT for postscale != 1.0 on bool. A plugin that
   * sets it must give results bit-identical to allreduce followed by
   * plait_scale_fn. */
  plait_result_t (*allreduce_scaled)(void *state, const void *send, void *recv,
                                     size_t count, plait_dtype_t dtype,
                                     plait_op_t op, double postscale);

  /* ---- The device-memory path. A plugin with PLAIT_CAP_DEVICE_MEMORY
   * holds tensors the core cannot touch (it never dereferences a pointer
   * into device memory, nor includes a device header): every byte the core
   * moves, scales or fills there goes through the entries below. A device
   * plugin without batch_copy gets only unfused, in-place operations without
   * scale factors or AVERAGE (the core refuses the rest, naming the
   * transport). ---- */

  /* Optional: the device index of this state's memory space (the one
   * device its buffers live on), or -1 when it cannot say. The core refuses
   * a tensor on another device at the API, naming both. Any thread. */
  int (*device)(void *state);

  /* Optional: n spans in one pass (a GPU plugin: one kernel launch for all
   * of them, the many small tensors of a fused response included). For span
   * i: with src set, dst[0..count) = src[0..count) * factor, each element
   * rounded exactly as plait_scale_fn does it (factor 1.0: a copy, bit for
   * bit); with src NULL, dst[0..count) = the identity of op (0 for SUM and
   * AVERAGE, 1 for PRODUCT, the dtype's lowest value, -inf for floating
   * types, for MAX, its highest for MIN; bool: 0 for SUM/AVERAGE/MAX, 1 for
   * MIN/PRODUCT), not scaled. count is in elements of dtype; pointers are
   * in this state's memory space. dst == src (scaling in place) is allowed;
   * any other overlap, between spans too, is not. Ordered after everything
   * this state ran or enqueued before, and before everything after. With
   * notify set it may return once enqueued. Errors as for a collective
   * (PLAIT_ERR_INVALID_ARGUMENT for factor != 1.0 on bool). */
  plait_result_t (*batch_copy)(void *state, const struct plait_span *spans, size_t n,
                               plait_dtype_t dtype, plait_op_t op, double factor);

  /* Optional: the next work this state runs (a batch_copy or a collective)
   * first waits for everything enqueued so far on the caller's `stream`
   * (plait_op_options_t.stream: CUDA, a cudaStream_t; NULL, the legacy
   * default stream), without blocking the host (CUDA: an event recorded on
   * stream and waited for by the plugin's own stream). The core calls it
   * once per stream of the tensors a response reads, before their copies
   * or collective. Without it the plugin orders work as it sees fit (the
   * nccl plugin: after the legacy default stream). */
  plait_result_t (*ready)(void *state, void *stream);

  /* Optional: completion without waiting. When set, collectives,
   * batch_copy and mem_copy of device memory on this state (and its
   * subsets) return once their work is enqueued, in order (an error found
   * at enqueue is returned at once, as usual), and notify arranges for
   * done(ctx, rc, msg) to be called exactly once, from a thread of the
   * plugin's, never from inside a call the core makes, after everything
   * enqueued on the state so far has finished: rc PLAIT_SUCCESS and msg
   * NULL, or the first failure (rc, and msg naming the rank, valid during
   * the call). No thread spins while it waits (CUDA: a host function
   * enqueued on the stream wakes a waiter that otherwise sleeps). A state
   * that failed calls every outstanding and later done with the failure.
   * done must not call into the plugin. finalize first calls every
   * outstanding done (with PLAIT_ERR_SHUTDOWN if the work never finished). */
  plait_result_t (*notify)(void *state, plait_done_fn done, void *ctx);

  /* Optional: the core learned from its control plane that the job failed
   * (a rank was lost, or the job is shutting down after a failure): the
   * plugin stops waiting for peers at once (NCCL: ncclCommAbort), so that
   * enqueued work and every outstanding done finish with failure, and later
   * calls fail at once with rc. rc and why are the core's code and message.
   * Called from the core's one plugin thread, like every other entry, and
   * at most once per state. */
  plait_result_t (*interrupt)(void *state, plait_result_t rc, const char *why);

  /* Optional (may be NULL: the core then copies a fused response's tensors
   * through its fusion buffer, a pass over memory on each side): an
   * allreduce_scaled over n spans of host memory read and written where
   * they are, the fused response's tensors themselves. The spans' src, in
   * order, are the send buffer and their dst the recv buffer of one
   * allreduce_scaled of sum(count) elements: afterwards each span's dst
   * holds, on every rank, its elements of the reduction over all ranks,
   * scaled by postscale as allreduce_scaled does it. span.src NULL is not
   * allowed (the core copies a joined rank's identities through the buffer
   * instead); dst == src is in place; no other two ranges of the call
   * overlap (the core checks, and uses its buffer where they would). n >= 1,
   * the same counts in the same order on every rank; op, dtype and errors
   * as for allreduce_scaled. Only in a table that also has allreduce_scaled
   * and no PLAIT_CAP_DEVICE_MEMORY. The plugin may pack the spans into a
   * buffer of its own where that is faster (many tiny spans) or required
   * (a provider that needs registered memory): results are bit-identical
   * either way. */
  plait_result_t (*allreduce_spans)(void *state, const struct plait_span *spans, size_t n,
                                    plait_dtype_t dtype, plait_op_t op, double postscale);
} plait_transport_v1_t;

/* Bytes of a version-1 table before any appended field. */
#define PLAIT_TRANSPORT_V1_MIN_SIZE offsetof(plait_transport_v1_t, algorithm)
/* Whether table t (its struct_size) has field f and f is set. */
#define PLAIT_TRANSPORT_V1_HAS(t, f)                                              \
  ((t)->struct_size >= offsetof(plait_transport_v1_t, f) + sizeof((t)->f) && (t)->f)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PLAIT_TRANSPORT_V1_H */
