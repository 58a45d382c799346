/* devsim's per-state work queue, the simulated device stream: one worker
 * thread per top-level state runs every item in FIFO order (its sub-states,
 * for process sets, share it, as NCCL communicators share a device's
 * stream); it alone calls the gloo plugin after init. */
#ifndef PLAIT_DEVSIM_QUEUE_H
#define PLAIT_DEVSIM_QUEUE_H

#include "internal.h"

typedef enum item_kind {
  IT_BATCH,
  IT_ALLREDUCE,
  IT_ALLGATHERV,
  IT_BROADCAST,
  IT_ALLTOALLV,
  IT_REDUCESCATTER,
  IT_BARRIER,
  IT_COPY,
  IT_READY,
  IT_NOTIFY,
  IT_SUBSET,
  IT_FINALIZE_SUB
} item_kind_t;

struct devsim_root;

/* What the core holds: the top-level state or a process set's sub-state. */
typedef struct devsim_state {
  struct devsim_root *root;
  void *gloo; /* the gloo plugin's state for the same ranks */
  int rank, nranks;
  char err[1024]; /* last_error; written on the core's thread only */
} devsim_state_t;

typedef struct item {
  struct item *next;
  item_kind_t kind;
  devsim_state_t *st;
  /* batch_copy (real pointers) */
  plait_span_t *spans;
  size_t n;
  plait_dtype_t dtype;
  plait_op_t op;
  double factor;
  /* collectives and copies (real pointers; sizes owned by the item) */
  void *a, *b;
  size_t count;
  size_t *sizes, *sizes2;
  int root_rank;
  void *owned; /* a host snapshot the item frees */
  /* ready */
  devsim_stream_t *stream;
  uint64_t ticket;
  /* notify */
  plait_done_fn done;
  void *ctx;
  /* subset */
  int *ranks;
  devsim_state_t **sub_out; /* the new sub-state, or NULL */
  /* a caller waiting for the item (blocking entries, DEVSIM_SYNC=1) */
  int waited, finished;
  plait_result_t rc;
  char msg[768];
} item_t;

typedef struct devsim_root {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  item_t *head, *tail;
  pthread_t worker;
  atomic_int stop; /* failed or closing: ends gate and stream waits */
  int closing;     /* finalize began (under mu) */
  plait_result_t failed_rc;
  char failed_msg[768];
  plait_scale_fn scale;
  int device;
  devsim_state_t top;
} devsim_root_t;

/* The gloo plugin's table (loaded by init). */
extern const plait_transport_t *devsim_gloo;

/* Starts root's worker; 0 or an errno. */
int devsim_worker_start(devsim_root_t *root);
/* Marks root closing, runs the rest of its queue as PLAIT_ERR_SHUTDOWN
 * (done callbacks included) and joins the worker. */
void devsim_worker_stop(devsim_root_t *root);
/* Hands it to the worker. With it->waited (set by the caller), blocks until
 * it ran and returns its rc (message into st->err), freeing it; otherwise
 * returns at once. A state that failed refuses everything but notify with
 * its failure. */
plait_result_t devsim_submit(devsim_state_t *st, item_t *it);
/* Fails root with rc (the first failure stays) and wakes every wait. */
void devsim_fail(devsim_root_t *root, plait_result_t rc, const char *msg);

#endif
