/* Entries and their metadata: sizes, copies, cross-rank comparison. */
#include "engine/submit/entry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/submit/handle.h"
#include "plait/dtypes.h"

const char *plait_coll_name(plait_coll_t c) {
  static const char *names[] = {"?", "allreduce", "allgather", "broadcast", "alltoall",
                                "reducescatter", "barrier", "join", "process_set_add",
                                "process_set_remove"};
  return c >= 1 && c <= PLAIT_COLL_MAX_ ? names[c] : "?";
}

const char *plait_op_key(char *buf, int32_t pset, const char *name) {
  if (pset == 0) return name;
  snprintf(buf, PLAIT_OP_KEY_MAX, "\x1f%d\x1f%s", (int)pset, name);
  return buf;
}

int64_t plait_meta_elements(const plait_meta_t *m) {
  int64_t n = 1;
  for (int i = 0; i < m->ndim; i++) n *= m->shape[i];
  return n;
}

uint64_t plait_meta_bytes(const plait_meta_t *m) {
  return (uint64_t)plait_meta_elements(m) * plait_dtype_size_inline((plait_dtype_t)m->dtype);
}

plait_result_t plait_meta_copy(plait_meta_t *dst, const plait_meta_t *src) {
  *dst = *src;
  dst->group = NULL;
  dst->splits = NULL;
  if (src->group && !(dst->group = strdup(src->group))) return PLAIT_ERR_NO_MEMORY;
  if (src->nsplits) {
    dst->splits = malloc(sizeof(int64_t) * src->nsplits);
    if (!dst->splits) {
      free(dst->group);
      dst->group = NULL;
      return PLAIT_ERR_NO_MEMORY;
    }
    memcpy(dst->splits, src->splits, sizeof(int64_t) * src->nsplits);
  }
  return PLAIT_SUCCESS;
}

void plait_meta_free(plait_meta_t *m) {
  free(m->group);
  free(m->splits);
  m->group = NULL;
  m->splits = NULL;
  m->nsplits = 0;
}

static void shape_text(const plait_meta_t *m, int from, char *out, size_t cap) {
  size_t used = (size_t)snprintf(out, cap, "[");
  for (int i = from; i < m->ndim && used < cap; i++)
    used += (size_t)snprintf(out + used, cap - used, "%s%lld", i > from ? ", " : "",
                             (long long)m->shape[i]);
  if (used < cap) snprintf(out + used, cap - used, "]");
}

static void ranks_text(const plait_meta_t *m, char *out, size_t cap) {
  size_t used = (size_t)snprintf(out, cap, "[");
  for (uint32_t i = 0; i < m->nsplits && used < cap; i++)
    used += (size_t)snprintf(out + used, cap - used, "%s%lld", i ? ", " : "",
                             (long long)m->splits[i]);
  if (used < cap) snprintf(out + used, cap - used, "]");
}

int plait_meta_describe_difference(const plait_meta_t *a, const plait_meta_t *b, char *what,
                                   size_t what_cap, char *va, char *vb, size_t v_cap) {
#define DIFF(cond, name, fmt_a, fmt_b)                                         \
  if (cond) {                                                                  \
    snprintf(what, what_cap, "%s", name);                                      \
    fmt_a;                                                                     \
    fmt_b;                                                                     \
    return 1;                                                                  \
  }
  DIFF(a->coll != b->coll, "operation",
       snprintf(va, v_cap, "%s", plait_coll_name((plait_coll_t)a->coll)),
       snprintf(vb, v_cap, "%s", plait_coll_name((plait_coll_t)b->coll)))
  DIFF(a->pset != b->pset, "process set", snprintf(va, v_cap, "%d", a->pset),
       snprintf(vb, v_cap, "%d", b->pset))
  if (a->coll == PLAIT_COLL_PSET_ADD) {
    int differs = a->nsplits != b->nsplits;
    for (uint32_t i = 0; i < a->nsplits && !differs; i++) differs = a->splits[i] != b->splits[i];
    if (differs) {
      snprintf(what, what_cap, "process set ranks");
      ranks_text(a, va, v_cap);
      ranks_text(b, vb, v_cap);
      return 1;
    }
  }
  DIFF(a->coll == PLAIT_COLL_PSET_ADD && a->root != b->root, "number of sets in "
       "PLAIT_PROCESS_SETS", snprintf(va, v_cap, "%d", a->root), snprintf(vb, v_cap, "%d", b->root))
  DIFF(a->coll == PLAIT_COLL_PSET_REMOVE && a->root != b->root, "process set id",
       snprintf(va, v_cap, "%d", a->root), snprintf(vb, v_cap, "%d", b->root))
  DIFF(a->dtype != b->dtype, "dtype",
       snprintf(va, v_cap, "%s", plait_dtype_name_inline(a->dtype)),
       snprintf(vb, v_cap, "%s", plait_dtype_name_inline(b->dtype)))
  int reduces = a->coll == PLAIT_COLL_ALLREDUCE || a->coll == PLAIT_COLL_REDUCESCATTER;
  DIFF(reduces && a->op != b->op, "reduction op",
       snprintf(va, v_cap, "%s", plait_op_name_inline(a->op)),
       snprintf(vb, v_cap, "%s", plait_op_name_inline(b->op)))
  DIFF(a->device != b->device, "memory", /* host or device: the index is each rank's own */
       snprintf(va, v_cap, "%s", a->device < 0 ? "host" : "device"),
       snprintf(vb, v_cap, "%s", b->device < 0 ? "host" : "device"))
  DIFF(a->coll == PLAIT_COLL_BROADCAST && a->root != b->root, "root rank",
       snprintf(va, v_cap, "%d", a->root), snprintf(vb, v_cap, "%d", b->root))
  DIFF(reduces && a->prescale != b->prescale, "prescale factor",
       snprintf(va, v_cap, "%g", a->prescale), snprintf(vb, v_cap, "%g", b->prescale))
  DIFF(reduces && a->postscale != b->postscale, "postscale factor",
       snprintf(va, v_cap, "%g", a->postscale), snprintf(vb, v_cap, "%g", b->postscale))
  int ga = a->group != NULL, gb = b->group != NULL;
  DIFF(ga != gb || (ga && (strcmp(a->group, b->group) || a->group_size != b->group_size)),
       "group", snprintf(va, v_cap, "%s (%u members)", ga ? a->group : "none", a->group_size),
       snprintf(vb, v_cap, "%s (%u members)", gb ? b->group : "none", b->group_size))
  /* allgather and alltoall may differ in the first dimension */
  int from = a->coll == PLAIT_COLL_ALLGATHER || a->coll == PLAIT_COLL_ALLTOALL;
  int shape_differs = a->ndim != b->ndim;
  for (int i = from; i < a->ndim && !shape_differs; i++) shape_differs = a->shape[i] != b->shape[i];
  if (shape_differs) {
    snprintf(what, what_cap, from ? "shape after the first dimension" : "shape");
    shape_text(a, from, va, v_cap);
    shape_text(b, from, vb, v_cap);
    return 1;
  }
#undef DIFF
  return 0;
}

void plait_entry_free(plait_entry_t *e) {
  if (!e) return;
  if (e->name != (char *)(e + 1)) free(e->name); /* else in the block (api_ops.c) */
  plait_meta_free(&e->meta);
  free(e->owned);
  free(e);
}
