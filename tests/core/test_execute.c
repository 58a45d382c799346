/*
 * Tests of execution (src/engine/execute/execute.c, execute_other.c) against a fake
 * in-process transport: a plait_transport_t table defined here that records
 * every call (with a copy of the buffer the collective was given) and plays
 * `size` ranks that all hold this rank's data, so every result is known:
 * sum = x * size, min = max = x. No plugin, no forked ranks.
 *
 * Checked: the in-place single-tensor path, copy-in/out of the fusion buffer
 * at the offsets plait_fusion_layout_add gives (the layout rank 0 planned
 * with) and the count passed to the transport, prescale and postscale,
 * AVERAGE as a sum scaled once by postscale / size, the buffer reused and
 * regrown (at least twofold), a transport that folds the copy and the
 * scaling (allreduce_scaled) given the whole job of them, identities for a joined rank, error responses, a transport
 * failure, a response naming a tensor this rank never submitted, broadcast
 * and allgather, what the engine's counters record, and the cached round
 * whose allreduce carries the vote (which rounds do; the output written and
 * the entry finished only when every rank voted 1; left pending and taken
 * up; a rank with nothing of the round).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/execute/execute.h"
#include "engine/negotiate/fusion.h"
#include "engine/submit/handle.h"
#include "engine/observe/stats.h"

/* ------------------------------------------------------ fake transport */

enum { MAXCALLS = 32 };
typedef struct call {
  char what[24];
  size_t count, bytes;
  plait_dtype_t dtype;
  plait_op_t op;
  int root;
  void *buf, *recv;    /* recv: allreduce_scaled's output */
  double post;         /* allreduce_scaled's postscale */
  unsigned char *seen; /* a copy of buf as the collective got it */
  plait_copy_kind_t kind;
} call_t;

typedef struct fake {
  int size;
  call_t calls[MAXCALLS];
  int ncalls;
  plait_result_t fail_with; /* the next collective fails with this */
  int folds;                /* PLAIT_ALLREDUCE_SCALED: f_allreduce_scaled */
  size_t allocs, frees, alloc_bytes;
} fake_t;

static call_t *record(fake_t *f, const char *what, const void *buf, size_t bytes) {
  cr_assert_lt(f->ncalls, MAXCALLS);
  call_t *c = &f->calls[f->ncalls++];
  memset(c, 0, sizeof *c);
  snprintf(c->what, sizeof c->what, "%s", what);
  c->buf = (void *)buf;
  c->bytes = bytes;
  if (buf && bytes) {
    c->seen = malloc(bytes);
    memcpy(c->seen, buf, bytes);
  }
  return c;
}

static const char *f_last_error(void *s) {
  (void)s;
  return "the fake link broke";
}

/* size ranks with the same data: sum = x * size; min, max = x; product = x^size. */
static plait_result_t f_allreduce(void *s, void *buf, size_t count, plait_dtype_t dt,
                                  plait_op_t op) {
  fake_t *f = s;
  call_t *c = record(f, "allreduce", buf, count * plait_dtype_size(dt));
  c->count = count, c->dtype = dt, c->op = op;
  if (f->fail_with) return f->fail_with;
  cr_assert_neq(op, PLAIT_OP_AVERAGE, "AVERAGE must reach the transport as SUM");
  for (size_t i = 0; i < count && op == PLAIT_OP_SUM; i++) {
    if (dt == PLAIT_FLOAT32) ((float *)buf)[i] *= (float)f->size;
    else if (dt == PLAIT_FLOAT64) ((double *)buf)[i] *= f->size;
    else if (dt == PLAIT_INT32) ((int32_t *)buf)[i] *= f->size;
    else cr_assert_fail("the fake sums float32, float64 and int32 only");
  }
  return PLAIT_SUCCESS;
}

/* The same, from send into recv, then scaled by post (float32, float64). */
static plait_result_t f_allreduce_scaled(void *s, const void *send, void *recv, size_t count,
                                         plait_dtype_t dt, plait_op_t op, double post) {
  fake_t *f = s;
  call_t *c = record(f, "allreduce_scaled", send, count * plait_dtype_size(dt));
  c->count = count, c->dtype = dt, c->op = op, c->recv = recv, c->post = post;
  cr_assert_eq(op, PLAIT_OP_SUM, "AVERAGE must reach the transport as SUM");
  for (size_t i = 0; i < count; i++) {
    if (dt == PLAIT_FLOAT32) ((float *)recv)[i] = ((const float *)send)[i] * (float)f->size * (float)post;
    else if (dt == PLAIT_FLOAT64) ((double *)recv)[i] = ((const double *)send)[i] * f->size * post;
    else cr_assert_fail("the fake scales float32 and float64 only");
  }
  return PLAIT_SUCCESS;
}

/* The table's one allreduce: one span, prescale 1.0 (the core prescales in
 * its copy-in pass); recorded as the version-1 entry it stands for. */
static plait_result_t f_allreduce_v2(void *s, const plait_span_t *spans, size_t n,
                                     plait_dtype_t dt, plait_op_t op, double pre, double post) {
  fake_t *f = s;
  cr_assert_eq(n, 1, "the fake has no PLAIT_ALLREDUCE_SPANS");
  cr_assert_eq(pre, 1.0, "the core prescales itself");
  if (f->folds) return f_allreduce_scaled(s, spans[0].src, spans[0].dst, spans[0].count, dt, op, post);
  cr_assert(spans[0].src == spans[0].dst && post == 1.0,
            "a transport without PLAIT_ALLREDUCE_SCALED reduces in place, unscaled");
  return f_allreduce(s, spans[0].dst, spans[0].count, dt, op);
}

static plait_result_t f_allgatherv(void *s, void *buf, const size_t *bytes) {
  fake_t *f = s;
  size_t total = 0;
  for (int r = 0; r < f->size; r++) total += bytes[r];
  call_t *c = record(f, "allgatherv", buf, total);
  if (f->fail_with) return f->fail_with;
  for (size_t i = 0, off = 0; (int)i < f->size; off += bytes[i++]) /* every rank: 0xA0 + rank */
    if (bytes[i]) memset((char *)buf + off, 0xA0 + (int)i, bytes[i]);
  (void)c;
  return PLAIT_SUCCESS;
}

static plait_result_t f_broadcast(void *s, void *buf, size_t bytes, int root) {
  fake_t *f = s;
  record(f, "broadcast", buf, bytes)->root = root;
  if (f->fail_with) return f->fail_with;
  memset(buf, 0x5A, bytes); /* root's data */
  return PLAIT_SUCCESS;
}

static plait_result_t f_barrier(void *s) {
  record(s, "barrier", NULL, 0);
  return PLAIT_SUCCESS;
}

static plait_result_t f_mem_alloc(void *s, size_t bytes, void **ptr) {
  fake_t *f = s;
  f->allocs++;
  f->alloc_bytes = bytes;
  *ptr = malloc(bytes ? bytes : 1);
  memset(*ptr, 0xEE, bytes); /* garbage the executor must overwrite */
  return *ptr ? PLAIT_SUCCESS : PLAIT_ERR_NO_MEMORY;
}

static plait_result_t f_mem_free(void *s, void *ptr) {
  ((fake_t *)s)->frees++;
  free(ptr);
  return PLAIT_SUCCESS;
}

static plait_result_t f_mem_copy(void *s, void *dst, const void *src, size_t bytes,
                                 plait_copy_kind_t kind) {
  record(s, "mem_copy", src, bytes)->kind = kind;
  memcpy(dst, src, bytes);
  return PLAIT_SUCCESS;
}

static const plait_transport_t kFake = {
    .abi_version = PLAIT_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(plait_transport_t),
    .name = "fake",
    .last_error = f_last_error,
    .allreduce = f_allreduce_v2,
    .allgatherv = f_allgatherv,
    .broadcast = f_broadcast,
    .barrier = f_barrier,
    .mem_alloc = f_mem_alloc,
    .mem_free = f_mem_free,
    .mem_copy = f_mem_copy,
};

/* A transport that folds (PLAIT_ALLREDUCE_SCALED). */
static plait_transport_t kFolding;

/* ------------------------------------------------------------- fixture */

static fake_t F;
static plait_exec_t X;
static plait_table_t T = {.mu = PTHREAD_MUTEX_INITIALIZER};
static plait_namemap_t local;
static plait_counters_t S;

static void start_with(const plait_transport_t *t, int rank, int size) {
  memset(&F, 0, sizeof F);
  F.size = size;
  cr_assert_eq(plait_table_open(&T), PLAIT_SUCCESS);
  cr_assert_eq(plait_namemap_init(&local), 0);
  plait_exec_init(&X, rank, size, t, &F, &T, &local);
  plait_counters_init(&S);
  X.stats = &S; /* the engine's counters; no timeline */
  X.threshold = 1 << 20;
}

static void start(int rank, int size) { start_with(&kFake, rank, size); }

static void start_folding(int rank, int size) {
  kFolding = kFake;
  kFolding.allreduce_flags = PLAIT_ALLREDUCE_SCALED;
  start_with(&kFolding, rank, size);
  F.folds = 1;
}

static void stop(void) {
  plait_exec_free(&X);
  cr_assert_eq(F.allocs, F.frees, "the fusion buffer is freed with the executor");
  plait_namemap_free(&local);
  plait_table_destroy(&T);
  plait_counters_destroy(&S);
  for (int i = 0; i < F.ncalls; i++) free(F.calls[i].seen);
}

/* A submitted allreduce of count elements: in the local map and the table. */
static plait_entry_t *submit(const char *name, plait_coll_t coll, plait_dtype_t dt, void *in,
                             void *out, int64_t count, plait_op_t op, double pre, double post,
                             plait_handle_t **h) {
  plait_entry_t *e = calloc(1, sizeof *e);
  e->name = strdup(name);
  e->meta = (plait_meta_t){.coll = (uint8_t)coll, .dtype = (uint8_t)dt, .op = (uint8_t)op,
                           .ndim = 1, .device = -1, .prescale = pre, .postscale = post};
  e->meta.shape[0] = count;
  e->input = (plait_tensor_t){.struct_size = sizeof(plait_tensor_t), .data = in, .dtype = dt,
                              .device = -1, .ndim = 1, .shape = {count}};
  e->output = e->input;
  e->output.data = out;
  *h = e->handle = plait_handle_new(coll, 1, NULL);
  cr_assert_eq(plait_table_submit(&T, &e, 1), PLAIT_SUCCESS);
  cr_assert_eq(plait_table_drain(&T), e);
  cr_assert_eq(plait_namemap_put(&local, name, e), 0);
  return e;
}

/* A response of kind coll naming the n tensors. */
static plait_response_t response(plait_coll_t coll, int n, const char *const *names) {
  plait_response_t r = {.coll = (uint8_t)coll, .n = (uint32_t)n, .join_rank = -1};
  r.e = calloc((size_t)n, sizeof *r.e);
  for (int i = 0; i < n; i++) {
    r.e[i].name = strdup(names[i]);
    r.e[i].cache_id = r.e[i].assign_id = -1;
  }
  return r;
}

/* h's result (and message), then releases it. */
static plait_result_t finished(plait_handle_t *h, char *msg, size_t cap) {
  int done = 0;
  cr_assert_eq(plait_poll(h, &done), PLAIT_SUCCESS);
  cr_assert(done, "the handle should be finished");
  plait_result_t rc = plait_wait(h, 0);
  if (msg) snprintf(msg, cap, "%s", rc ? plait_last_error() : "");
  plait_release(h);
  return rc;
}

/* ---------------------------------------------------------------- tests */

Test(exec, single_allreduce_runs_in_place_without_the_fusion_buffer) {
  start(0, 3);
  float v[5] = {1, 2, 3, 4, 5};
  plait_handle_t *h;
  submit("w", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, v, v, 5, PLAIT_OP_SUM, 1, 1, &h);
  const char *names[] = {"w"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_eq(F.ncalls, 1, "one allreduce, no copy: %d calls", F.ncalls);
  cr_assert_str_eq(F.calls[0].what, "allreduce");
  cr_assert_eq(F.calls[0].buf, v, "in place, in the caller's buffer");
  cr_assert_eq(F.calls[0].count, 5);
  cr_assert_eq(F.allocs, 0);
  for (int i = 0; i < 5; i++) cr_assert_eq(v[i], 3.0f * (float)(i + 1));
  cr_assert_eq(finished(h, NULL, 0), PLAIT_SUCCESS);
  cr_assert_null(plait_namemap_get(&local, "w"), "finished entries leave the local map");
  cr_assert_null(plait_namemap_get(&T.inflight, "w"), "and the table: the name is free again");
  plait_response_free(&r);
  stop();
}

Test(exec, single_allreduce_copies_then_scales_and_averages) {
  start(1, 4);
  double in[3] = {1, 2, 4}, out[3] = {0};
  plait_handle_t *h;
  submit("g", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT64, in, out, 3, PLAIT_OP_AVERAGE, 0.5, 3.0, &h);
  const char *names[] = {"g"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_str_eq(F.calls[F.ncalls - 1].what, "allreduce");
  cr_assert_eq(F.calls[F.ncalls - 1].op, PLAIT_OP_SUM);
  double *seen = (double *)F.calls[F.ncalls - 1].seen;
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(seen[i], in[i] * 0.5, "prescaled before the collective: %g", seen[i]);
    /* sum of 4 ranks, then postscale / size: x * 0.5 * 4 * (3 / 4) */
    cr_assert_eq(out[i], in[i] * 0.5 * 4 * (3.0 / 4), "out[%d] = %g", i, out[i]);
  }
  cr_assert_eq(in[2], 4, "the input is not touched");
  cr_assert_eq(finished(h, NULL, 0), PLAIT_SUCCESS);
  plait_response_free(&r);
  stop();
}

Test(exec, integer_average_truncates_once) {
  start(0, 3);
  int32_t v[3] = {7, -7, 2};
  plait_handle_t *h;
  submit("i", PLAIT_COLL_ALLREDUCE, PLAIT_INT32, v, v, 3, PLAIT_OP_AVERAGE, 1, 1, &h);
  const char *names[] = {"i"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_eq(v[0], 7, "(7 * 3) / 3: %d", v[0]);
  cr_assert_eq(v[1], -7);
  cr_assert_eq(v[2], 2);
  cr_assert_eq(finished(h, NULL, 0), PLAIT_SUCCESS);
  plait_response_free(&r);
  stop();
}

/* Three tensors fused: the transport gets one buffer laid out as
 * plait_fusion_layout_add says, padding zeroed, prescale applied. */
Test(exec, fused_allreduce_lays_out_the_buffer_as_the_planner_does) {
  start(0, 2);
  enum { A = 3, B = 17, C = 1 };
  float a[A], b[B], c[C], ob[B];
  for (int i = 0; i < A; i++) a[i] = (float)(i + 1);
  for (int i = 0; i < B; i++) b[i] = (float)(100 + i);
  c[0] = -8;
  plait_handle_t *h[3];
  submit("a", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, a, a, A, PLAIT_OP_SUM, 2.0, 0.25, &h[0]);
  submit("b", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, b, ob, B, PLAIT_OP_SUM, 2.0, 0.25, &h[1]);
  submit("c", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, c, c, C, PLAIT_OP_SUM, 2.0, 0.25, &h[2]);
  const char *names[] = {"a", "b", "c"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 3, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  /* the layout rank 0's planner computed for these three */
  plait_fusion_layout_t lay = {0};
  uint64_t off[3] = {plait_fusion_layout_add(&lay, A * 4), plait_fusion_layout_add(&lay, B * 4),
                     plait_fusion_layout_add(&lay, C * 4)};
  cr_assert_eq(F.ncalls, 1, "one collective for three tensors");
  call_t *k = &F.calls[0];
  cr_assert_eq(k->count * 4, lay.size, "the transport got %zu bytes, the plan has %llu",
               k->count * 4, (unsigned long long)lay.size);
  cr_assert_eq(F.alloc_bytes, lay.size);
  const float *seen = (const float *)k->seen;
  for (int i = 0; i < A; i++) cr_assert_eq(seen[off[0] / 4 + i], 2.0f * (float)(i + 1));
  for (int i = 0; i < B; i++) cr_assert_eq(seen[off[1] / 4 + i], 2.0f * (float)(100 + i));
  cr_assert_eq(seen[off[2] / 4], -16.0f);
  for (size_t p = A * 4; p < off[1]; p++) cr_assert_eq(k->seen[p], 0, "padding byte %zu", p);
  /* sum of 2 ranks, postscale 0.25: x * 2 * 2 * 0.25 = x */
  for (int i = 0; i < A; i++) cr_assert_eq(a[i], (float)(i + 1), "a[%d] = %g", i, a[i]);
  for (int i = 0; i < B; i++) cr_assert_eq(ob[i], (float)(100 + i), "b[%d] = %g", i, ob[i]);
  cr_assert_eq(b[0], 100.0f, "b's input is not touched");
  cr_assert_eq(c[0], -8.0f);
  for (int i = 0; i < 3; i++) cr_assert_eq(finished(h[i], NULL, 0), PLAIT_SUCCESS);
  plait_stats_t st = plait_stats_snapshot(&S);
  cr_assert_eq(st.responses, 1);
  cr_assert_eq(st.fused_responses, 1);
  cr_assert_eq(st.fused_tensors, 3);
  cr_assert_eq(st.bytes, (A + B + C) * 4, "bytes counted without the padding: %llu",
               (unsigned long long)st.bytes);
  cr_assert_eq(st.tensors, 3);
  plait_response_free(&r);
  stop();
}

/* With a piece size (ofi's 1 MiB), a fused response goes through the buffer
 * a piece at a time: each piece holds the members that fit in it (a member
 * larger than a piece alone), starts at the buffer's start, and is reduced
 * by its own collective; the buffer is as large as the largest piece. */
/* The piece size is the transport's own trait (fusion_piece), never a
 * decision by its name. */
Test(exec, piece_size_is_the_transports_trait) {
  plait_transport_t t = kFake;
  t.fusion_piece = 4096;
  start_with(&t, 0, 2);
  cr_assert_eq(X.piece, 4096);
  stop();
  start(0, 2);
  cr_assert_eq(X.piece, 0, "no trait: the whole response at once");
  stop();
}

Test(exec, fused_allreduce_runs_in_pieces_from_the_buffers_start) {
  start(0, 2);
  X.piece = 256;
  enum { N = 6 };
  const int64_t count[N] = {24, 40, 100, 10, 10, 30}; /* 100 floats: more than a piece */
  float in[N][100], out[N][100];
  const char *names[N] = {"p0", "p1", "p2", "p3", "p4", "p5"};
  plait_handle_t *h[N];
  for (int t = 0; t < N; t++) {
    for (int i = 0; i < count[t]; i++) in[t][i] = (float)(t * 1000 + i);
    submit(names[t], PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, in[t], t % 2 ? out[t] : in[t],
           count[t], PLAIT_OP_AVERAGE, 1.0, 1.0, &h[t]);
  }
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, N, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  /* the pieces, from the planner's layout */
  plait_fusion_layout_t lay = {0};
  uint64_t off[N + 1];
  for (int t = 0; t < N; t++) off[t] = plait_fusion_layout_add(&lay, (uint64_t)count[t] * 4);
  off[N] = lay.size;
  int pieces = 0;
  size_t largest = 0;
  for (int lo = 0, hi; lo < N; lo = hi, pieces++) {
    for (hi = lo + 1; hi < N && off[hi + 1] - off[lo] <= 256; hi++) {
    }
    call_t *k = &F.calls[pieces];
    cr_assert_eq(k->bytes, off[hi] - off[lo], "piece %d: %zu bytes", pieces, k->bytes);
    cr_assert(k->bytes <= 256 || hi == lo + 1, "only a member larger than a piece exceeds it");
    cr_assert_eq(k->buf, F.calls[0].buf, "every piece starts at the buffer's start");
    if (k->bytes > largest) largest = k->bytes;
  }
  cr_assert_eq(F.ncalls, pieces, "one collective per piece (%d), got %d", pieces, F.ncalls);
  cr_assert_geq(pieces, 3);
  cr_assert_eq(F.alloc_bytes, largest, "the buffer holds the largest piece, not the response");
  cr_assert_lt(largest, lay.size);
  for (int t = 0; t < N; t++) { /* the average of 2 equal ranks: the input */
    const float *got = t % 2 ? out[t] : in[t];
    for (int i = 0; i < count[t]; i++)
      cr_assert_eq(got[i], (float)(t * 1000 + i), "tensor %d [%d] = %g", t, i, got[i]);
    cr_assert_eq(finished(h[t], NULL, 0), PLAIT_SUCCESS);
  }
  plait_stats_t st = plait_stats_snapshot(&S);
  cr_assert_eq(st.responses, 1, "still one response");
  cr_assert_eq(st.fused_tensors, N);
  plait_response_free(&r);
  stop();
}

Test(exec, fusion_buffer_is_reused_and_regrown) {
  start(0, 2);
  float x[64] = {0}, y[64] = {0};
  const char *names[] = {"x", "y"};
  size_t sizes[3] = {10, 4, 60};
  size_t allocs[3] = {1, 1, 2};
  for (int round = 0; round < 3; round++) {
    plait_handle_t *h[2];
    submit("x", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, x, x, (int64_t)sizes[round], PLAIT_OP_SUM, 1,
           1, &h[0]);
    submit("y", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, y, y, (int64_t)sizes[round], PLAIT_OP_SUM, 1,
           1, &h[1]);
    plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 2, names);
    cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
    cr_assert_eq(F.allocs, allocs[round], "round %d: %zu allocations", round, F.allocs);
    cr_assert_eq(F.frees, allocs[round] - 1, "the old buffer is freed before a bigger one");
    for (int i = 0; i < 2; i++) cr_assert_eq(finished(h[i], NULL, 0), PLAIT_SUCCESS);
    plait_response_free(&r);
  }
  stop();
}

/* A joined rank stands in with the op's identity, in the same layout, and a
 * lone tensor it stands in for is not padded (the others pass its count). */
Test(exec, joined_rank_contributes_identities) {
  start(2, 3);
  X.joined = 1;
  const char *names[] = {"m", "n"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 2, names);
  for (int i = 0; i < 2; i++) {
    r.e[i].has_meta = 1;
    r.e[i].meta = (plait_meta_t){.coll = PLAIT_COLL_ALLREDUCE, .dtype = PLAIT_FLOAT32,
                                 .op = PLAIT_OP_MAX, .ndim = 1, .device = -1, .prescale = 1,
                                 .postscale = 1, .shape = {i ? 5 : 3}};
  }
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_eq(F.ncalls, 1);
  cr_assert_eq(F.calls[0].count, (64 + 64) / 4);
  const float *seen = (const float *)F.calls[0].seen;
  for (int i = 0; i < 3; i++) cr_assert(isinf(seen[i]) && seen[i] < 0, "max's identity: -inf");
  for (int i = 0; i < 5; i++) cr_assert(isinf(seen[16 + i]) && seen[16 + i] < 0);
  plait_response_free(&r);
  r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  r.e[0].has_meta = 1;
  r.e[0].meta = (plait_meta_t){.coll = PLAIT_COLL_ALLREDUCE, .dtype = PLAIT_FLOAT32,
                               .op = PLAIT_OP_SUM, .ndim = 1, .device = -1, .prescale = 1,
                               .postscale = 1, .shape = {3}};
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_eq(F.calls[1].count, 3, "a lone stand-in passes the tensor's own count");
  for (int i = 0; i < 3; i++) cr_assert_eq(((const float *)F.calls[1].seen)[i], 0.0f);
  plait_response_free(&r);
  stop();
}

Test(exec, error_response_fails_the_entries_without_the_transport) {
  start(0, 2);
  float v[2] = {1, 2};
  plait_handle_t *h;
  submit("bad", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, v, v, 2, PLAIT_OP_SUM, 1, 1, &h);
  const char *names[] = {"bad"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  r.status = PLAIT_ERR_MISMATCH;
  r.message = strdup("allreduce 'bad': mismatched dtype across ranks: ...");
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS, "an agreed failure is not the job's");
  cr_assert_eq(F.ncalls, 0);
  char msg[512];
  cr_assert_eq(finished(h, msg, sizeof msg), PLAIT_ERR_MISMATCH);
  cr_assert(strstr(msg, "mismatched dtype"), "message: %s", msg);
  cr_assert_eq(v[0], 1.0f);
  plait_response_free(&r);
  stop();
}

Test(exec, transport_failure_names_tensor_and_transport) {
  start(0, 2);
  float v[2] = {1, 2};
  plait_handle_t *h;
  plait_entry_t *e = submit("t", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, v, v, 2, PLAIT_OP_SUM, 1, 1,
                            &h);
  const char *names[] = {"t"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  F.fail_with = PLAIT_ERR_TRANSPORT;
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_ERR_TRANSPORT);
  const char *msg = plait_last_error();
  cr_assert(strstr(msg, "'t'") && strstr(msg, "fake") && strstr(msg, "the fake link broke"),
            "message: %s", msg);
  /* the caller (coordinator) fails what is left, as it does on a lost job */
  cr_assert_eq(plait_namemap_get(&local, "t"), e);
  plait_exec_finish(&X, e, PLAIT_ERR_TRANSPORT, msg);
  cr_assert_eq(finished(h, NULL, 0), PLAIT_ERR_TRANSPORT);
  plait_response_free(&r);
  stop();
}

Test(exec, response_for_a_tensor_never_submitted_is_a_protocol_error) {
  start(1, 2);
  const char *names[] = {"ghost"};
  plait_response_t r = response(PLAIT_COLL_BROADCAST, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_ERR_PROTOCOL);
  const char *msg = plait_last_error();
  cr_assert(strstr(msg, "'ghost'") && strstr(msg, "rank 1"), "message: %s", msg);
  cr_assert_eq(F.ncalls, 0);
  plait_response_free(&r);
  stop();
}

Test(exec, broadcast_and_allgather) {
  start(1, 3);
  unsigned char buf[6] = {1, 2, 3, 4, 5, 6}, rows[4] = {9, 9, 9, 9};
  plait_handle_t *hb, *hg;
  plait_entry_t *eb = submit("bc", PLAIT_COLL_BROADCAST, PLAIT_UINT8, buf, buf, 6, PLAIT_OP_SUM,
                             1, 1, &hb);
  eb->meta.root = 2;
  const char *nb[] = {"bc"};
  plait_response_t r = response(PLAIT_COLL_BROADCAST, 1, nb);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_str_eq(F.calls[0].what, "broadcast");
  cr_assert_eq(F.calls[0].root, 2);
  cr_assert_eq(F.calls[0].bytes, 6);
  cr_assert_eq(buf[5], 0x5A);
  cr_assert_eq(finished(hb, NULL, 0), PLAIT_SUCCESS);
  plait_response_free(&r);

  submit("ag", PLAIT_COLL_ALLGATHER, PLAIT_UINT8, rows, rows, 4, PLAIT_OP_SUM, 1, 1, &hg);
  const char *ng[] = {"ag"};
  r = response(PLAIT_COLL_ALLGATHER, 1, ng);
  int64_t dims[3] = {2, 4, 1};
  r.dims = malloc(sizeof dims);
  memcpy(r.dims, dims, sizeof dims);
  r.ndims = 3;
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  call_t *k = &F.calls[1];
  cr_assert_str_eq(k->what, "allgatherv");
  cr_assert_eq(k->bytes, 7);
  cr_assert_eq(memcmp(k->seen + 2, rows, 4), 0, "this rank's rows at rank 1's place");
  plait_tensor_t out;
  cr_assert_eq(plait_wait(hg, 0), PLAIT_SUCCESS);
  cr_assert_eq(plait_handle_output(hg, &out), PLAIT_SUCCESS);
  cr_assert_eq(out.shape[0], 7);
  const unsigned char *o = out.data;
  unsigned char want[7] = {0xA0, 0xA0, 0xA1, 0xA1, 0xA1, 0xA1, 0xA2};
  cr_assert_eq(memcmp(o, want, 7), 0);
  plait_release(hg);
  plait_response_free(&r);
  stop();
}

/* ------------------------------------------------ a transport that folds */

Test(exec, single_allreduce_folds_copy_and_average_into_the_transport) {
  start_folding(1, 4);
  double in[3] = {1, 2, 4}, out[3] = {0};
  plait_handle_t *h;
  submit("g", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT64, in, out, 3, PLAIT_OP_AVERAGE, 1, 3.0, &h);
  const char *names[] = {"g"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_eq(F.ncalls, 1, "one call, no copy in and no pass after: %d calls", F.ncalls);
  cr_assert_str_eq(F.calls[0].what, "allreduce_scaled");
  cr_assert_eq(F.calls[0].buf, in, "the transport reads the input itself");
  cr_assert_eq(F.calls[0].recv, out, "and writes the output");
  cr_assert_eq(F.calls[0].op, PLAIT_OP_SUM);
  cr_assert_eq(F.calls[0].post, 3.0 / 4, "AVERAGE folded into the postscale: %g", F.calls[0].post);
  for (int i = 0; i < 3; i++) cr_assert_eq(out[i], in[i] * 4 * (3.0 / 4), "scaled once");
  cr_assert_eq(F.allocs, 0);
  cr_assert_eq(finished(h, NULL, 0), PLAIT_SUCCESS);
  plait_response_free(&r);
  stop();
}

Test(exec, single_allreduce_prescales_into_the_output_then_folds_in_place) {
  start_folding(0, 2);
  float in[2] = {1, 3}, out[2] = {0};
  plait_handle_t *h;
  submit("p", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, in, out, 2, PLAIT_OP_SUM, 0.5, 1, &h);
  const char *names[] = {"p"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_eq(F.ncalls, 1);
  cr_assert_eq(F.calls[0].buf, out, "prescaled into the output, reduced there");
  cr_assert_eq(F.calls[0].recv, out);
  cr_assert_eq(F.calls[0].post, 1.0);
  cr_assert(out[0] == 1.0f && out[1] == 3.0f, "%g %g", (double)out[0], (double)out[1]);
  cr_assert(in[0] == 1.0f && in[1] == 3.0f, "the input is not touched");
  cr_assert_eq(finished(h, NULL, 0), PLAIT_SUCCESS);
  plait_response_free(&r);
  stop();
}

Test(exec, fused_average_with_a_folding_transport_copies_out_unscaled) {
  start_folding(0, 2);
  float x[3] = {1, 2, 3}, y[2] = {5, 7}, xo[3], yo[2];
  plait_handle_t *h[2];
  submit("x", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, x, xo, 3, PLAIT_OP_AVERAGE, 1, 1, &h[0]);
  submit("y", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, y, yo, 2, PLAIT_OP_AVERAGE, 1, 1, &h[1]);
  const char *names[] = {"x", "y"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 2, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_eq(F.ncalls, 1);
  cr_assert_str_eq(F.calls[0].what, "allreduce_scaled");
  cr_assert_eq(F.calls[0].buf, F.calls[0].recv, "in place in the fusion buffer");
  cr_assert_eq(F.calls[0].post, 0.5);
  for (int i = 0; i < 3; i++) cr_assert_eq(xo[i], x[i], "x[%d]: the average of equal values", i);
  for (int i = 0; i < 2; i++) cr_assert_eq(yo[i], y[i], "y[%d]", i);
  for (int i = 0; i < 2; i++) cr_assert_eq(finished(h[i], NULL, 0), PLAIT_SUCCESS);
  plait_response_free(&r);
  stop();
}

/* A job whose fused responses grow a little at a time does not reallocate
 * (and fault in a fresh buffer) at every step. */
Test(exec, fusion_buffer_grows_at_least_twofold) {
  start(0, 2);
  static float x[64], y[64];
  const char *names[] = {"x", "y"};
  const size_t sizes[4] = {16, 17, 33, 49}; /* slots of 64, 128, 192, 256 bytes */
  for (int round = 0; round < 4; round++) {
    plait_handle_t *h[2];
    submit("x", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, x, x, (int64_t)sizes[round], PLAIT_OP_SUM, 1,
           1, &h[0]);
    submit("y", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, y, y, (int64_t)sizes[round], PLAIT_OP_SUM, 1,
           1, &h[1]);
    plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 2, names);
    cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
    for (int i = 0; i < 2; i++) cr_assert_eq(finished(h[i], NULL, 0), PLAIT_SUCCESS);
    plait_response_free(&r);
  }
  /* 128 bytes, then 256 (twice 128), then 512 (twice 256, over the 384
   * needed), which the last round's 512 fits */
  cr_assert_eq(F.allocs, 3, "%zu allocations for buffers of 128, 256, 384, 512 bytes", F.allocs);
  cr_assert_eq(F.alloc_bytes, 512);
  stop();
}

/* ------------------------------------------- the vote carried with the data */

/* The fake's vote_allreduce: the other ranks vote F_OTHERS_VOTE; the first
 * F_TIMEOUTS calls time out (left pending, as ofi's may); the MIN of 1 sums
 * like f_allreduce_scaled, and recv is written only then. */
static uint8_t F_OTHERS_VOTE = 1;
static int F_TIMEOUTS;
static plait_result_t f_vote_allreduce(void *s, uint8_t mine, const void *send, void *recv,
                                       size_t count, plait_dtype_t dt, plait_op_t op,
                                       double post, uint8_t *out, double wait_s) {
  fake_t *f = s;
  call_t *c = record(f, "vote_allreduce", send, send ? count * plait_dtype_size(dt) : 0);
  c->count = count, c->dtype = dt, c->op = op, c->recv = recv, c->post = post;
  if (f->fail_with) return f->fail_with;
  if (F_TIMEOUTS > 0 && wait_s >= 0) {
    F_TIMEOUTS--;
    return PLAIT_ERR_TIMEOUT;
  }
  *out = mine && F_OTHERS_VOTE;
  if (*out) return f_allreduce_scaled(s, send, recv, count, dt, op, post);
  return PLAIT_SUCCESS;
}

static plait_transport_t kCarrying;
static void start_carrying(int rank, int size) {
  kCarrying = kFake;
  kCarrying.vote_allreduce = f_vote_allreduce;
  start_with(&kCarrying, rank, size);
  F_OTHERS_VOTE = 1;
  F_TIMEOUTS = 0;
}

static plait_meta_t carry_meta(int64_t elements) {
  plait_meta_t m = {.coll = PLAIT_COLL_ALLREDUCE, .dtype = PLAIT_FLOAT32, .op = PLAIT_OP_SUM,
                    .ndim = 1, .device = -1, .prescale = 1.0, .postscale = 1.0};
  m.shape[0] = elements;
  return m;
}

/* Which cached rounds carry the vote: the transport has vote_allreduce (a
 * table from before it has not), a host allreduce of the global set, no
 * prescale, at most 64 KiB. */
Test(exec, which_rounds_carry_the_vote) {
  start_carrying(0, 2);
  plait_meta_t m = carry_meta(1024);
  cr_assert(plait_exec_carries(&X, &m));
  m.shape[0] = PLAIT_EXEC_CARRY_MAX_BYTES / 4;
  cr_assert(plait_exec_carries(&X, &m), "64 KiB exactly");
  m.shape[0]++;
  cr_assert_not(plait_exec_carries(&X, &m), "more than 64 KiB");
  m = carry_meta(1024);
  m.prescale = 0.5;
  cr_assert_not(plait_exec_carries(&X, &m), "prescale writes the tensor before the vote is known");
  m = carry_meta(1024);
  m.device = 0;
  cr_assert_not(plait_exec_carries(&X, &m), "device memory");
  m = carry_meta(1024);
  m.pset = 3;
  cr_assert_not(plait_exec_carries(&X, &m), "another process set");
  m = carry_meta(1024);
  m.postscale = 2.0;
  m.op = PLAIT_OP_AVERAGE;
  cr_assert(plait_exec_carries(&X, &m), "postscale and AVERAGE are the transport's, at the end");
  kCarrying.struct_size = offsetof(plait_transport_t, vote_allreduce);
  m = carry_meta(1024);
  cr_assert_not(plait_exec_carries(&X, &m), "a table from before vote_allreduce");
  kCarrying.vote_allreduce = NULL;
  kCarrying.struct_size = sizeof(plait_transport_t);
  cr_assert_not(plait_exec_carries(&X, &m), "no vote_allreduce");
  stop();
}

/* A carried round: one transport call that reads the input and writes the
 * output only when every rank voted 1, the entry finished then and only
 * then; left pending (a caller's short wait) and taken up; a rank holding
 * nothing takes part with NULL tensors. */
Test(exec, a_carried_round_writes_only_what_every_rank_agreed_to) {
  start_carrying(0, 3);
  float in[4] = {1, 2, 3, 4}, out[4] = {-1, -1, -1, -1};
  plait_handle_t *h;
  submit("c", PLAIT_COLL_ALLREDUCE, PLAIT_FLOAT32, in, out, 4, PLAIT_OP_AVERAGE, 1, 3.0, &h);
  const char *names[] = {"c"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  plait_exec_carry_t k = {1, -1, 0, 0};
  X.carry = &k;

  F_OTHERS_VOTE = 0; /* another rank votes 0: nothing written, nothing finished */
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_eq(F.ncalls, 1, "one transport call, no copy: %d", F.ncalls);
  cr_assert_str_eq(F.calls[0].what, "vote_allreduce");
  cr_assert_eq(F.calls[0].buf, in, "the input, read by the transport");
  cr_assert_eq(F.calls[0].recv, out);
  cr_assert_eq(F.calls[0].op, PLAIT_OP_SUM, "AVERAGE reaches the transport as SUM");
  cr_assert_eq(F.calls[0].post, 3.0 / 3, "postscale / size");
  cr_assert_not(k.agreed);
  for (int i = 0; i < 4; i++) cr_assert_eq(out[i], -1.0f, "out[%d] written without agreement", i);
  cr_assert_not_null(plait_namemap_get(&local, "c"), "not finished: rank 0 will plan it");
  int done = 1;
  cr_assert_eq(plait_poll(h, &done), PLAIT_SUCCESS);
  cr_assert_not(done);

  F_OTHERS_VOTE = 1; /* a caller's wait of 0 s ends first: pending, then done */
  F_TIMEOUTS = 1;
  k = (plait_exec_carry_t){1, 0.0, 0, 0};
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert(k.pending);
  cr_assert_not(k.agreed);
  cr_assert_not_null(plait_namemap_get(&local, "c"));
  k = (plait_exec_carry_t){1, -1, 0, 0};
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  cr_assert_not(k.pending);
  cr_assert(k.agreed);
  for (int i = 0; i < 4; i++) cr_assert_eq(out[i], in[i] * 3 * 1.0f, "out[%d] = %g", i, out[i]);
  cr_assert_eq(in[3], 4, "the input is not touched");
  cr_assert_eq(finished(h, NULL, 0), PLAIT_SUCCESS);
  cr_assert_null(plait_namemap_get(&local, "c"));

  /* a rank with nothing of the round: NULL tensors, the cache's shape */
  int before = F.ncalls;
  plait_meta_t m = carry_meta(4);
  k = (plait_exec_carry_t){0, -1, 0, 0};
  cr_assert_eq(plait_exec_carry_absent(&X, &m), PLAIT_SUCCESS);
  cr_assert_eq(F.ncalls, before + 1);
  cr_assert_null(F.calls[before].buf);
  cr_assert_null(F.calls[before].recv);
  cr_assert_eq(F.calls[before].count, 4);
  cr_assert_not(k.agreed);

  F.fail_with = PLAIT_ERR_TRANSPORT; /* a failure names the round and the transport */
  k = (plait_exec_carry_t){0, -1, 0, 0};
  cr_assert_eq(plait_exec_carry_absent(&X, &m), PLAIT_ERR_TRANSPORT);
  cr_assert(strstr(plait_last_error(), "carrying the vote") &&
                strstr(plait_last_error(), "the fake link broke"),
            "%s", plait_last_error());
  X.carry = NULL;
  plait_response_free(&r);
  stop();
}
