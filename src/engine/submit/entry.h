/*
 * Internal: one submitted operation on this rank (an "entry"), and the
 * metadata every rank announces for it. The coordinator matches entries
 * across ranks by name.
 */
#ifndef PLAIT_ENTRY_H
#define PLAIT_ENTRY_H

#include <stdint.h>

#include "plait/plait.h"

typedef enum plait_coll {
  PLAIT_COLL_ALLREDUCE = 1,
  PLAIT_COLL_ALLGATHER = 2,
  PLAIT_COLL_BROADCAST = 3,
  PLAIT_COLL_ALLTOALL = 4,
  PLAIT_COLL_REDUCESCATTER = 5,
  PLAIT_COLL_BARRIER = 6,
  PLAIT_COLL_JOIN = 7,
  PLAIT_COLL_PSET_ADD = 8,    /* plait_process_set_add: ranks in splits */
  PLAIT_COLL_PSET_REMOVE = 9, /* plait_process_set_remove: the id in root */
  PLAIT_COLL_MAX_ = 9
} plait_coll_t;

const char *plait_coll_name(plait_coll_t c);

/* Room for plait_op_key's text. */
#define PLAIT_OP_KEY_MAX (PLAIT_MAX_NAME + 16)
/* What identifies an operation across ranks: its name within its process
 * set. For the global set (pset 0) the name itself; otherwise
 * "\x1f<pset>\x1f<name>" (names may not start with \x1f, see api_ops.c).
 * Returns buf, or name itself when pset is 0. */
const char *plait_op_key(char *buf, int32_t pset, const char *name);

/* What a rank announces about an operation; compared across ranks. */
typedef struct plait_meta {
  uint8_t coll;    /* plait_coll_t */
  uint8_t dtype;   /* plait_dtype_t */
  uint8_t op;      /* plait_op_t (reductions) */
  uint8_t ndim;
  int32_t device;
  int32_t root;    /* broadcast (a rank of the job); process set removal: the id */
  int32_t pset;    /* process set id: 0 the global set */
  double prescale, postscale;
  int64_t shape[PLAIT_MAX_DIMS];
  uint32_t group_size; /* grouped allreduce: members in the group; 0 none */
  char *group;         /* grouped allreduce: the group's first name; NULL none */
  int64_t *splits;     /* alltoall: rows for each rank (size entries) */
  uint32_t nsplits;
} plait_meta_t;

/* Elements of a shape (1 for ndim 0); bytes = elements * dtype size. */
int64_t plait_meta_elements(const plait_meta_t *m);
uint64_t plait_meta_bytes(const plait_meta_t *m);
/* Deep copy / free of the owned parts (group, splits). */
plait_result_t plait_meta_copy(plait_meta_t *dst, const plait_meta_t *src);
void plait_meta_free(plait_meta_t *m);
/* Writes "shape [2, 3]" style text of the first field in which a and b
 * differ, for each of them: what[] names the field. Returns 0 if none. */
int plait_meta_describe_difference(const plait_meta_t *a, const plait_meta_t *b, char *what,
                                   size_t what_cap, char *va, char *vb, size_t v_cap);

typedef struct plait_entry {
  char *name;
  plait_meta_t meta;
  plait_tensor_t input, output;
  struct plait_handle *handle;
  double submitted_at; /* plait_now() */
  int index;           /* position within its handle's group */
  void *stream;        /* plait_op_options_t.stream: local, never negotiated */
  /* library-owned output (allgather, alltoall, reducescatter) */
  void *owned;
  struct plait_entry *next; /* in whatever list holds it */
} plait_entry_t;

void plait_entry_free(plait_entry_t *e);

#endif
