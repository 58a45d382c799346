/*
 * plait transport plugin ABI, version 2 (the current one: transport.h).
 *
 * A plugin is a shared object named libplait-transport-<name>.so that
 * exports one symbol, PLAIT_TRANSPORT_SYMBOL_V2 ("plait_transport_v2"), a
 * const plait_transport_v2_t whose abi_version is
 * PLAIT_TRANSPORT_V2_ABI_VERSION. The core finds it at run time
 * (PLAIT_PLUGIN_PATH, then the folder beside libplait.so); it never includes
 * a transport's headers and never names one: what it would decide by a
 * plugin's name (its place in PLAIT_TRANSPORT=auto, the piece size of fused
 * allreduces, the largest tensor worth fusing) the plugin declares in its
 * table's traits. The shared types are in transport_common.h and the rules
 * of the ABI at its top; version 1 (transport_v1.h) is frozen and served
 * through an adapter.
 *
 * What changed from version 1: one allreduce entry over spans replaces
 * allreduce, allreduce_scaled and allreduce_spans; what it accepts beyond an
 * in-place unscaled buffer is declared in allreduce_flags; and the traits
 * (auto_place, fusion_piece, fusion_max_tensor) are new.
 */
#ifndef PLAIT_TRANSPORT_V2_H
#define PLAIT_TRANSPORT_V2_H

#include "plait/transport_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLAIT_TRANSPORT_V2_ABI_VERSION 2
#define PLAIT_TRANSPORT_SYMBOL_V2 "plait_transport_v2"

/* Bits of plait_transport_v2_t.allreduce_flags: what its allreduce accepts
 * beyond one in-place span with both factors 1.0. */
/* Spans whose dst differs from src, and prescale / postscale other than
 * 1.0, folded into the transport's own passes over the data (a ring reads
 * src where it would read dst and scales each block as it finishes reducing
 * it). Without it the core copies and scales in passes of its own and
 * passes src == dst with both factors 1.0. */
#define PLAIT_ALLREDUCE_SCALED (1u << 0)
/* More than one span in a call: a fused response's tensors reduced where
 * they are, without the core's fusion buffer (host memory only, and only
 * with PLAIT_ALLREDUCE_SCALED). Without it every call has n == 1. */
#define PLAIT_ALLREDUCE_SPANS (1u << 1)

typedef struct plait_transport_v2 {
  uint32_t abi_version; /* PLAIT_TRANSPORT_V2_ABI_VERSION */
  uint32_t struct_size; /* sizeof(plait_transport_v2_t) */
  const char *name;     /* "gloo": the <name> of its file name */
  uint64_t caps;        /* PLAIT_CAP_* */
  uint32_t dtypes;      /* PLAIT_DTYPE_BIT of every dtype allreduce takes */
  uint32_t ops;         /* PLAIT_OP_BIT of every op allreduce takes */

  /* ---- Traits: read by the core before init, the same on every rank. ---- */

  /* PLAIT_ALLREDUCE_* bits: what allreduce accepts (see each bit). */
  uint32_t allreduce_flags;
  /* Its place among the candidates of PLAIT_TRANSPORT=auto: the core tries
   * every plugin it finds with auto_place > 0, lowest first (equal places:
   * by name), and takes the first that every rank can start. 0: never
   * chosen by auto (only by PLAIT_TRANSPORT=<name>), e.g. a transport that
   * takes device memory only. */
  int32_t auto_place;
  /* Bytes: a fused allreduce in host memory goes through the core's fusion
   * buffer at most this many bytes of a response at a time, each piece
   * copied in, reduced and copied out while it is still in cache. 0: the
   * whole response at once. Every rank runs the same transport, so every
   * rank cuts a response alike. */
  uint64_t fusion_piece;
  /* Bytes: the transport's default for PLAIT_FUSION_MAX_TENSOR (tensors
   * above it are reduced alone), taken where the user did not set it. 0:
   * the configuration table's default. */
  uint64_t fusion_max_tensor;

  /* Start the transport; *state is passed to every later call. On failure
   * *state is not used and finalize is not called. */
  plait_result_t (*init)(const plait_transport_init_args_t *args,
                         void **state);
  /* Release everything init made. Called once; never fails the job. */
  plait_result_t (*finalize)(void *state);
  /* Message of the last failure on this state (or, with state NULL, of the
   * last init failure on this thread). Never NULL. */
  const char *(*last_error)(void *state);

  /* The one allreduce. spans[0..n) are, in order, the pieces of one
   * allreduce of sum(count) elements (a lone tensor is one span): its send
   * buffer is the spans' src, its receive buffer their dst. Afterwards each
   * span's dst holds, on every rank, its elements of the reduction over all
   * ranks of src * prescale, then multiplied by postscale; each scaling
   * rounded exactly as plait_scale_fn does it, the reduction as
   * plait_reduce_fn (prescale and postscale 1.0: a plain reduction, bit for
   * bit). dst == src is in place; no other two ranges of a call overlap;
   * src is only read. n >= 1 and the same counts in the same order on every
   * rank; the same dtype, op and factors too. op AVERAGE is not passed: the
   * core passes SUM with 1/nranks folded into postscale (Horovod's
   * arithmetic). What a plugin accepts beyond n == 1, dst == src and both
   * factors 1.0 is declared in allreduce_flags (PLAIT_ALLREDUCE_SCALED,
   * PLAIT_ALLREDUCE_SPANS); the core asks for nothing more, and a plugin
   * refuses more with PLAIT_ERR_INVALID_ARGUMENT. Also
   * PLAIT_ERR_INVALID_ARGUMENT: a span with a NULL src or dst and a
   * nonzero count, n == 0, a factor other than 1.0 on bool. The plugin may
   * pack spans into a buffer of its own where that is faster (many tiny
   * spans) or required (a provider that needs registered memory): results
   * are bit-identical either way. Blocks until done (or, with notify, until
   * enqueued). */
  plait_result_t (*allreduce)(void *state, const plait_span_t *spans, size_t n,
                              plait_dtype_t dtype, plait_op_t op, double prescale,
                              double postscale);
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

  /* Optional: a vote, one byte's MIN over every rank of the state, that the
   * caller may leave unfinished and take up again: the core's cached-epoch
   * agreement, which a thread waiting on an operation runs
   * (PLAIT_CALLER_RUNS) and must leave when its wait's timeout ends. With no
   * vote pending it starts one with `mine`; with one pending it goes on with
   * it (`mine` is ignored). It then waits up to `wait_s` seconds (< 0: no
   * limit but the usual one) for it to finish. PLAIT_SUCCESS: done, *out
   * the MIN of every rank's byte; PLAIT_ERR_TIMEOUT: not yet, not a failure
   * (nothing is lost: the next call goes on). While a vote is pending the
   * core calls no other collective on the state, only vote again (finalize
   * and interrupt excepted). The usual timeout applies across calls: a peer
   * that sends nothing for PLAIT_TIMEOUT_S fails it. Every rank uses it for
   * every agreement once the plugin has it (one plugin per job). */
  plait_result_t (*vote)(void *state, uint8_t mine, uint8_t *out, double wait_s);

  /* Optional: vote's byte MIN carried with an allreduce of count elements
   * (the cached epoch's round of one small tensor: one collective where a
   * vote and an allreduce were two). Every rank passes the same count,
   * dtype, op and postscale; a rank voting 1 passes its send and recv (the
   * same buffer: in place), a rank voting 0 may pass NULL for both. recv
   * is written only when the MIN is 1: then recv = op over every rank's
   * send, times postscale (AVERAGE: the sum divided by the ranks, then
   * postscale), bit-identical on every rank; with a MIN of 0 no rank's recv
   * changes, so a round the ranks did not all agree to run leaves the
   * tensors as they were. Resumable as vote, with the same rules: with none
   * pending it starts one (send is read then, not later); with one pending
   * it goes on with it, every argument but out and wait_s ignored (recv
   * must stay valid until it ends); PLAIT_ERR_TIMEOUT: not yet; while one
   * is pending the core calls nothing else on the state but this. The core
   * calls it for tensors of up to 64 KiB; count * size + 8 bytes must fit
   * one message of the plugin's. */
  plait_result_t (*vote_allreduce)(void *state, uint8_t mine, const void *send, void *recv,
                                   size_t count, plait_dtype_t dtype, plait_op_t op,
                                   double postscale, uint8_t *out, double wait_s);

} plait_transport_v2_t;

/* Bytes of a version-2 table's first layout (through interrupt): the
 * optional entries are there, NULL when not provided. */
#define PLAIT_TRANSPORT_V2_MIN_SIZE                                            \
  (offsetof(plait_transport_v2_t, interrupt) +                                 \
   sizeof(plait_result_t (*)(void *, plait_result_t, const char *)))
/* Whether version-2 table t (its struct_size) has field f and f is set. */
#define PLAIT_TRANSPORT_V2_HAS(t, f)                                           \
  ((t)->struct_size >= offsetof(plait_transport_v2_t, f) + sizeof((t)->f) && (t)->f)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PLAIT_TRANSPORT_V2_H */
