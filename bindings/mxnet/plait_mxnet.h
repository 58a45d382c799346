/*
 * plait's MXNet engine adapter: runs plait operations on NDArrays as
 * asynchronous operations of MXNet's dependency engine.
 *
 * Used by plait.mxnet through ctypes (bindings/python/plait/mxnet/_engine.py);
 * not a public C API of plait. Built only when CMake finds an MXNet
 * (-DPLAIT_MXNET_PYTHON=<python with mxnet>), as libplait_mxnet.so beside
 * libplait.so.
 *
 * plait_mx_push() pushes one operation into MXNet's engine. The engine runs it
 * once every earlier write to its inputs (and every earlier read or write of
 * its outputs) is done; running it only submits to plait (plait_*_async) and
 * returns, so no engine thread ever waits for plait. plait's completion
 * callback (on plait's coordinator thread) tells the engine the operation is
 * done; then later work on the outputs runs, and wait_to_read()/asnumpy()
 * return. Inputs are read-dependencies until plait has finished with them, so
 * a write to an input pushed after the operation waits for it.
 *
 * Outputs whose size is known only after negotiation (allgather, alltoall,
 * reducescatter) are not NDArrays: plait allocates them, the operation has a
 * ticket, and the caller waits on the ticket (plait_mx_ticket_wait, blocks
 * only the calling thread) and copies the result out of the plait handle
 * (plait_mx_ticket_handle) into an NDArray of the right shape.
 */
#ifndef PLAIT_MXNET_H
#define PLAIT_MXNET_H

#include <stddef.h>
#include <stdint.h>

#include <plait/plait.h>

#ifdef __cplusplus
extern "C" {
#endif

enum plait_mx_kind {
  PLAIT_MX_ALLREDUCE = 0,      /* count tensors; count > 1: one grouped allreduce */
  PLAIT_MX_BROADCAST = 1,      /* in place: inputs == outputs */
  PLAIT_MX_ALLGATHER = 2,      /* ticket; plait allocates the output */
  PLAIT_MX_ALLTOALL = 3,       /* ticket; plait allocates the output */
  PLAIT_MX_REDUCESCATTER = 4,  /* ticket; plait allocates the output */
};

typedef struct plait_mx_request {
  size_t struct_size;         /* sizeof(plait_mx_request_t) */
  int kind;                   /* plait_mx_kind */
  int count;                  /* tensors; > 1 only for PLAIT_MX_ALLREDUCE */
  const char *const *names;   /* count names */
  void *const *inputs;        /* count NDArrayHandles */
  void *const *outputs;       /* count NDArrayHandles (may equal inputs: in place);
                                 NULL for the ticket kinds */
  const plait_tensor_t *tensors; /* count: dtype and shape of each input (data unused) */
  int op;                     /* plait_op_t (allreduce, reducescatter) */
  double prescale_factor;
  double postscale_factor;
  int root;                   /* broadcast */
  const int64_t *splits;      /* alltoall: nsplits entries, or NULL */
  int nsplits;
  int priority;               /* MXNet engine priority */
  /* Appended: a request whose struct_size does not reach it runs on the
   * global set (0). */
  int32_t process_set;        /* plait_op_options_t.process_set: the set's id */
} plait_mx_request_t;

/* Bytes of the first request layout (through priority). */
#define PLAIT_MX_REQUEST_SIZE_V1 (offsetof(plait_mx_request_t, priority) + sizeof(int))

typedef struct plait_mx_ticket plait_mx_ticket_t;

/* Pushes the operation. Returns 0, or -1 with plait_mx_last_error() saying
 * why (nothing was pushed). *ticket must be non-NULL for the ticket kinds and
 * NULL for the others (their failures reach the outputs: MXNet raises them
 * from wait_to_read() as "PLAIT_ERR_...: message"). Any thread. */
int plait_mx_push(const plait_mx_request_t *req, plait_mx_ticket_t **ticket);

/* Waits until plait has finished the ticket's operation (timeout_s < 0: no
 * limit). Returns its plait_result_t; PLAIT_ERR_TIMEOUT with *message NULL
 * when it is still running after timeout_s. message (may be NULL) receives
 * the failure text, valid until release. Blocks the calling thread only:
 * plait.mxnet waits in short slices, so Python's signal handlers run. */
int plait_mx_ticket_wait(plait_mx_ticket_t *ticket, double timeout_s, const char **message);

/* Waits (at most timeout_s; < 0: no limit) until MXNet has run the operation
 * and plait has accepted or refused it. Returns 0 while not yet, 1 once
 * accepted (it may have finished since), 2 when it was refused before plait
 * took it (plait_mx_ticket_wait gives the error), -1 for a NULL ticket. An
 * operation runs once every earlier write to its input is done. */
int plait_mx_ticket_submitted(plait_mx_ticket_t *ticket, double timeout_s);

/* The finished operation's plait handle (plait_handle_output, _splits), or
 * NULL when it failed before plait accepted it. Valid until release. */
plait_handle_t *plait_mx_ticket_handle(plait_mx_ticket_t *ticket);

/* Frees a finished ticket and its plait handle; an unfinished one is freed
 * when it finishes. NULL is harmless. */
void plait_mx_ticket_release(plait_mx_ticket_t *ticket);

/* Text of the last failure of plait_mx_push on this thread. */
const char *plait_mx_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* PLAIT_MXNET_H */
