/*
 * plait transport plugin ABI: the types every version of the plugin table
 * shares (include/plait/transport.h says which version is current).
 *
 * Rules of the ABI:
 *  - Every struct starts with its size (or, for the exported table, its ABI
 *    version and then its size). Fields are only ever appended; a reader checks
 *    the size before touching a field that was appended after its first layout.
 *  - A reader accepts any size from the struct's first layout up
 *    (PLAIT_BOOTSTRAP_SIZE_V1, PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1, the table's
 *    PLAIT_TRANSPORT_V<n>_MIN_SIZE) and refuses a smaller one with an error
 *    naming the struct, the size and the minimum. Fields it does not know
 *    (a larger size, from a newer writer) are ignored: unlike plait.h's
 *    structs, nothing here asks the reader to do something. What a plugin
 *    supports is declared by its own table, which the core reads first; the
 *    core never relies on a plugin reading a field appended to the structs
 *    it passes in.
 *  - A plugin never throws across the ABI, never calls exit() or abort(), and
 *    reports every failure as a plait_result_t plus a message it returns from
 *    last_error().
 *  - Threading: the core calls a plugin from one thread at a time (the thread
 *    that ran plait_init, later the coordinator thread). The bootstrap may only
 *    be used from inside a plugin call.
 *  - Collective calls are made by every rank in the same order with matching
 *    arguments (the core guarantees it). They block until done, or fail with
 *    PLAIT_ERR_PEER_LOST (naming the rank when known) within the timeout given
 *    at init.
 *
 * These structs are shared by every table version, and so only grow (by
 * appending): a version's table header never copies them.
 */
#ifndef PLAIT_TRANSPORT_COMMON_H
#define PLAIT_TRANSPORT_COMMON_H

#include <stddef.h>

#include "plait/plait.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Capability bits in plait_transport_v1_t.caps. */
#define PLAIT_CAP_HOST_MEMORY (1ull << 0)   /* buffers in host memory */
#define PLAIT_CAP_DEVICE_MEMORY (1ull << 1) /* buffers in device memory */
#define PLAIT_CAP_ALLREDUCE (1ull << 8)
#define PLAIT_CAP_ALLGATHERV (1ull << 9)
#define PLAIT_CAP_BROADCAST (1ull << 10)
#define PLAIT_CAP_ALLTOALLV (1ull << 11)
#define PLAIT_CAP_REDUCESCATTER (1ull << 12)
#define PLAIT_CAP_BARRIER (1ull << 13)

/* Bit for a dtype / op in the dtypes and ops masks. */
#define PLAIT_DTYPE_BIT(dtype) (1u << (unsigned)(dtype))
#define PLAIT_OP_BIT(op) (1u << (unsigned)(op))

/* Log levels, as PLAIT_LOG_LEVEL names them. */
typedef enum plait_log_level {
  PLAIT_LOG_TRACE = 0,
  PLAIT_LOG_DEBUG = 1,
  PLAIT_LOG_INFO = 2,
  PLAIT_LOG_WARN = 3,
  PLAIT_LOG_ERROR = 4,
  PLAIT_LOG_OFF = 5
} plait_log_level_t;

/*
 * The core's logger. subsystem is a short word ("gloo"). The plugin checks
 * level >= plait_transport_init_args_t.log_level before formatting.
 */
typedef void (*plait_log_fn)(int level, const char *subsystem,
                             const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/*
 * Byte-moving collectives over the control plane, for a plugin to exchange
 * addresses or unique ids at init. Slow (through rank 0); not for data.
 * Every rank must call them in the same order. They fail with
 * PLAIT_ERR_PEER_LOST naming a lost rank, never hang.
 */
typedef struct plait_bootstrap {
  size_t size; /* sizeof(plait_bootstrap_t) as the core knows it */
  void *ctx;   /* pass back as the first argument */
  int rank;
  int nranks;
  /* recv receives nranks * bytes: rank r's send at offset r * bytes. */
  plait_result_t (*allgather)(void *ctx, const void *send, size_t bytes,
                              void *recv);
  /* buf (bytes long on every rank) is replaced by root's. */
  plait_result_t (*broadcast)(void *ctx, void *buf, size_t bytes, int root);
  plait_result_t (*barrier)(void *ctx);
  /* Fields appended later go here. */
} plait_bootstrap_t;

/* Bytes of plait_bootstrap_t's first layout (through barrier). */
#define PLAIT_BOOTSTRAP_SIZE_V1                                                \
  (offsetof(plait_bootstrap_t, barrier) + sizeof(plait_result_t (*)(void *)))

/*
 * The core's reduction kernel: dst[i] = a[i] op b[i] for i < count. dst may be
 * a or b. Handles every dtype (float16 and bfloat16 through float32) and the
 * ops SUM, MIN, MAX, PRODUCT (AVERAGE reduces as SUM). Returns
 * PLAIT_ERR_INVALID_ARGUMENT for a dtype/op pair it cannot do (AVERAGE on
 * bool). Thread-safe.
 */
typedef plait_result_t (*plait_reduce_fn)(plait_dtype_t dtype, plait_op_t op,
                                          void *dst, const void *a,
                                          const void *b, size_t count);

/* dst[i] = src[i] * factor, rounding like the dtype's own arithmetic
 * (integers truncate toward zero). dst may be src. */
typedef plait_result_t (*plait_scale_fn)(plait_dtype_t dtype, void *dst,
                                         const void *src, size_t count,
                                         double factor);

/* dst[i] = src[i] / divisor: exact integer division truncating toward zero
 * on integer types, true division on floating types; how AVERAGE finishes a
 * SUM. Not defined for bool (PLAIT_ERR_INVALID_ARGUMENT). dst may be src. */
typedef plait_result_t (*plait_divide_fn)(plait_dtype_t dtype, void *dst,
                                          const void *src, size_t count,
                                          uint32_t divisor);

/* dst[i] = (a[i] op b[i]) * factor: plait_reduce_fn then plait_scale_fn,
 * with the same rounding in between (the reduction rounds to the dtype, then
 * the scaling rounds as plait_scale_fn does), bit for bit the two calls, but
 * in one pass over memory. dst may be a or b. Appended after version 1:
 * present when plait_transport_init_args_t.size reaches past it. */
typedef plait_result_t (*plait_reduce_scale_fn)(plait_dtype_t dtype, plait_op_t op,
                                                void *dst, const void *a,
                                                const void *b, size_t count,
                                                double factor);

typedef struct plait_transport_init_args {
  size_t size; /* sizeof(plait_transport_init_args_t) as the core knows it */
  int rank;
  int nranks;
  int local_rank;
  int local_size;
  int cross_rank;
  int cross_size;
  const plait_bootstrap_t *bootstrap; /* valid until finalize returns */
  plait_log_fn log;
  int log_level;    /* messages below this level are dropped by the core */
  double timeout_s; /* fail an operation after this long without progress */
  plait_reduce_fn reduce;
  plait_scale_fn scale;
  plait_divide_fn divide;
  /* Numeric IP address (text) of this host on the network the control plane
   * uses: the address other ranks can reach this process at. */
  const char *host_address;
  /* ---- Appended after the first layout: read only when size reaches past
   * the field (PLAIT_INIT_ARGS_HAS). ---- */
  /* The core's fused reduce-then-scale kernel, for allreduce_scaled. */
  plait_reduce_scale_fn reduce_scale;
  /* Fields appended later go here. */
} plait_transport_init_args_t;

/* Bytes of plait_transport_init_args_t's first layout (through host_address). */
#define PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1                                      \
  (offsetof(plait_transport_init_args_t, host_address) + sizeof(const char *))

/* Whether init args a (its size) has field f and f is set. */
#define PLAIT_INIT_ARGS_HAS(a, f)                                              \
  ((a)->size >= offsetof(plait_transport_init_args_t, f) + sizeof((a)->f) && (a)->f)

/* One piece of an allreduce or a batch_copy: count elements from src into
 * dst (batch_copy: src NULL writes the op's identity). */
typedef struct plait_span {
  void *dst;
  const void *src;
  size_t count;
} plait_span_t;

/* The callback of notify: the work enqueued before it finished with rc
 * (msg: the failure's message, NULL on success, valid during the call). */
typedef void (*plait_done_fn)(void *ctx, plait_result_t rc, const char *msg);

/* Where a copy goes, for mem_copy. */
typedef enum plait_copy_kind {
  PLAIT_COPY_HOST_TO_HOST = 0,
  PLAIT_COPY_HOST_TO_DEVICE = 1,
  PLAIT_COPY_DEVICE_TO_HOST = 2,
  PLAIT_COPY_DEVICE_TO_DEVICE = 3
} plait_copy_kind_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PLAIT_TRANSPORT_COMMON_H */
