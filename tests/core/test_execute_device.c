/*
 * The device-memory path of execution (execute_device.c, pending.c) against
 * a fake in-process device transport whose "device" memory faults when the
 * core touches it: one memfd mapped twice, PROT_NONE at the addresses the
 * core gets and read-write at an alias only the fake uses. Any host read or
 * write of device memory by the core crashes the test.
 *
 * Checked: one batch_copy per phase of a fused response (members with the
 * prescale, identities for a joined rank's members and for every padding
 * gap, then the copy-out with postscale / size for AVERAGE), ready() once
 * per distinct stream, an unfused tensor out of place through batch_copy,
 * allgather and reducescatter outputs allocated with mem_alloc and freed
 * with mem_free at plait_release, and asynchronous completion (notify):
 * handles complete only when done comes and the coordinator reaps, and a
 * failing done fails the job naming the operation, tensor and transport.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/execute/execute.h"
#include "engine/negotiate/fusion.h"
#include "engine/submit/handle.h"
#include "engine/execute/pending.h"
#include "engine/observe/stats.h"

/* ------------------------------------------------ fake device transport */

enum { ARENA = 1 << 20, MAXB = 16 };
typedef struct dev {
  int size;
  char *none, *rw; /* the same pages: the core's view (faults), the fake's */
  size_t used;
  int allocs, frees;
  int batches;
  size_t nspans[MAXB];
  double factor[MAXB];
  plait_span_t spans[MAXB][64];
  int collectives;
  void *streams[8];
  int nready;
  plait_done_fn done;
  void *done_ctx;
  int notified;
} fakedev_t;

static fakedev_t D;

static void *rw(const void *p) { return p ? D.rw + ((const char *)p - D.none) : NULL; }
static int in_arena(const void *p) {
  return (const char *)p >= D.none && (const char *)p < D.none + ARENA;
}

static const char *d_last_error(void *s) {
  (void)s;
  return "the fake device broke";
}

static plait_result_t d_alloc(void *s, size_t bytes, void **p) {
  (void)s;
  size_t at = (D.used + 63) / 64 * 64;
  cr_assert_leq(at + bytes, ARENA);
  D.used = at + bytes;
  *p = D.none + at;
  memset(rw(*p), 0xEE, bytes); /* garbage the executor must overwrite */
  D.allocs++;
  return PLAIT_SUCCESS;
}

static plait_result_t d_free(void *s, void *p) {
  (void)s;
  cr_assert(in_arena(p), "mem_free of device memory only");
  D.frees++;
  return PLAIT_SUCCESS;
}

static plait_result_t d_copy(void *s, void *dst, const void *src, size_t n, plait_copy_kind_t k) {
  (void)s;
  cr_assert_eq(k, PLAIT_COPY_DEVICE_TO_DEVICE);
  memcpy(rw(dst), rw(src), n);
  return PLAIT_SUCCESS;
}

static plait_result_t d_batch(void *s, const plait_span_t *sp, size_t n, plait_dtype_t dt,
                              plait_op_t op, double factor) {
  (void)s;
  cr_assert_eq(dt, PLAIT_FLOAT32, "the fake copies float32 only");
  cr_assert_lt(D.batches, MAXB);
  cr_assert_leq(n, 64);
  int b = D.batches++;
  D.nspans[b] = n;
  D.factor[b] = factor;
  memcpy(D.spans[b], sp, n * sizeof *sp);
  for (size_t i = 0; i < n; i++) {
    cr_assert(in_arena(sp[i].dst) && (!sp[i].src || in_arena(sp[i].src)));
    float *dst = rw(sp[i].dst);
    const float *src = rw(sp[i].src);
    float id = op == PLAIT_OP_MAX ? -INFINITY : op == PLAIT_OP_MIN ? INFINITY
               : op == PLAIT_OP_PRODUCT ? 1.0f : 0.0f;
    for (size_t j = 0; j < sp[i].count; j++)
      dst[j] = src ? (float)(src[j] * factor) : id;
  }
  return PLAIT_SUCCESS;
}

/* One span in place, unscaled: no PLAIT_ALLREDUCE_* flags. */
static plait_result_t d_allreduce(void *s, const plait_span_t *spans, size_t n, plait_dtype_t dt,
                                  plait_op_t op, double pre, double post) {
  (void)s;
  cr_assert_eq(n, 1);
  cr_assert(spans[0].src == spans[0].dst && pre == 1.0 && post == 1.0);
  void *buf = spans[0].dst;
  size_t count = spans[0].count;
  cr_assert(in_arena(buf));
  cr_assert_eq(dt, PLAIT_FLOAT32);
  D.collectives++;
  float *v = rw(buf);
  for (size_t i = 0; i < count && op == PLAIT_OP_SUM; i++) v[i] *= (float)D.size;
  return PLAIT_SUCCESS;
}

static plait_result_t d_allgatherv(void *s, void *buf, const size_t *bytes) {
  (void)s;
  cr_assert(in_arena(buf));
  D.collectives++;
  char *b = rw(buf);
  for (int r = 0, off = 0; r < D.size; off += (int)bytes[r++])
    if (r != 1) memset(b + off, 0xA0 + r, bytes[r]); /* this rank is 1 in these tests */
  return PLAIT_SUCCESS;
}

static plait_result_t d_reducescatter(void *s, const void *send, void *recv, const size_t *counts,
                                      plait_dtype_t dt, plait_op_t op) {
  (void)s, (void)op, (void)dt;
  cr_assert(in_arena(send) && in_arena(recv));
  D.collectives++;
  const float *in = rw(send);
  float *out = rw(recv);
  size_t at = 0;
  for (int r = 0; r < 1; r++) at += counts[r]; /* rank 1: after rank 0's block */
  for (size_t i = 0; i < counts[1]; i++) out[i] = in[at + i] * (float)D.size;
  return PLAIT_SUCCESS;
}

static plait_result_t d_ready(void *s, void *stream) {
  (void)s;
  cr_assert_lt(D.nready, 8);
  D.streams[D.nready++] = stream;
  return PLAIT_SUCCESS;
}

static plait_result_t d_notify(void *s, plait_done_fn done, void *ctx) {
  (void)s;
  cr_assert_null(D.done, "one notify at a time in these tests");
  D.done = done, D.done_ctx = ctx;
  D.notified++;
  return PLAIT_SUCCESS;
}

static int interrupts;
static plait_result_t d_interrupt(void *s, plait_result_t rc, const char *why) {
  (void)s, (void)why;
  cr_assert_neq(rc, PLAIT_SUCCESS);
  interrupts++;
  return PLAIT_SUCCESS;
}

static int d_device(void *s) {
  (void)s;
  return 0;
}

static const plait_transport_t kDev = {
    .abi_version = PLAIT_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(plait_transport_t),
    .name = "fakedev",
    .caps = PLAIT_CAP_DEVICE_MEMORY,
    .last_error = d_last_error,
    .allreduce = d_allreduce,
    .allgatherv = d_allgatherv,
    .reducescatter = d_reducescatter,
    .mem_alloc = d_alloc,
    .mem_free = d_free,
    .mem_copy = d_copy,
    .device = d_device,
    .batch_copy = d_batch,
    .ready = d_ready,
};
static plait_transport_t kAsync;

/* ------------------------------------------------------------- fixture */

static plait_exec_t X;
static plait_table_t T = {.mu = PTHREAD_MUTEX_INITIALIZER};
static plait_namemap_t local;
static plait_counters_t S;

static void start_with(const plait_transport_t *t, int rank, int size) {
  memset(&D, 0, sizeof D);
  D.size = size;
  int fd = memfd_create("plait-fake-device", 0);
  cr_assert_geq(fd, 0);
  cr_assert_eq(ftruncate(fd, ARENA), 0);
  D.none = mmap(NULL, ARENA, PROT_NONE, MAP_SHARED, fd, 0);
  D.rw = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  cr_assert(D.none != MAP_FAILED && D.rw != MAP_FAILED);
  cr_assert_eq(plait_table_open(&T), PLAIT_SUCCESS);
  cr_assert_eq(plait_namemap_init(&local), 0);
  plait_exec_init(&X, rank, size, t, &D, &T, &local);
  plait_counters_init(&S);
  X.stats = &S;
  X.threshold = 1 << 16;
}

static void stop(void) {
  plait_exec_free(&X);
  cr_assert_eq(D.allocs, D.frees, "every device buffer is freed: %d allocs, %d frees", D.allocs,
               D.frees);
  plait_namemap_free(&local);
  plait_table_destroy(&T);
  plait_counters_destroy(&S);
  munmap(D.none, ARENA);
  munmap(D.rw, ARENA);
}

/* count float32 elements of "device" memory holding first, first + 1, ... */
static float *dev_floats(size_t count, float first) {
  void *p;
  d_alloc(NULL, count * sizeof(float), &p);
  D.allocs--; /* the test's own, not the executor's */
  float *v = rw(p);
  for (size_t i = 0; i < count; i++) v[i] = first + (float)i;
  return p;
}

static plait_entry_t *submit(const char *name, plait_coll_t coll, void *in, void *out,
                             int64_t count, plait_op_t op, double pre, double post, void *stream,
                             plait_handle_t **h) {
  plait_entry_t *e = calloc(1, sizeof *e);
  e->name = strdup(name);
  e->meta = (plait_meta_t){.coll = (uint8_t)coll, .dtype = PLAIT_FLOAT32, .op = (uint8_t)op,
                           .ndim = 1, .device = 0, .prescale = pre, .postscale = post};
  e->meta.shape[0] = count;
  e->input = (plait_tensor_t){.struct_size = sizeof(plait_tensor_t), .data = in,
                              .dtype = PLAIT_FLOAT32, .device = 0, .ndim = 1, .shape = {count}};
  e->output = e->input;
  e->output.data = out;
  e->stream = stream;
  *h = e->handle = plait_handle_new(coll, 1, NULL);
  cr_assert_eq(plait_table_submit(&T, &e, 1), PLAIT_SUCCESS);
  cr_assert_eq(plait_table_drain(&T), e);
  cr_assert_eq(plait_namemap_put(&local, name, e), 0);
  return e;
}

static plait_response_t response(plait_coll_t coll, int n, const char *const *names) {
  plait_response_t r = {.coll = (uint8_t)coll, .n = (uint32_t)n, .join_rank = -1};
  r.e = calloc((size_t)n, sizeof *r.e);
  for (int i = 0; i < n; i++) {
    r.e[i].name = strdup(names[i]);
    r.e[i].cache_id = r.e[i].assign_id = -1;
  }
  return r;
}

static int is_done(plait_handle_t *h) {
  int done = 0;
  cr_assert_eq(plait_poll(h, &done), PLAIT_SUCCESS);
  return done;
}

/* ---------------------------------------------------------------- tests */

/* Two members (3 and 5 floats) and a joined rank's stand-in (2 floats) in
 * one fused AVERAGE with prescale 2 on 4 ranks. */
Test(exec_device, fused_response_is_one_batch_in_one_collective_one_batch_out) {
  start_with(&kDev, 1, 4);
  X.joined = 1;
  float *a = dev_floats(3, 1), *b = dev_floats(5, 10), *ao = dev_floats(3, 0), *bo = dev_floats(5, 0);
  int s1, s2;
  plait_handle_t *ha, *hb;
  submit("a", PLAIT_COLL_ALLREDUCE, a, ao, 3, PLAIT_OP_AVERAGE, 2, 1, &s1, &ha);
  submit("b", PLAIT_COLL_ALLREDUCE, b, bo, 5, PLAIT_OP_AVERAGE, 2, 1, &s2, &hb);
  const char *names[] = {"a", "j", "b"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 3, names);
  r.e[1].has_meta = 1;
  r.e[1].meta = (plait_meta_t){.coll = PLAIT_COLL_ALLREDUCE, .dtype = PLAIT_FLOAT32,
                               .op = PLAIT_OP_AVERAGE, .ndim = 1, .device = 0, .prescale = 2,
                               .postscale = 1, .shape = {2}};
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(D.nready, 2, "ready once per distinct stream: %d", D.nready);
  cr_assert(D.streams[0] == &s1 && D.streams[1] == &s2);
  cr_assert_eq(D.batches, 2, "one batch in, one batch out: %d", D.batches);
  cr_assert_eq(D.collectives, 1);
  /* in: each member (j: its identity) and its padding to the next slot */
  cr_assert_eq(D.nspans[0], 6, "%zu spans in", D.nspans[0]);
  cr_assert_eq(D.factor[0], 2.0, "the prescale");
  cr_assert(D.spans[0][0].src == a && D.spans[0][0].count == 3);
  cr_assert(D.spans[0][1].src == NULL && D.spans[0][1].count == (64 - 12) / 4, "padding");
  cr_assert(D.spans[0][2].src == NULL && D.spans[0][2].count == 2, "the joined rank's identity");
  cr_assert(D.spans[0][4].src == b && D.spans[0][4].count == 5);
  cr_assert(D.spans[0][5].src == NULL && D.spans[0][5].count == (64 - 20) / 4, "padding");
  cr_assert_eq(D.nspans[1], 2, "out: the two members");
  cr_assert_eq(D.factor[1], 1.0 / 4, "AVERAGE: postscale / size");
  const float *ra = rw(ao), *rb = rw(bo);
  for (int i = 0; i < 3; i++) cr_assert_eq(ra[i], (float)(1 + i) * 2, "a[%d] = %g", i, ra[i]);
  for (int i = 0; i < 5; i++) cr_assert_eq(rb[i], (float)(10 + i) * 2, "b[%d] = %g", i, rb[i]);
  cr_assert(is_done(ha) && is_done(hb));
  plait_release(ha), plait_release(hb);
  plait_response_free(&r);
  stop();
}

Test(exec_device, single_tensor_out_of_place_and_scaled_through_batch_copy) {
  start_with(&kDev, 0, 2);
  float *in = dev_floats(4, 1), *out = dev_floats(4, 0);
  plait_handle_t *h;
  submit("s", PLAIT_COLL_ALLREDUCE, in, out, 4, PLAIT_OP_SUM, 1, 3, NULL, &h);
  const char *names[] = {"s"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(D.batches, 2, "the copy, then the postscale");
  cr_assert(D.spans[0][0].dst == out && D.spans[0][0].src == in && D.factor[0] == 1.0);
  cr_assert(D.spans[1][0].dst == out && D.spans[1][0].src == out && D.factor[1] == 3.0);
  cr_assert_eq(D.nready, 1, "the legacy default stream (NULL) is a stream too");
  const float *o = rw(out);
  for (int i = 0; i < 4; i++) cr_assert_eq(o[i], (float)(1 + i) * 2 * 3);
  cr_assert_eq(D.allocs, 0, "no fusion buffer");
  plait_release(h);
  plait_response_free(&r);
  stop();
}

Test(exec_device, allgather_and_reducescatter_outputs_are_device_memory_freed_at_release) {
  start_with(&kDev, 1, 3);
  float *rows = dev_floats(2, 7);
  plait_handle_t *hg, *hr;
  submit("ag", PLAIT_COLL_ALLGATHER, rows, rows, 2, PLAIT_OP_SUM, 1, 1, NULL, &hg);
  const char *ng[] = {"ag"};
  plait_response_t r = response(PLAIT_COLL_ALLGATHER, 1, ng);
  int64_t dims[3] = {1, 2, 1};
  r.dims = malloc(sizeof dims);
  memcpy(r.dims, dims, sizeof dims);
  r.ndims = 3;
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS, "%s", plait_last_error());
  plait_tensor_t out;
  cr_assert_eq(plait_handle_output(hg, &out), PLAIT_SUCCESS);
  cr_assert(in_arena(out.data), "the output is the transport's memory");
  cr_assert_eq(out.shape[0], 4);
  cr_assert_eq(((const float *)rw(out.data))[1], 7.0f, "this rank's rows copied on the device");
  cr_assert_eq(((const float *)rw(out.data))[2], 8.0f);
  plait_response_free(&r);

  float *in = dev_floats(6, 1); /* 6 rows on 3 ranks: rank 1 gets rows 2, 3 */
  submit("rs", PLAIT_COLL_REDUCESCATTER, in, in, 6, PLAIT_OP_SUM, 0.5, 2, NULL, &hr);
  const char *nr[] = {"rs"};
  r = response(PLAIT_COLL_REDUCESCATTER, 1, nr);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(D.allocs, 3, "two outputs and the prescaled input");
  cr_assert_eq(D.frees, 1, "the prescaled input is freed with the response");
  cr_assert_eq(plait_handle_output(hr, &out), PLAIT_SUCCESS);
  cr_assert(in_arena(out.data));
  const float *o = rw(out.data);
  cr_assert_eq(o[0], 3 * 0.5f * 3 * 2, "%g", o[0]);
  cr_assert_eq(((const float *)rw(in))[0], 1.0f, "the caller's input is not touched");
  plait_release(hg);
  plait_release(hr);
  cr_assert_eq(D.frees, 3, "plait_release frees the outputs with mem_free");
  plait_response_free(&r);
  stop();
}

Test(exec_device, notify_completes_handles_when_done_comes_and_reap_runs) {
  kAsync = kDev;
  kAsync.notify = d_notify;
  start_with(&kAsync, 0, 2);
  int wake = eventfd(0, EFD_NONBLOCK);
  X.pending = plait_pending_new(wake, 5.0);
  float *v = dev_floats(4, 1);
  plait_handle_t *h;
  submit("n", PLAIT_COLL_ALLREDUCE, v, v, 4, PLAIT_OP_SUM, 1, 1, NULL, &h);
  const char *names[] = {"n"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(D.notified, 1);
  cr_assert(!is_done(h), "not finished before done");
  cr_assert_not_null(plait_namemap_get(&T.inflight, "n"), "the name stays in flight");
  cr_assert_eq(plait_pending_reap(X.pending, &X), PLAIT_SUCCESS);
  cr_assert(!is_done(h), "reap without done finishes nothing");
  D.done(D.done_ctx, PLAIT_SUCCESS, NULL);
  uint64_t woke = 0;
  cr_assert_eq(read(wake, &woke, sizeof woke), (ssize_t)sizeof woke, "done wakes the coordinator");
  cr_assert(!is_done(h), "done only records: the coordinator finishes");
  cr_assert_eq(plait_pending_reap(X.pending, &X), PLAIT_SUCCESS);
  cr_assert(is_done(h));
  cr_assert_eq(plait_wait(h, 0), PLAIT_SUCCESS);
  cr_assert_null(plait_namemap_get(&T.inflight, "n"));
  plait_release(h);
  plait_response_free(&r);

  /* a failing done fails the job like a synchronous failure */
  D.done = NULL;
  submit("f", PLAIT_COLL_ALLREDUCE, v, v, 4, PLAIT_OP_SUM, 1, 1, NULL, &h);
  const char *nf[] = {"f"};
  r = response(PLAIT_COLL_ALLREDUCE, 1, nf);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS);
  D.done(D.done_ctx, PLAIT_ERR_PEER_LOST, "rank 1 went away");
  cr_assert_eq(plait_pending_reap(X.pending, &X), PLAIT_ERR_PEER_LOST);
  const char *msg = plait_last_error();
  cr_assert(strstr(msg, "allreduce 'f' failed in transport 'fakedev': rank 1 went away"), "%s",
            msg);
  plait_exec_settle(&X, PLAIT_ERR_PEER_LOST, msg);
  cr_assert(is_done(h));
  cr_assert_eq(plait_wait(h, 0), PLAIT_ERR_PEER_LOST);
  plait_release(h);
  plait_response_free(&r);
  close(wake);
  stop();
}

/* A plugin that never calls done: the job's failure interrupts it once and
 * waits at most the pending list's timeout; the tensor fails, nothing hangs. */
Test(exec_device, a_done_that_never_comes_is_interrupted_and_bounded) {
  kAsync = kDev;
  kAsync.notify = d_notify;
  kAsync.interrupt = d_interrupt;
  start_with(&kAsync, 0, 2);
  interrupts = 0;
  int wake = eventfd(0, EFD_NONBLOCK);
  X.pending = plait_pending_new(wake, 0.2);
  float *v = dev_floats(4, 1);
  plait_handle_t *h;
  submit("never", PLAIT_COLL_ALLREDUCE, v, v, 4, PLAIT_OP_SUM, 1, 1, NULL, &h);
  const char *names[] = {"never"};
  plait_response_t r = response(PLAIT_COLL_ALLREDUCE, 1, names);
  cr_assert_eq(plait_exec_run(&X, &r), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert(!is_done(h));
  plait_exec_settle(&X, PLAIT_ERR_PEER_LOST, "rank 1 was lost");
  plait_exec_settle(&X, PLAIT_ERR_PEER_LOST, "rank 1 was lost"); /* twice: interrupted once */
  cr_assert_eq(interrupts, 1, "interrupt once per state: %d", interrupts);
  cr_assert(is_done(h), "the tensor fails after the bounded wait");
  cr_assert_eq(plait_wait(h, 0), PLAIT_ERR_PEER_LOST);
  cr_assert(strstr(plait_last_error(), "rank 1 was lost"), "%s", plait_last_error());
  plait_release(h);
  plait_response_free(&r);
  /* the plugin's finalize calls the outstanding done later: still valid */
  D.done(D.done_ctx, PLAIT_ERR_SHUTDOWN, "finalized");
  close(wake);
  stop();
}
