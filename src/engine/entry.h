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
  PLAIT_COLL_MAX_ = 7
} plait_coll_t;

const char *plait_coll_name(plait_coll_t c);

/* What a rank announces about an operation; compared across ranks. */
typedef struct plait_meta {
  uint8_t coll;    /* plait_coll_t */
  uint8_t dtype;   /* plait_dtype_t */
  uint8_t op;      /* plait_op_t (reductions) */
  uint8_t ndim;
  int32_t device;
  int32_t root;    /* broadcast */
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
  /* library-owned output (allgather, alltoall, reducescatter) */
  void *owned;
  struct plait_entry *next; /* in whatever list holds it */
} plait_entry_t;

void plait_entry_free(plait_entry_t *e);

#endif
