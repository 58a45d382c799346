/*
 * The exported table plait_transport_v2 and its entry points: argument
 * checks (before any communication, leaving the state usable), the broken
 * state (after a failure inside a collective every later one fails at once),
 * then the algorithm (coll.h), guarded (OFI_GUARDED): the rescue from a spin
 * inside libfabric (rescue.h), and the teardown of a state that broke during
 * the call (errors.c records the failure and quiesces the endpoint).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "engine/mr.h"
#include "engine/progress.h"
#include "robustness/rescue.h"
#include "setup.h"
#include "subset.h"

/* Message of the last init failure (or call with a NULL state) on this
 * thread: last_error(NULL). */
static _Thread_local char t_error[1536];

static plait_result_t null_state(const char *what) {
  snprintf(t_error, sizeof t_error, "%s: state is NULL", what);
  return PLAIT_ERR_INVALID_ARGUMENT;
}

/* Starts a collective call: NULL state, broken state. */
#define ENTER(state, what)                                                     \
  if ((state) == NULL) return null_state(what);                                \
  ofi_state_t *st = (ofi_state_t *)(state);                                    \
  st->op = (what);                                                             \
  if (st->broken == PLAIT_SUCCESS && st->parent &&                             \
      st->parent->broken != PLAIT_SUCCESS) /* the shared endpoint broke */     \
    return ofi_fail(st, st->parent->broken,                                    \
                    "the job's ofi endpoint failed earlier and cannot be "     \
                    "used: %s", st->parent->broken_msg);                       \
  if (st->broken != PLAIT_SUCCESS)                                             \
    return ofi_fail(st, st->broken,                                            \
                    "the ofi endpoint failed earlier and cannot be used: %s",  \
                    st->broken_msg);                                           \
  if (st->vote.pending && strcmp((what), "vote") != 0)                         \
    return ofi_fail(st, PLAIT_ERR_INVALID_ARGUMENT,                            \
                    "%s called while a vote is pending (the ABI: only vote "   \
                    "again until it is done)", (what));                        \
  if (st->vred.pending && strcmp((what), "vote_allreduce") != 0)               \
    return ofi_fail(st, PLAIT_ERR_INVALID_ARGUMENT,                            \
                    "%s called while a vote_allreduce is pending (the ABI: "   \
                    "only vote_allreduce again until it is done)", (what));

/* The end of a guarded call: a state that broke in it (ofi_break, which
 * quiesced it, or the rescue) is torn down here, once its collective has
 * returned: its libfabric objects are closed, guarded too (a close that
 * spins on a dead peer's lock is rescued, and the rest is left open), or,
 * rescued, never called again here and parked, to be closed at a later init
 * (abandoned; parked.h). The call's message is kept.
 * Safe on a state torn down before. */
static plait_result_t settle(ofi_state_t *st, plait_result_t rc) {
  if (st->broken == PLAIT_SUCCESS) return rc;
  char msg[sizeof st->err];
  memcpy(msg, st->err, sizeof msg);
  plait_result_t closed = PLAIT_SUCCESS;
  OFI_RESCUABLE(st, closed, (ofi_teardown(st), PLAIT_SUCCESS));
  (void)closed;
  memcpy(st->err, msg, sizeof msg);
  return rc;
}

/* Runs the collective `call` on st guarded and returns its result, from an
 * entry point. */
#define OFI_GUARDED(st, call)                                                  \
  do {                                                                         \
    plait_result_t guarded_rc_ = PLAIT_SUCCESS;                                \
    OFI_RESCUABLE((st), guarded_rc_, (call));                                  \
    return settle((st), guarded_rc_);                                          \
  } while (0)

static plait_result_t check_reduction(ofi_state_t *st, plait_dtype_t dtype, plait_op_t op) {
  OFI_REQUIRE(st, plait_dtype_valid_inline(dtype), "dtype %d is not a plait dtype", (int)dtype);
  OFI_REQUIRE(st, plait_op_valid_inline(op), "op %d is not a plait op", (int)op);
  OFI_REQUIRE(st, !(dtype == PLAIT_BOOL && op == PLAIT_OP_AVERAGE),
              "op average is not defined for dtype bool (sum and max are logical or, min "
              "and product logical and)");
  return PLAIT_SUCCESS;
}

static plait_result_t checked_sum(ofi_state_t *st, const char *name, const size_t *v, int n,
                                  size_t *total) {
  *total = 0;
  for (int r = 0; r < n; r++) {
    OFI_REQUIRE(st, v[r] <= SIZE_MAX - *total, "the sum of %s[] overflows size_t", name);
    *total += v[r];
  }
  return PLAIT_SUCCESS;
}

static int overlap(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an && bn && !(x + an <= y || y + bn <= x);
}

static plait_result_t ofi_init(const plait_transport_init_args_t *args, void **state) {
  if (state == NULL) return null_state("init");
  ofi_state_t *st = NULL;
  plait_result_t rc = ofi_start(args, &st, t_error, sizeof t_error);
  if (rc == PLAIT_SUCCESS) *state = st;
  return rc;
}

static plait_result_t finalize_guarded(ofi_state_t *st) {
  OFI_GUARDED(st, (ofi_teardown(st), PLAIT_SUCCESS)); /* closing may spin too */
}

static plait_result_t ofi_finalize(void *state) {
  ofi_state_t *st = (ofi_state_t *)state;
  if (st) finalize_guarded(st);
  ofi_stop(st);
  return PLAIT_SUCCESS;
}

static const char *ofi_last_error(void *state) {
  if (state == NULL) return t_error;
  return ((ofi_state_t *)state)->err;
}

static plait_result_t entry_allreduce(void *state, void *buf, size_t count, plait_dtype_t dtype,
                                      plait_op_t op) {
  ENTER(state, "allreduce");
  OFI_CHECK(check_reduction(st, dtype, op));
  size_t es = plait_dtype_size_inline(dtype);
  OFI_REQUIRE(st, count <= SIZE_MAX / es, "count %zu of %zu-byte elements overflows size_t",
              count, es);
  OFI_REQUIRE(st, buf != NULL || count == 0, "buf is NULL but count is %zu", count);
  ofi_begin(st, "allreduce");
  ofi_huge_use(st, buf, count * es);
  OFI_GUARDED(st, ofi_allreduce(st, buf, count, dtype, op));
}

static plait_result_t entry_allreduce_scaled(void *state, const void *send, void *recv,
                                             size_t count, plait_dtype_t dtype, plait_op_t op,
                                             double postscale) {
  ENTER(state, "allreduce");
  OFI_CHECK(check_reduction(st, dtype, op));
  OFI_REQUIRE(st, !(dtype == PLAIT_BOOL && postscale != 1.0),
              "postscale %g is not defined for dtype bool", postscale);
  size_t es = plait_dtype_size_inline(dtype);
  OFI_REQUIRE(st, count <= SIZE_MAX / es, "count %zu of %zu-byte elements overflows size_t",
              count, es);
  OFI_REQUIRE(st, (send != NULL && recv != NULL) || count == 0,
              "send %p or recv %p is NULL but count is %zu", send, recv, count);
  OFI_REQUIRE(st, send == recv || !overlap(send, count * es, recv, count * es),
              "send and recv overlap without being the same buffer");
  ofi_begin(st, "allreduce");
  ofi_huge_use(st, send, count * es);
  if (recv != send) ofi_huge_use(st, recv, count * es);
  OFI_GUARDED(st, ofi_allreduce_scaled(st, send, recv, count, dtype, op, postscale));
}

static plait_result_t entry_allreduce_spans(void *state, const plait_span_t *spans, size_t n,
                                            plait_dtype_t dtype, plait_op_t op,
                                            double postscale) {
  ENTER(state, "allreduce");
  OFI_CHECK(check_reduction(st, dtype, op));
  OFI_REQUIRE(st, !(dtype == PLAIT_BOOL && postscale != 1.0),
              "postscale %g is not defined for dtype bool", postscale);
  OFI_REQUIRE(st, spans != NULL && n > 0, "spans is NULL or n is 0 (n = %zu)", n);
  size_t es = plait_dtype_size_inline(dtype), total = 0;
  for (size_t i = 0; i < n; i++) {
    const plait_span_t *s = &spans[i];
    OFI_REQUIRE(st, s->count <= (SIZE_MAX - total) / es,
                "span %zu: %zu elements of %zu bytes overflow size_t with the spans before it",
                i, s->count, es);
    OFI_REQUIRE(st, (s->src != NULL && s->dst != NULL) || s->count == 0,
                "span %zu: src %p or dst %p is NULL but count is %zu", i, s->src, s->dst,
                s->count);
    OFI_REQUIRE(st, s->src == s->dst || !overlap(s->src, s->count * es, s->dst, s->count * es),
                "span %zu: src and dst overlap without being the same memory", i);
    total += s->count * es;
  }
  ofi_begin(st, "allreduce");
  /* a large tensor fused with others is read over CMA as when it runs alone;
   * small ones side by side, by the 2 MiB windows they fill (hugepages.h) */
  ofi_huge_use_spans(st, spans, n, es);
  OFI_GUARDED(st, ofi_allreduce_spans(st, spans, n, dtype, op, postscale));
}

/* The ABI's one allreduce (plait_transport_v2_t.allreduce) over the entries
 * above, as the core chose among them before version 2: one span goes to
 * allreduce_scaled (in place and unscaled: allreduce), several spans to
 * allreduce_spans. A prescale is a pass of the core's scale kernel from each
 * span's src into its dst, then the reduction in place. */
static plait_result_t entry_allreduce_v2(void *state, const plait_span_t *spans, size_t n,
                                         plait_dtype_t dtype, plait_op_t op, double prescale,
                                         double postscale) {
  if (prescale != 1.0) {
    ENTER(state, "allreduce");
    OFI_REQUIRE(st, dtype != PLAIT_BOOL, "prescale %g is not defined for dtype bool", prescale);
    OFI_REQUIRE(st, spans != NULL && n > 0, "spans is NULL or n is 0 (n = %zu)", n);
    plait_span_t *in_place = malloc(n * sizeof *in_place);
    OFI_REQUIRE(st, in_place != NULL, "out of memory for %zu spans", n);
    plait_result_t rc = PLAIT_SUCCESS;
    for (size_t i = 0; i < n && rc == PLAIT_SUCCESS; i++) {
      in_place[i] = (plait_span_t){spans[i].dst, spans[i].dst, spans[i].count};
      if (spans[i].count && (!spans[i].src || !spans[i].dst))
        rc = ofi_fail(st, PLAIT_ERR_INVALID_ARGUMENT, "span %zu: src %p or dst %p is NULL but "
                      "count is %zu", i, spans[i].src, spans[i].dst, spans[i].count);
      else if (spans[i].count)
        rc = st->scale(dtype, spans[i].dst, spans[i].src, spans[i].count, prescale);
    }
    if (rc == PLAIT_SUCCESS) rc = entry_allreduce_v2(state, in_place, n, dtype, op, 1.0, postscale);
    free(in_place);
    return rc;
  }
  if (spans != NULL && n == 1 && spans[0].src == spans[0].dst && postscale == 1.0)
    return entry_allreduce(state, spans[0].dst, spans[0].count, dtype, op);
  if (spans != NULL && n == 1)
    return entry_allreduce_scaled(state, spans[0].src, spans[0].dst, spans[0].count, dtype, op,
                                  postscale);
  return entry_allreduce_spans(state, spans, n, dtype, op, postscale);
}

static plait_result_t entry_allgatherv(void *state, void *buf, const size_t *bytes) {
  ENTER(state, "allgatherv");
  OFI_REQUIRE(st, bytes != NULL, "bytes is NULL");
  size_t total;
  OFI_CHECK(checked_sum(st, "bytes", bytes, st->nranks, &total));
  OFI_REQUIRE(st, buf != NULL || total == 0, "buf is NULL but bytes sum to %zu", total);
  ofi_begin(st, "allgatherv");
  ofi_huge_use(st, buf, total);
  OFI_GUARDED(st, ofi_allgatherv(st, buf, bytes));
}

static plait_result_t entry_broadcast(void *state, void *buf, size_t bytes, int root) {
  ENTER(state, "broadcast");
  OFI_REQUIRE(st, root >= 0 && root < st->nranks, "root %d is not a rank (0 to %d)", root,
              st->nranks - 1);
  OFI_REQUIRE(st, buf != NULL || bytes == 0, "buf is NULL but bytes is %zu", bytes);
  ofi_begin(st, "broadcast");
  ofi_huge_use(st, buf, bytes);
  OFI_GUARDED(st, ofi_broadcast(st, buf, bytes, root));
}

static plait_result_t entry_alltoallv(void *state, const void *send, const size_t *send_bytes,
                                      void *recv, const size_t *recv_bytes) {
  ENTER(state, "alltoallv");
  OFI_REQUIRE(st, send_bytes != NULL, "send_bytes is NULL");
  OFI_REQUIRE(st, recv_bytes != NULL, "recv_bytes is NULL");
  size_t ts, tr;
  OFI_CHECK(checked_sum(st, "send_bytes", send_bytes, st->nranks, &ts));
  OFI_CHECK(checked_sum(st, "recv_bytes", recv_bytes, st->nranks, &tr));
  OFI_REQUIRE(st, send != NULL || ts == 0, "send is NULL but send_bytes sum to %zu", ts);
  OFI_REQUIRE(st, recv != NULL || tr == 0, "recv is NULL but recv_bytes sum to %zu", tr);
  OFI_REQUIRE(st, send_bytes[st->rank] == recv_bytes[st->rank],
              "send_bytes[%d] = %zu but recv_bytes[%d] = %zu (this rank's block to itself)",
              st->rank, send_bytes[st->rank], st->rank, recv_bytes[st->rank]);
  OFI_REQUIRE(st, !overlap(send, ts, recv, tr), "send and recv overlap");
  ofi_begin(st, "alltoallv");
  OFI_GUARDED(st, ofi_alltoallv(st, send, send_bytes, recv, recv_bytes));
}

static plait_result_t entry_reducescatter(void *state, const void *send, void *recv,
                                          const size_t *counts, plait_dtype_t dtype,
                                          plait_op_t op) {
  ENTER(state, "reducescatter");
  OFI_CHECK(check_reduction(st, dtype, op));
  OFI_REQUIRE(st, counts != NULL, "counts is NULL");
  size_t es = plait_dtype_size_inline(dtype), total = 0, mine = counts[st->rank];
  for (int r = 0; r < st->nranks; r++) {
    OFI_REQUIRE(st, counts[r] <= SIZE_MAX / es - total, "the sum of counts[] overflows");
    total += counts[r];
  }
  OFI_REQUIRE(st, send != NULL || total == 0, "send is NULL but counts sum to %zu", total);
  OFI_REQUIRE(st, recv != NULL || mine == 0, "recv is NULL but counts[%d] is %zu", st->rank,
              mine);
  OFI_REQUIRE(st, mine <= SIZE_MAX / es / (size_t)st->nranks,
              "counts[%d] = %zu is too large to gather from %d ranks", st->rank, mine,
              st->nranks);
  OFI_REQUIRE(st, !overlap(send, total * es, recv, mine * es), "send and recv overlap");
  ofi_begin(st, "reducescatter");
  ofi_huge_use(st, send, total * es);
  OFI_GUARDED(st, ofi_reducescatter(st, send, recv, counts, dtype, op));
}

static plait_result_t entry_barrier(void *state) {
  ENTER(state, "barrier");
  ofi_begin(st, "barrier");
  OFI_GUARDED(st, ofi_barrier(st));
}

/* The cached epoch's agreement, which a waiting caller may leave
 * unfinished (algorithms/vote.c). */
static plait_result_t entry_vote(void *state, uint8_t mine, uint8_t *out, double wait_s) {
  ENTER(state, "vote");
  OFI_REQUIRE(st, out != NULL, "vote: out is NULL");
  OFI_REQUIRE(st, !isnan(wait_s), "vote: wait_s is NaN");
  OFI_GUARDED(st, ofi_vote(st, mine, out, wait_s));
}

/* The vote carried with a small allreduce, which a waiting caller may leave
 * unfinished too (algorithms/vote_allreduce.c). A call that goes on with a
 * pending one takes none of its arguments but out and wait_s. */
static plait_result_t entry_vote_allreduce(void *state, uint8_t mine, const void *send,
                                           void *recv, size_t count, plait_dtype_t dtype,
                                           plait_op_t op, double postscale, uint8_t *out,
                                           double wait_s) {
  ENTER(state, "vote_allreduce");
  OFI_REQUIRE(st, out != NULL, "vote_allreduce: out is NULL");
  OFI_REQUIRE(st, !isnan(wait_s), "vote_allreduce: wait_s is NaN");
  if (!st->vred.pending) {
    OFI_CHECK(check_reduction(st, dtype, op));
    OFI_REQUIRE(st, !(dtype == PLAIT_BOOL && postscale != 1.0),
                "postscale %g is not defined for dtype bool", postscale);
    size_t es = plait_dtype_size_inline(dtype);
    OFI_REQUIRE(st, count <= SIZE_MAX / es - 64, "count %zu of %zu-byte elements overflows "
                "size_t", count, es);
    OFI_REQUIRE(st, !mine || ((send != NULL && recv != NULL) || count == 0),
                "vote_allreduce: a vote of 1 with send %p or recv %p NULL and count %zu", send,
                recv, count);
    OFI_REQUIRE(st, !mine || send == recv || !overlap(send, count * es, recv, count * es),
                "send and recv overlap without being the same buffer");
  }
  OFI_GUARDED(st, ofi_vote_allreduce(st, mine, send, recv, count, dtype, op, postscale, out,
                                     wait_s));
}

/* Memory functions: local, usable even after the endpoint failed. */
static plait_result_t entry_mem_alloc(void *state, size_t bytes, void **ptr) {
  if (state == NULL) return null_state("mem_alloc");
  ofi_state_t *st = state;
  st->op = "mem_alloc";
  return ofi_mem_alloc(st, bytes, ptr);
}

static plait_result_t entry_mem_free(void *state, void *ptr) {
  if (state == NULL) return null_state("mem_free");
  ofi_state_t *st = state;
  st->op = "mem_free";
  return ofi_mem_free(st, ptr);
}

static plait_result_t entry_mem_copy(void *state, void *dst, const void *src, size_t bytes,
                                     plait_copy_kind_t kind) {
  if (state == NULL) return null_state("mem_copy");
  ofi_state_t *st = state;
  st->op = "mem_copy";
  return ofi_mem_copy(st, dst, src, bytes, kind);
}

/* What the collectives would run for `bytes` in all (the parts of the split
 * collectives taken as equal). */
static const char *entry_algorithm(void *state, uint64_t collective, uint64_t bytes) {
  const ofi_state_t *st = state;
  if (st == NULL) return NULL;
  if (st->nranks == 1) return "none (one rank)";
  size_t part = st->nranks > 0 ? (size_t)(bytes / (uint64_t)st->nranks) : (size_t)bytes;
  switch (collective) {
  case PLAIT_CAP_ALLREDUCE:
    return ofi_allreduce_small(st, (size_t)bytes) ? "recursive doubling"
           : ofi_direct_on(st)                     ? "direct reads"
                                                   : "pipelined ring";
  case PLAIT_CAP_ALLGATHERV:
    return ofi_allgatherv_small(st, (size_t)bytes, part) ? "direct" : "pipelined ring";
  case PLAIT_CAP_BROADCAST:
    return ofi_broadcast_small(st, (size_t)bytes) ? "binomial tree" : "pipelined chain";
  case PLAIT_CAP_REDUCESCATTER:
    return ofi_reducescatter_small(st, (size_t)bytes, part) ? "direct" : "pipelined ring";
  case PLAIT_CAP_ALLTOALLV: return "pairwise";
  case PLAIT_CAP_BARRIER: return "dissemination";
  default: return NULL;
  }
}

static plait_result_t entry_subset(void *state, const int *ranks, int n, void **sub) {
  ENTER(state, "subset");
  OFI_REQUIRE(st, sub != NULL, "subset: sub is NULL");
  *sub = NULL;
  ofi_state_t *made = NULL;
  plait_result_t rc = ofi_subset(st, ranks, n, &made);
  if (rc) return rc;
  *sub = made;
  return PLAIT_SUCCESS;
}

/* The one exported symbol (with -fvisibility=hidden and exports.map). */
__attribute__((visibility("default"))) extern const plait_transport_t plait_transport_v2;

const plait_transport_t plait_transport_v2 = {
    .abi_version = PLAIT_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(plait_transport_t),
    .name = "ofi",
    .caps = PLAIT_CAP_HOST_MEMORY | PLAIT_CAP_ALLREDUCE | PLAIT_CAP_ALLGATHERV |
            PLAIT_CAP_BROADCAST | PLAIT_CAP_ALLTOALLV | PLAIT_CAP_REDUCESCATTER |
            PLAIT_CAP_BARRIER,
    .dtypes = PLAIT_DTYPE_MASK_ALL,
    .ops = PLAIT_OP_MASK_ALL,
    .allreduce_flags = PLAIT_ALLREDUCE_SCALED | PLAIT_ALLREDUCE_SPANS,
    /* first in PLAIT_TRANSPORT=auto: libfabric's shm on one host is about 2x
     * Gloo, and tcp;ofi_rxm beats Gloo at every size at 2 ranks */
    .auto_place = 10,
    /* 200 x 64 KiB fused in one 12.5 MiB buffer took 6.3-9.6 ms a step, in
     * 1 MiB pieces 4.3-7.2 ms (the buffer, the tensors and the peer's reads
     * no longer fit the cache together) */
    .fusion_piece = 1u << 20,
    /* a fused copy costs more than the collectives it saves for tensors
     * above about 1 MiB (plait-bench fusion over bench/mixes) */
    .fusion_max_tensor = 1u << 20,
    .init = ofi_init,
    .finalize = ofi_finalize,
    .last_error = ofi_last_error,
    .allreduce = entry_allreduce_v2,
    .allgatherv = entry_allgatherv,
    .broadcast = entry_broadcast,
    .alltoallv = entry_alltoallv,
    .reducescatter = entry_reducescatter,
    .barrier = entry_barrier,
    .mem_alloc = entry_mem_alloc,
    .mem_free = entry_mem_free,
    .mem_copy = entry_mem_copy,
    .algorithm = entry_algorithm,
    .subset = entry_subset,
    .probe = ofi_probe,
    .vote = entry_vote,
    .vote_allreduce = entry_vote_allreduce,
};
