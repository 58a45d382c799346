/*
 * plait: collective communication for data-parallel training.
 *
 * This is the only header an application needs. It is plain C, compiles as
 * C99, C11 and C++, and every symbol it declares is exported by libplait.so.
 *
 * Conventions that hold for every function below unless its comment says
 * otherwise:
 *
 *  - Return value: a plait_result_t. PLAIT_SUCCESS (0) means success; any other
 *    value is an error, and plait_last_error() on the same thread then returns a
 *    message that says what was wrong (which argument, which variable, which
 *    rank). On error no output parameter is written.
 *  - Output parameters are pointers owned by the caller. A NULL output pointer
 *    is an error (PLAIT_ERR_INVALID_ARGUMENT), never a crash.
 *  - Thread safety: every function may be called from any thread. plait_init()
 *    and plait_shutdown() must not race with each other.
 *  - fork(): plait belongs to the process that called plait_init. In a child
 *    forked after it, every call fails at once with PLAIT_ERR_NOT_INITIALIZED
 *    (the message names the fork; plait_init there: PLAIT_ERR_UNSUPPORTED),
 *    plait_is_initialized reports 0, and plait_shutdown (e.g. from an atexit
 *    handler) touches none of the parent's connections.
 *  - Nothing in the library calls exit() or abort() on bad input.
 *  - Structs that cross the ABI (plait_tensor_t, plait_op_options_t,
 *    plait_stats_t) begin with struct_size and only ever grow: fields are
 *    appended, never moved, removed or retyped. See "Size-prefixed structs"
 *    below for what the library accepts.
 */
#ifndef PLAIT_PLAIT_H
#define PLAIT_PLAIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define PLAIT_API
#elif defined(__GNUC__) && __GNUC__ >= 4
#define PLAIT_API __attribute__((visibility("default")))
#else
#define PLAIT_API
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

#define PLAIT_VERSION_MAJOR 0
#define PLAIT_VERSION_MINOR 1
#define PLAIT_VERSION_PATCH 0
#define PLAIT_VERSION_STRING "0.1.0"
/* One number that orders versions: major * 10000 + minor * 100 + patch. */
#define PLAIT_VERSION \
  (PLAIT_VERSION_MAJOR * 10000 + PLAIT_VERSION_MINOR * 100 + PLAIT_VERSION_PATCH)

/*
 * ABI version of this header. Bumped whenever a declaration changes in a way
 * that breaks a binary built against an older header. Bindings compare it with
 * plait_abi_version() when they load the library.
 */
#define PLAIT_ABI_VERSION 1

/* PLAIT_VERSION of the loaded library. Never fails; any thread; no lock. */
PLAIT_API unsigned plait_version(void);
/* "major.minor.patch" of the loaded library; static storage, never NULL. */
PLAIT_API const char *plait_version_string(void);
/* PLAIT_ABI_VERSION the loaded library was built with. Never fails. */
PLAIT_API unsigned plait_abi_version(void);

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The one list of result codes: X(name, value, message). Codes are only ever
 * appended; a value never changes meaning.
 */
#define PLAIT_RESULT_LIST(X)                                                   \
  X(PLAIT_SUCCESS, 0, "success")                                               \
  X(PLAIT_ERR_INVALID_ARGUMENT, 1, "invalid argument")                         \
  X(PLAIT_ERR_NOT_INITIALIZED, 2, "plait is not initialized")                  \
  X(PLAIT_ERR_ALREADY_INITIALIZED, 3, "plait is already initialized")          \
  X(PLAIT_ERR_CONFIG, 4, "invalid configuration")                              \
  X(PLAIT_ERR_NO_MEMORY, 5, "out of memory")                                   \
  X(PLAIT_ERR_SYSTEM, 6, "system call failed")                                 \
  X(PLAIT_ERR_TIMEOUT, 7, "timed out")                                         \
  X(PLAIT_ERR_PEER_LOST, 8, "a peer rank was lost")                            \
  X(PLAIT_ERR_AUTH, 9, "authentication failed")                                \
  X(PLAIT_ERR_PROTOCOL, 10, "protocol error")                                  \
  X(PLAIT_ERR_PLUGIN, 11, "transport plugin could not be loaded")              \
  X(PLAIT_ERR_TRANSPORT, 12, "transport operation failed")                     \
  X(PLAIT_ERR_UNSUPPORTED, 13, "operation not supported")                      \
  X(PLAIT_ERR_BUFFER_TOO_SMALL, 14, "buffer too small")                        \
  X(PLAIT_ERR_INTERNAL, 15, "internal error")                                  \
  X(PLAIT_ERR_SHUTDOWN, 16, "plait was shut down")                            \
  X(PLAIT_ERR_MISMATCH, 17, "ranks submitted mismatched operations")           \
  X(PLAIT_ERR_STALLED, 18, "operation stalled: not submitted by every rank")

#define PLAIT_RESULT_ENUM_ENTRY_(name, value, message) name = value,
typedef enum plait_result {
  PLAIT_RESULT_LIST(PLAIT_RESULT_ENUM_ENTRY_)
  PLAIT_RESULT_COUNT_ /* not a result; one past the last code */
} plait_result_t;
#undef PLAIT_RESULT_ENUM_ENTRY_

/*
 * Short English text of a result code ("a peer rank was lost"). Static storage,
 * never NULL; an unknown code gives "unknown result code". Any thread.
 */
PLAIT_API const char *plait_strerror(plait_result_t result);

/*
 * Name of a result code ("PLAIT_ERR_PEER_LOST"). Static storage, never NULL;
 * an unknown code gives "PLAIT_RESULT_UNKNOWN". Any thread.
 */
PLAIT_API const char *plait_result_name(plait_result_t result);

/*
 * Details of the last failure of a plait call on the calling thread, e.g.
 * "PLAIT_FUSION_THRESHOLD='64Q': expected a size such as 65536, 64K, 64M or
 * 1G". Thread-local storage owned by the library, valid until the next plait
 * call on this thread; never NULL ("" when no call has failed). Successful
 * calls leave it unchanged.
 */
PLAIT_API const char *plait_last_error(void);

/* ------------------------------------------------------------------------ */
/* Data types and reduction operations                                       */
/* ------------------------------------------------------------------------ */

#define PLAIT_DTYPE_LIST(X)                                                    \
  X(PLAIT_UINT8, 0, "uint8", 1)                                                \
  X(PLAIT_INT8, 1, "int8", 1)                                                  \
  X(PLAIT_UINT16, 2, "uint16", 2)                                              \
  X(PLAIT_INT16, 3, "int16", 2)                                                \
  X(PLAIT_INT32, 4, "int32", 4)                                                \
  X(PLAIT_INT64, 5, "int64", 8)                                                \
  X(PLAIT_FLOAT16, 6, "float16", 2)                                            \
  X(PLAIT_BFLOAT16, 7, "bfloat16", 2)                                          \
  X(PLAIT_FLOAT32, 8, "float32", 4)                                            \
  X(PLAIT_FLOAT64, 9, "float64", 8)                                            \
  X(PLAIT_BOOL, 10, "bool", 1)

#define PLAIT_DTYPE_ENUM_ENTRY_(name, value, text, bytes) name = value,
typedef enum plait_dtype {
  PLAIT_DTYPE_LIST(PLAIT_DTYPE_ENUM_ENTRY_)
  PLAIT_DTYPE_COUNT_ /* not a dtype */
} plait_dtype_t;
#undef PLAIT_DTYPE_ENUM_ENTRY_

/*
 * Reductions. SUM, MIN, MAX, PRODUCT are exact on integers (wrapping on
 * overflow, as in C on unsigned types). AVERAGE is SUM scaled, as Horovod
 * 0.28 does it, by postscale_factor / (number of ranks) computed in double
 * (see plait_op_options_t for how a factor scales each dtype): integers
 * truncate toward zero. On bool, SUM and MAX are logical OR, MIN and PRODUCT logical
 * AND, and AVERAGE is not allowed. float16 and bfloat16 are reduced in float32
 * and rounded back to nearest-even at each step.
 */
#define PLAIT_OP_LIST(X)                                                       \
  X(PLAIT_OP_SUM, 0, "sum")                                                    \
  X(PLAIT_OP_AVERAGE, 1, "average")                                            \
  X(PLAIT_OP_MIN, 2, "min")                                                    \
  X(PLAIT_OP_MAX, 3, "max")                                                    \
  X(PLAIT_OP_PRODUCT, 4, "product")

#define PLAIT_OP_ENUM_ENTRY_(name, value, text) name = value,
typedef enum plait_op {
  PLAIT_OP_LIST(PLAIT_OP_ENUM_ENTRY_)
  PLAIT_OP_COUNT_ /* not an op */
} plait_op_t;
#undef PLAIT_OP_ENUM_ENTRY_

/* "float32", "sum"; NULL for a value outside the enum. Any thread. */
PLAIT_API const char *plait_dtype_name(plait_dtype_t dtype);
PLAIT_API const char *plait_op_name(plait_op_t op);
/* Bytes per element of dtype; 0 for a value outside the enum. */
PLAIT_API size_t plait_dtype_size(plait_dtype_t dtype);

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Join the job.
 *
 * Reads the configuration (PLAIT_* variables, see docs/configuration.md) and
 * the rank layout from the environment (plaitrun, Open MPI, PMI, Slurm or
 * torchrun conventions; none of them means a job of one rank), connects to
 * rank 0 over the authenticated control plane, and loads and starts the
 * transport plugin named by PLAIT_TRANSPORT (unset: "auto", the fastest one
 * every rank can start, chosen alike on every rank). A rank that cannot start
 * it makes the call fail on every rank, naming that rank. A worker started by
 * plaitrun's elastic driver (PLAIT_ELASTIC_DRIVER set) asks the driver for
 * its rank layout instead (plait/elastic.h); then also PLAIT_ERR_SHUTDOWN:
 * the driver has no place for it.
 *
 * Blocks until every rank has joined, or fails after PLAIT_START_TIMEOUT_S
 * (PLAIT_ERR_TIMEOUT naming the ranks that did not arrive). A rank lost while
 * joining fails the call with PLAIT_ERR_PEER_LOST naming it.
 * Errors: PLAIT_ERR_ALREADY_INITIALIZED, PLAIT_ERR_CONFIG (names the variable,
 * its value and what it accepts), PLAIT_ERR_AUTH, PLAIT_ERR_PLUGIN (names the
 * paths tried and the loader's text), PLAIT_ERR_TIMEOUT, PLAIT_ERR_PEER_LOST,
 * PLAIT_ERR_SYSTEM. After a failure nothing is left allocated and plait_init
 * may be called again. After plait_shutdown, plait_init starts a new session.
 */
PLAIT_API plait_result_t plait_init(void);

/*
 * Leave the job: waits (up to PLAIT_TIMEOUT_S) for the other ranks to reach
 * shutdown too, stops the transport and closes the control plane. Everything
 * is released even when it returns an error (PLAIT_ERR_PEER_LOST when a peer
 * vanished first). Calling it when plait is not initialized returns
 * PLAIT_ERR_NOT_INITIALIZED and does nothing else.
 */
PLAIT_API plait_result_t plait_shutdown(void);

/* *initialized = 1 between a successful plait_init and plait_shutdown, else 0.
 * Never blocks. */
PLAIT_API plait_result_t plait_is_initialized(int *initialized);

/* ------------------------------------------------------------------------ */
/* Queries: never block; PLAIT_ERR_NOT_INITIALIZED before init or after      */
/* shutdown.                                                                 */
/* ------------------------------------------------------------------------ */

/* This process's rank in [0, size). */
PLAIT_API plait_result_t plait_rank(int *rank);
/* Number of ranks in the job. */
PLAIT_API plait_result_t plait_size(int *size);
/* Rank among the processes on this host, and their number. */
PLAIT_API plait_result_t plait_local_rank(int *local_rank);
PLAIT_API plait_result_t plait_local_size(int *local_size);
/* Index of this host among the hosts that run a process with this
 * local_rank, and the number of such hosts (Horovod's meaning). */
PLAIT_API plait_result_t plait_cross_rank(int *cross_rank);
PLAIT_API plait_result_t plait_cross_size(int *cross_size);

/* Name of the transport in use ("gloo", "ofi"; under PLAIT_TRANSPORT=auto the
 * one chosen). *name points to static storage in
 * the library that stays valid until the next plait_init. */
PLAIT_API plait_result_t plait_transport_name(const char **name);

/*
 * The algorithm the transport in use runs for a collective of `bytes` bytes
 * in all (the whole buffer, as plait-bench counts it): collective is
 * "allreduce", "allgather", "broadcast", "alltoall", "reducescatter" or
 * "barrier". *name is e.g. "ring" or "recursive doubling", or "" when the
 * transport does not say; static storage valid until the next plait_init.
 * Never blocks; any thread. PLAIT_ERR_INVALID_ARGUMENT for an unknown
 * collective (the message lists the known ones).
 */
PLAIT_API plait_result_t plait_transport_algorithm(const char *collective, uint64_t bytes,
                                                   const char **name);

/*
 * What plait_init would find for the transport plugin `name` ("gloo", "ofi",
 * "nccl"): the query the language bindings use instead of loading plugins
 * themselves. It searches as plait_init does (the folders of
 * PLAIT_PLUGIN_PATH, then the folder of libplait.so), loads
 * libplait-transport-<name>.so, checks its table as plait_init does, reads
 * it and unloads it again; the plugin's init is never called.
 *
 * info->struct_size must be set by the caller (sizeof(plait_transport_info_t));
 * the library writes only the fields that fit in it. On PLAIT_SUCCESS,
 * info->found is 1 when the plugin is found and passes plait_init's checks
 * (then the memory flags, caps, library_version and path are set), 0 when it is missing or
 * broken (the other fields are then 0 or ""; plait_last_error says why).
 * version_symbol (may be NULL) names a function `int fn(int *version)` that
 * returns 0 on success (as ncclGetVersion does), looked up in the plugin and
 * the libraries it links: library_version receives what it writes, 0 when
 * it is absent or fails.
 *
 * Works before plait_init and after plait_shutdown; does not wait for other
 * ranks (it loads a shared object: milliseconds); any thread. Errors:
 * PLAIT_ERR_INVALID_ARGUMENT when name or info is NULL or info->struct_size
 * is below PLAIT_TRANSPORT_INFO_SIZE_V1.
 */
typedef struct plait_transport_info {
  size_t struct_size;   /* set by the caller: sizeof(plait_transport_info_t) */
  int found;            /* 1: found and passes plait_init's checks; 0: not */
  int host_memory;      /* 1: it handles host memory (PLAIT_CAP_HOST_MEMORY) */
  int device_memory;    /* 1: it handles device (CUDA) memory (PLAIT_CAP_DEVICE_MEMORY) */
  int library_version;  /* what version_symbol wrote (e.g. 21803), else 0 */
  uint64_t caps;        /* the plugin's PLAIT_CAP_* bits (plait/transport.h) */
  char path[4096];      /* the file plait_init would load */
} plait_transport_info_t;

#define PLAIT_TRANSPORT_INFO_SIZE_V1 sizeof(plait_transport_info_t)

PLAIT_API plait_result_t plait_transport_query(const char *name, const char *version_symbol,
                                               plait_transport_info_t *info);

/*
 * The names of the transport plugins installed where plait_init looks for
 * them (the <name> of every libplait-transport-<name>.so in the folders of
 * PLAIT_PLUGIN_PATH and the folder of libplait.so), sorted, without
 * repeats, one per line, into buf (always NUL-terminated when buf_size > 0).
 * A file is listed whether or not it loads: ask plait_transport_query.
 * *needed (may be NULL) receives the bytes needed including the NUL;
 * PLAIT_ERR_BUFFER_TOO_SMALL when buf_size is less (buf may then be NULL
 * with buf_size 0). Works before plait_init; never blocks; any thread.
 */
PLAIT_API plait_result_t plait_transport_list(char *buf, size_t buf_size, size_t *needed);

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */
/* ------------------------------------------------------------------------ */

/*
 * Writes the effective configuration as text, one "NAME=value" line per
 * variable, into buf (always NUL-terminated when buf_size > 0). After
 * plait_init these are the values in use; before it, the environment is parsed
 * now (a bad value is PLAIT_ERR_CONFIG). *needed (may be NULL) receives the
 * bytes needed including the NUL; if buf_size is smaller, the text is cut and
 * PLAIT_ERR_BUFFER_TOO_SMALL is returned. buf may be NULL when buf_size is 0.
 */
PLAIT_API plait_result_t plait_config_dump(char *buf, size_t buf_size,
                                           size_t *needed);

/*
 * Changes a setting while plait runs, on this rank, without restarting:
 * PLAIT_FUSION_THRESHOLD, PLAIT_FUSION_MAX_TENSOR, PLAIT_CYCLE_TIME_MS,
 * PLAIT_LOG_LEVEL or PLAIT_TIMELINE_MARK_CYCLES, with a
 * value written as in the environment ("4M", "2.5", "debug"), parsed as
 * strictly. The coordinator takes the new values up at the start of its next
 * cycle: operations negotiated from then on use them. The fusion threshold
 * and max tensor size are used where fusion is planned, on rank 0: rank 0's
 * values decide which allreduces share one collective (a fused collective
 * carries at most the threshold in bytes, each tensor counted rounded up to
 * 64 bytes). They do not size any buffer: every rank's fusion buffer grows to
 * the largest fused collective it has run and is reused. On the other ranks
 * the threshold only enters plait_stats' fusion_capacity, so set it on every
 * rank to the same value to keep the statistics comparable.
 * plait_config_dump shows the new value.
 * Errors: PLAIT_ERR_NOT_INITIALIZED (before plait_init, set the environment
 * variable instead), PLAIT_ERR_CONFIG (a bad value, or not a plait
 * variable), PLAIT_ERR_UNSUPPORTED (a variable that cannot change while
 * running), PLAIT_ERR_INVALID_ARGUMENT (NULL). Any thread.
 */
PLAIT_API plait_result_t plait_config_set(const char *name, const char *value);

/*
 * Like plait_config_dump, but describes every variable: name, type, default
 * and help text. Does not read the environment; works at any time.
 */
PLAIT_API plait_result_t plait_config_help(char *buf, size_t buf_size,
                                           size_t *needed);


/* ------------------------------------------------------------------------ */
/* Tensors and operations                                                    */
/* ------------------------------------------------------------------------ */

#define PLAIT_MAX_DIMS 16
#define PLAIT_DEVICE_HOST (-1)
/* Longest tensor name, bytes, without the NUL. */
#define PLAIT_MAX_NAME 1024

/*
 * Size-prefixed structs. Each struct below begins with struct_size, which
 * the caller sets to sizeof(the struct) as its header knows it (the *_INIT
 * macros and plait_tensor_1d do it). Fields are only ever appended, so that a
 * program and a library built from different versions of this header work
 * together:
 *
 *  - Structs the library reads (plait_tensor_t, plait_op_options_t): any
 *    struct_size from the struct's first published layout (PLAIT_*_SIZE_V1)
 *    up is accepted. Fields the caller's struct is too small to hold take
 *    their defaults (those of PLAIT_OP_OPTIONS_INIT; for plait_tensor_t the
 *    ones the appended field's comment names). A struct_size below the first
 *    layout is PLAIT_ERR_INVALID_ARGUMENT, naming the struct, the size given
 *    and the minimum.
 *  - A struct_size larger than this library knows (a program built against a
 *    newer header) is accepted only if every byte the library does not know
 *    is zero, i.e. the newer fields are left at their zero defaults (as
 *    Linux's clone3/openat2 do). Otherwise the call fails with
 *    PLAIT_ERR_UNSUPPORTED naming the first non-zero byte: the program asks
 *    for something this library cannot do, and silently ignoring it could
 *    e.g. run an operation on the wrong ranks. Initialize such structs with
 *    their *_INIT macro or memset them to 0 before setting fields. A
 *    struct_size over 4096 is refused as unset.
 *  - Arrays of structs (the inputs and outputs of a grouped allreduce) are
 *    laid out with a stride of the first element's struct_size; every
 *    element must have the same struct_size.
 *  - Structs the library writes (plait_stats_t; plait_tensor_t from
 *    plait_tensor_1d and plait_handle_output, see there): the library writes
 *    only the fields that fit in the caller's struct_size and leaves bytes it
 *    does not know unchanged.
 */

/*
 * A tensor as the caller describes it. No pointers besides data, so it maps
 * directly onto a ctypes Structure. Element count = product of shape[0..ndim)
 * (1 for ndim 0). Memory is row-major and contiguous.
 */
typedef struct plait_tensor {
  size_t struct_size;            /* sizeof(plait_tensor_t) */
  void *data;                    /* may be NULL only when the count is 0 */
  plait_dtype_t dtype;
  int32_t device;                /* PLAIT_DEVICE_HOST or a device index */
  int32_t ndim;                  /* 0 .. PLAIT_MAX_DIMS */
  int64_t shape[PLAIT_MAX_DIMS]; /* each >= 0 */
  /* Fields appended later go here, each with its default for a struct whose
   * struct_size ends before it. */
} plait_tensor_t;

/* Bytes of plait_tensor_t's first published layout (through shape). */
#define PLAIT_TENSOR_SIZE_V1                                                   \
  (offsetof(plait_tensor_t, shape) + sizeof(int64_t) * PLAIT_MAX_DIMS)

/* Fills t for a host tensor of shape [count] (a helper for C callers).
 * Writes the first layout only (PLAIT_TENSOR_SIZE_V1 bytes, struct_size set
 * to that), so it is safe on a struct from any version of this header;
 * fields appended later keep their defaults unless the caller sets them and
 * struct_size = sizeof(plait_tensor_t) afterwards. */
PLAIT_API plait_result_t plait_tensor_1d(plait_tensor_t *t, void *data, size_t count,
                                         plait_dtype_t dtype);

/* An operation in flight. Opaque; made by the *_async calls, freed by
 * plait_release. */
typedef struct plait_handle plait_handle_t;

/*
 * Completion callback, an alternative to polling. Called exactly once, on the
 * coordinator thread, when the operation finishes (result is what plait_wait
 * would return). It must not block; plait_wait there on an unfinished handle
 * fails with PLAIT_ERR_INVALID_ARGUMENT instead of waiting forever. It may
 * call plait_poll, plait_handle_* getters and plait_release (on its own
 * handle too). If an *_async call returns an error, its callback is never
 * called.
 */
typedef void (*plait_callback_fn)(plait_handle_t *handle, plait_result_t result,
                                  void *user_data);

/* Options common to every operation; pass NULL for the defaults. A scale
 * factor of exactly 1 is skipped; otherwise each element is scaled as
 * Horovod 0.28 does on the CPU: integers multiplied in double and truncated
 * toward zero (saturating at the type's limits), float32, float16 and
 * bfloat16 multiplied in float by the factor rounded to float (16-bit types
 * rounded back to nearest even), float64 in double. */
typedef struct plait_op_options {
  size_t struct_size;      /* sizeof(plait_op_options_t) */
  double prescale_factor;  /* allreduce, reducescatter: input x factor before */
  double postscale_factor; /* allreduce, reducescatter: output x factor after */
  plait_callback_fn callback;
  void *user_data;
  /* Appended after the first layout (PLAIT_OP_OPTIONS_SIZE_V1): a caller
   * whose struct_size does not reach it gets 0. */
  int32_t process_set; /* the process set that runs the operation: an id from
                          plait_process_set_add, or PLAIT_GLOBAL_PROCESS_SET */
  /* Appended after process_set: a caller whose struct_size does not reach it
   * gets NULL. For tensors in device memory, the device stream (CUDA: a
   * cudaStream_t) on which the input is ready: plait's work on it waits for
   * everything enqueued on that stream before the call, without blocking
   * the host or the device. NULL: the legacy default stream (PyTorch's
   * default stream, plain CUDA calls on stream 0). Ignored for host tensors.
   * The stream must live until the handle completes. */
  void *stream;
  /* Fields appended later go here, each with its default added at the end
   * of PLAIT_OP_OPTIONS_INIT (the library defaults them from it). */
} plait_op_options_t;

/* The process set of every rank; always there, never removed. */
#define PLAIT_GLOBAL_PROCESS_SET 0

/* The defaults; what a NULL opts means. */
#define PLAIT_OP_OPTIONS_INIT {sizeof(plait_op_options_t), 1.0, 1.0, NULL, NULL, 0, NULL}
/* Bytes of plait_op_options_t's first published layout (through user_data). */
#define PLAIT_OP_OPTIONS_SIZE_V1 (offsetof(plait_op_options_t, user_data) + sizeof(void *))

/*
 * The operations. Every one:
 *  - returns at once (non-blocking) with *handle set, or an error and no
 *    handle (then nothing was queued and no callback will come);
 *  - may be called from any thread, concurrently;
 *  - is matched across ranks by name: every rank must submit the same name
 *    with matching arguments, in any order. A mismatch (shape, dtype, op,
 *    root, scale factors, device, group) fails that operation on every rank
 *    with a message naming the tensor, each value and the ranks that sent it;
 *  - reads the input and writes the output on the coordinator thread (with
 *    PLAIT_CALLER_RUNS on, by default over ofi, a lone cached host-memory
 *    allreduce without a callback may instead be run by the thread that
 *    waits on its handle,
 *    inside plait_wait or plait_wait_release, before they return): the
 *    caller keeps both valid and does not touch the output until the handle
 *    completes;
 *  - fails with PLAIT_ERR_INVALID_ARGUMENT for a NULL or empty name, a name
 *    over PLAIT_MAX_NAME, a name already in flight on this rank, bad tensor
 *    fields, or a bad enum; PLAIT_ERR_NOT_INITIALIZED before init or after
 *    shutdown; PLAIT_ERR_PEER_LOST (naming the rank) once the job has failed.
 *  - runs on the ranks of opts->process_set (default: every rank). "Every
 *    rank" above and below then means every member of that set, "size" its
 *    number of members and alltoall/reducescatter/allgather blocks go in the
 *    order of its members; roots stay ranks of the job (as in Horovod). An
 *    operation on a set this rank is not a member of, or on an unknown id,
 *    fails at once with PLAIT_ERR_INVALID_ARGUMENT naming the set and its
 *    ranks. Names are matched within a set: two sets may run the same name
 *    at once, but one rank may not have one name in flight twice.
 */

/* Reduces input over all ranks into output (output may be input: in place).
 * Both have the same dtype, device and element count. AVERAGE on bool is an
 * error. With opts: prescale, postscale factors. */
PLAIT_API plait_result_t plait_allreduce_async(const char *name, const plait_tensor_t *input,
                                               const plait_tensor_t *output, plait_op_t op,
                                               const plait_op_options_t *opts,
                                               plait_handle_t **handle);

/* count allreduces negotiated and executed as one unit: none starts until all
 * are submitted on every rank; one handle for the group; they succeed or fail
 * together. names, inputs and outputs have count entries; the members may be
 * listed in any order (a group is known by its set of names). */
PLAIT_API plait_result_t plait_grouped_allreduce_async(size_t count, const char *const *names,
                                                       const plait_tensor_t *inputs,
                                                       const plait_tensor_t *outputs,
                                                       plait_op_t op,
                                                       const plait_op_options_t *opts,
                                                       plait_handle_t **handle);

/* Concatenates every rank's input along the first dimension, which may
 * differ between ranks (the other dimensions must match). The output is
 * allocated by plait: read it with plait_handle_output after completion. */
PLAIT_API plait_result_t plait_allgather_async(const char *name, const plait_tensor_t *input,
                                               const plait_op_options_t *opts,
                                               plait_handle_t **handle);

/* Replaces tensor on every rank with root's (in place). */
PLAIT_API plait_result_t plait_broadcast_async(const char *name, const plait_tensor_t *tensor,
                                               int root, const plait_op_options_t *opts,
                                               plait_handle_t **handle);

/* Sends splits[r] rows (first-dimension slices) of input to rank r, in rank
 * order; splits may be NULL for equal splits (the first dimension must then
 * divide by the size). The received rows, concatenated in rank order, are the
 * output (plait_handle_output); how many came from each rank:
 * plait_handle_splits. */
PLAIT_API plait_result_t plait_alltoall_async(const char *name, const plait_tensor_t *input,
                                              const int64_t *splits,
                                              const plait_op_options_t *opts,
                                              plait_handle_t **handle);

/* Reduces input over all ranks and gives rank r its block of first-dimension
 * rows: rows are divided as evenly as possible, the first (rows % size) ranks
 * getting one more. Output via plait_handle_output. */
PLAIT_API plait_result_t plait_reducescatter_async(const char *name, const plait_tensor_t *input,
                                                   plait_op_t op, const plait_op_options_t *opts,
                                                   plait_handle_t **handle);

/* Completes when every rank has reached it. */
PLAIT_API plait_result_t plait_barrier_async(const plait_op_options_t *opts,
                                             plait_handle_t **handle);

/* This rank has no more data (global process set only, as Horovod's join;
 * opts->process_set must be 0): until every rank has joined, it takes part in
 * the other ranks' allreduces (contributing the op's identity: 0 for sum and
 * average, 1 for product, the largest value for min, the smallest for max)
 * and allgathers (contributing no rows). Other operations submitted by the
 * other ranks meanwhile fail naming the joined rank. Completes when all ranks
 * have joined; plait_handle_join_rank then gives the last rank to join. */
PLAIT_API plait_result_t plait_join_async(const plait_op_options_t *opts,
                                          plait_handle_t **handle);

/* *done = 1 when the operation has finished (successfully or not). Never
 * blocks. */
PLAIT_API plait_result_t plait_poll(plait_handle_t *handle, int *done);

/*
 * Waits until the operation finishes or timeout_s passes (timeout_s < 0:
 * no limit; 0: just look). Returns the operation's result (its message in
 * plait_last_error), or PLAIT_ERR_TIMEOUT when it is still running (the
 * handle stays valid). Only the calling thread blocks; no lock of plait's is
 * held meanwhile. Not from a callback. With PLAIT_CALLER_RUNS on, a wait
 * may run its operation itself (plait_allreduce_async above). Where the
 * transport has a vote (ofi; the default turns it on only there) the wait
 * leaves the ranks' agreement when timeout_s ends and returns
 * PLAIT_ERR_TIMEOUT, the coordinator going on with it, so a stopped peer
 * holds it no longer than asked. A round of one tensor of up to 64 KiB
 * carries the vote in its allreduce there (vote_allreduce), which the wait
 * leaves the same way; for a larger one, once every rank agreed, the round's
 * one collective runs to its end, which a peer that stops just then can hold
 * up to PLAIT_TIMEOUT_S. Without a vote (PLAIT_CALLER_RUNS=1 over Gloo) a
 * stalled peer holds such a wait up to PLAIT_TIMEOUT_S, and a signal handler
 * of the caller's (Python's Ctrl-C) runs only then.
 */
PLAIT_API plait_result_t plait_wait(plait_handle_t *handle, double timeout_s);

/* Frees a handle. NULL is harmless. A handle released before it finishes
 * completes in the background (the caller must still keep its buffers valid
 * until then) and its callback, if any, is still called. */
PLAIT_API plait_result_t plait_release(plait_handle_t *handle);

/*
 * plait_wait, then plait_release when the operation has finished: one call
 * where a caller would make both (a binding's synchronize; each foreign call
 * costs a Python binding about 1 us). Returns what plait_wait returns (the
 * operation's result, its message in plait_last_error; PLAIT_ERR_TIMEOUT
 * while it runs). *released = 1 when the handle was released (the operation
 * finished, successfully or not: an operation may itself fail with
 * PLAIT_ERR_TIMEOUT, so the result alone cannot say), 0 when it is still
 * running and the handle stays valid. A handle whose output is still to be
 * read (plait_handle_output, _splits, _join_rank) is for plait_wait instead.
 * Blocks as plait_wait does (timeout_s 0: never). Not from a callback on an
 * unfinished handle. released NULL: PLAIT_ERR_INVALID_ARGUMENT, nothing done.
 */
PLAIT_API plait_result_t plait_wait_release(plait_handle_t *handle, double timeout_s,
                                            int *released);

/* After completion: the output of an allgather, alltoall or reducescatter (or
 * the output tensor given to allreduce/broadcast). out->data points into
 * memory owned by the handle, valid until plait_release. For a device input
 * that memory is the transport's (on the input's device, out->device) and
 * plait_release frees it through the transport; a handle released after
 * plait_shutdown leaves it allocated (the transport is gone). PLAIT_ERR_INVALID_ARGUMENT
 * before completion. Writes the first layout of plait_tensor_t only
 * (PLAIT_TENSOR_SIZE_V1 bytes, out->struct_size set to that), so out may be a
 * struct from any version of this header. */
PLAIT_API plait_result_t plait_handle_output(plait_handle_t *handle, plait_tensor_t *out);

/* After an alltoall: rows received from each rank; splits has room for size
 * entries. */
PLAIT_API plait_result_t plait_handle_splits(plait_handle_t *handle, int64_t *splits,
                                             size_t capacity);

/* After a join: the last rank to join. */
PLAIT_API plait_result_t plait_handle_join_rank(plait_handle_t *handle, int *rank);

/* ------------------------------------------------------------------------ */
/* Process sets                                                              */
/* ------------------------------------------------------------------------ */

/*
 * A process set is a subset of the ranks that runs operations on its own
 * (plait_op_options_t.process_set), with Horovod 0.28's semantics: the
 * global set (PLAIT_GLOBAL_PROCESS_SET, id 0) always exists; other sets are
 * known at init (PLAIT_PROCESS_SETS, e.g. "0,1;1,2,3": plait_init adds them
 * in that order, ids 1, 2, ...) or, with PLAIT_DYNAMIC_PROCESS_SETS=1 (or
 * HOROVOD_DYNAMIC_PROCESS_SETS=1), added and removed while plait runs. Sets
 * may overlap; the transport must offer sub-communicators (gloo and ofi do).
 * See docs/process-sets.md.
 */

/*
 * Adds the set of the n ranks in ranks[] (any order, each once, 1 <= n <=
 * size) and writes its id to *id: the lowest id not in use (freed ids are
 * used again, as in Horovod), the same on every rank.
 *
 * Collective: every rank of the job, member of the new set or not, calls it
 * with the same ranks, in the same order relative to its other
 * plait_process_set_add/remove calls. Blocks until every rank has called it
 * and the transport has made the set's communicator; not from a completion
 * callback. ranks is read before it returns and not kept.
 * Errors: PLAIT_ERR_UNSUPPORTED without PLAIT_DYNAMIC_PROCESS_SETS=1, or
 * when the transport has no sub-communicators (naming it);
 * PLAIT_ERR_INVALID_ARGUMENT for NULL pointers, n out of range, a rank
 * outside the job or listed twice, a set of the same ranks that exists
 * already (the global set too, as in Horovod); PLAIT_ERR_MISMATCH when ranks called it
 * with different sets (the message names the ranks and each one's set);
 * PLAIT_ERR_NOT_INITIALIZED; PLAIT_ERR_PEER_LOST once the job has failed.
 * Any thread.
 */
PLAIT_API plait_result_t plait_process_set_add(const int *ranks, int n, int32_t *id);

/*
 * Removes set id; its id may be given to a later set. Collective like
 * plait_process_set_add (every rank, same order), and blocks likewise.
 * Errors: PLAIT_ERR_UNSUPPORTED without PLAIT_DYNAMIC_PROCESS_SETS=1;
 * PLAIT_ERR_INVALID_ARGUMENT for id 0 (the global set is never removed) or
 * an id not in use; PLAIT_ERR_MISMATCH when ranks named different ids;
 * PLAIT_ERR_INVALID_ARGUMENT when an operation on the set is still pending
 * on some rank (the message names it; the set stays). Any thread.
 */
PLAIT_API plait_result_t plait_process_set_remove(int32_t id);

/*
 * Queries; never block, any thread. PLAIT_ERR_INVALID_ARGUMENT naming the id
 * when it is not in use; PLAIT_ERR_NOT_INITIALIZED before init.
 *  - plait_process_set_size: number of ranks in set id.
 *  - plait_process_set_rank: this rank's position in set id (its members in
 *    increasing order), or -1 when this rank is not a member (Horovod's
 *    ProcessSet.rank() raises then; plait.torch does too).
 *  - plait_process_set_ranks: the members' ranks, increasing: up to capacity
 *    of them into ranks (NULL allowed with capacity 0); *n gets the number
 *    of members; PLAIT_ERR_BUFFER_TOO_SMALL (nothing written past capacity)
 *    when capacity < *n.
 *  - plait_process_set_ids: the ids in use, increasing (0 first), like
 *    plait_process_set_ranks.
 */
PLAIT_API plait_result_t plait_process_set_size(int32_t id, int *size);
PLAIT_API plait_result_t plait_process_set_rank(int32_t id, int *rank);
PLAIT_API plait_result_t plait_process_set_ranks(int32_t id, int *ranks, int capacity, int *n);
PLAIT_API plait_result_t plait_process_set_ids(int32_t *ids, int capacity, int *n);

/* ------------------------------------------------------------------------ */
/* Measuring: statistics and timeline                                        */
/* ------------------------------------------------------------------------ */

/* Counters since init or the last plait_stats_reset, for this rank. */
typedef struct plait_stats {
  size_t struct_size;        /* set by the caller: sizeof(plait_stats_t) */
  uint64_t cycles;           /* coordinator cycles */
  uint64_t busy_cycles;      /* cycles that sent, received or ran anything */
  uint64_t cache_hits;       /* tensors negotiated by cache bit */
  uint64_t cache_misses;     /* tensors negotiated by full request */
  uint64_t responses;        /* collectives executed (a fused buffer is one) */
  uint64_t tensors;          /* tensors completed (successfully or not) */
  uint64_t bytes;            /* bytes of tensor data in executed collectives */
  uint64_t fused_responses;  /* responses that carried more than one tensor */
  uint64_t fused_tensors;    /* tensors that travelled in fused responses */
  uint64_t fusion_bytes;     /* bytes that travelled through the fusion buffer */
  uint64_t fusion_capacity;  /* sum over fused responses of this rank's
                                PLAIT_FUSION_THRESHOLD (or the response's bytes
                                if larger): fill = fusion_bytes / capacity */
  uint64_t control_messages; /* control-plane messages this rank sent */
  uint64_t control_bytes;    /* control-plane bytes this rank sent */
  double negotiate_s;        /* time in negotiation (this rank's view) */
  double copy_in_s;          /* copies into the fusion buffer (with prescale) */
  double transport_s;        /* time in the transport's collectives */
  double copy_out_s;         /* copies out of the fusion buffer (with postscale) */
  /* Appended with autotuning (docs/configuration.md, "Autotuning"): the
   * settings the last response list ran with on this rank (autotuned ones
   * with PLAIT_AUTOTUNE; 0 before the first list), the tuner's state (0 off,
   * 1 exploring, 2 settled: the same on every rank), the samples rank 0 has
   * measured (0 on other ranks), and a digest of the settings of every list
   * run since init or the last plait_stats_reset: ranks that ran the same
   * lists with the same settings have the same digest. */
  uint64_t fusion_threshold_now;
  uint64_t fusion_max_tensor_now;
  double cycle_time_ms_now;
  uint64_t autotune_state;
  uint64_t autotune_samples;
  uint64_t settings_digest;
  /* The coordinator thread's CPU time (CLOCK_THREAD_CPUTIME_ID) over the
   * same intervals as negotiate_s: negotiate_s is wall time and includes
   * waiting for a CPU; this is the negotiation's own work. */
  double negotiate_cpu_s;
  /* Counters appended later go here. */
} plait_stats_t;

/* Bytes of plait_stats_t's first published layout (through copy_out_s). */
#define PLAIT_STATS_SIZE_V1 (offsetof(plait_stats_t, copy_out_s) + sizeof(double))

/* Copies the counters into *stats (stats->struct_size must be set, at least
 * to hold the first counter; a smaller struct from an older header gets the
 * fields it has room for, a larger one from a newer header keeps the bytes
 * this library does not know unchanged). */
PLAIT_API plait_result_t plait_stats(plait_stats_t *stats);
/* Zeroes the counters. */
PLAIT_API plait_result_t plait_stats_reset(void);

/* Starts writing a Chrome-trace JSON timeline to path (replacing
 * PLAIT_TIMELINE's), or stops it. The file is valid JSON after every event
 * written. Rank-local: each rank names its own file. */
PLAIT_API plait_result_t plait_timeline_start(const char *path);
PLAIT_API plait_result_t plait_timeline_stop(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PLAIT_PLAIT_H */
