/*
 * The devsim test transport itself (tests/plugins/fixtures/devsim.c), driven
 * directly through its table on one rank, without the core: so that a
 * failure of the device-path suites (tests/core/test_device_*.c) is the
 * core's, not the simulator's. batch_copy's identities (bit patterns of
 * every dtype x op) and scaling (bit for bit the core's kernel), its
 * refusals, ready() waiting for a user stream, notify behind the gate,
 * interrupt and finalize failing held completions, and DEVSIM_SYNC=1.
 * Each Criterion test runs in a process of its own, so the plugin is
 * loaded afresh with the test's DEVSIM_* environment.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEVSIM_API_LOADER
#include "../fixtures/devsim.h"
#include "plait/transport.h"
#include "util/reduce.h"
#include "../../harness/transport_calls.h"

#define SO PLAIT_TEST_PLUGIN_DIR "/libplait-transport-devsim.so"

static const plait_transport_t *T;
static devsim_api_t dv;
static void *S;

static plait_result_t bs_allgather(void *c, const void *s, size_t b, void *r) {
  (void)c;
  memcpy(r, s, b);
  return PLAIT_SUCCESS;
}
static plait_result_t bs_broadcast(void *c, void *b, size_t n, int root) {
  (void)c, (void)b, (void)n, (void)root;
  return PLAIT_SUCCESS;
}
static plait_result_t bs_barrier(void *c) {
  (void)c;
  return PLAIT_SUCCESS;
}
static void logf_(int level, const char *sub, const char *file, int line, const char *fmt, ...) {
  (void)level, (void)sub, (void)file, (void)line, (void)fmt;
}
static plait_bootstrap_t boot = {sizeof boot, NULL, 0, 1, bs_allgather, bs_broadcast, bs_barrier};

/* Loads the plugin (env already set) and starts it on one rank. */
static void start(void) {
  FILE *f = fopen(SO, "rb");
  if (!f) cr_skip_test("no " SO);
  fclose(f);
  f = fopen(PLAIT_TEST_LIB_DIR "/libplait-transport-gloo.so", "rb");
  if (!f) cr_skip_test("the gloo plugin was not built: devsim runs on it");
  fclose(f);
  char err[256];
  cr_assert_eq(devsim_api_load(SO, &dv, err, sizeof err), 0, "%s", err);
  void *so = dlopen(SO, RTLD_NOW);
  T = dlsym(so, PLAIT_TRANSPORT_SYMBOL);
  cr_assert_not_null(T);
  plait_transport_init_args_t a = {sizeof a, 0, 1, 0, 1, 0, 1, &boot, logf_, PLAIT_LOG_OFF, 10.0,
                                   plait_reduce, plait_scale, plait_divide, "127.0.0.1",
                                   plait_reduce_scale};
  cr_assert_eq(T->init(&a, &S), PLAIT_SUCCESS, "init: %s", T->last_error(NULL));
}

typedef struct waiter {
  atomic_int calls;
  atomic_int rc;
  char msg[256];
} waiter_t;

static void on_done(void *ctx, plait_result_t rc, const char *msg) {
  waiter_t *w = ctx;
  if (msg) snprintf(w->msg, sizeof w->msg, "%s", msg);
  atomic_store(&w->rc, rc);
  atomic_fetch_add(&w->calls, 1);
}

static int await_calls(waiter_t *w, double s) {
  for (int i = 0; i < (int)(s * 1000) && !atomic_load(&w->calls); i++) usleep(1000);
  return atomic_load(&w->calls);
}

/* Enqueues a notify and waits for its done; its rc. */
static plait_result_t drain(void) {
  if (!T->notify) return PLAIT_SUCCESS;
  waiter_t w = {0};
  cr_assert_eq(T->notify(S, on_done, &w), PLAIT_SUCCESS);
  cr_assert(await_calls(&w, 30), "done never came");
  return atomic_load(&w.rc);
}

TestSuite(devsim_plugin);

Test(devsim_plugin, device_memory_is_disguised_and_counted) {
  start();
  long l0 = dv.live_allocations();
  void *p = NULL;
  cr_assert_eq(T->mem_alloc(S, 64, &p), PLAIT_SUCCESS);
  cr_expect((uintptr_t)p & DEVSIM_DISGUISE, "%p is not disguised", p);
  cr_expect_eq(dv.live_allocations(), l0 + 1);
  cr_expect_eq(T->device(S), 0, "device() is the local rank");
  cr_expect_eq(T->mem_free(S, p), PLAIT_SUCCESS);
  cr_expect_eq(dv.live_allocations(), l0);
  cr_expect_eq(T->mem_free(S, (void *)0x1000), PLAIT_ERR_INVALID_ARGUMENT);
  T->finalize(S);
}

Test(devsim_plugin, identities_are_the_ops_bit_patterns) {
  start();
  static const struct {
    plait_dtype_t d;
    plait_op_t op;
    uint64_t bits;
  } want[] = {
      {PLAIT_FLOAT16, PLAIT_OP_MAX, 0xfc00}, {PLAIT_FLOAT16, PLAIT_OP_MIN, 0x7c00},
      {PLAIT_FLOAT16, PLAIT_OP_PRODUCT, 0x3c00}, {PLAIT_BFLOAT16, PLAIT_OP_MAX, 0xff80},
      {PLAIT_BFLOAT16, PLAIT_OP_MIN, 0x7f80}, {PLAIT_BFLOAT16, PLAIT_OP_PRODUCT, 0x3f80},
      {PLAIT_INT8, PLAIT_OP_MAX, 0x80}, {PLAIT_UINT8, PLAIT_OP_MIN, 0xff},
      {PLAIT_INT32, PLAIT_OP_MIN, 0x7fffffff}, {PLAIT_INT64, PLAIT_OP_MAX, 0x8000000000000000ull},
      {PLAIT_FLOAT32, PLAIT_OP_SUM, 0}, {PLAIT_FLOAT32, PLAIT_OP_AVERAGE, 0},
      {PLAIT_FLOAT64, PLAIT_OP_MAX, 0xfff0000000000000ull}, {PLAIT_BOOL, PLAIT_OP_MIN, 1},
      {PLAIT_BOOL, PLAIT_OP_MAX, 0}, {PLAIT_BOOL, PLAIT_OP_PRODUCT, 1},
      {PLAIT_UINT16, PLAIT_OP_PRODUCT, 1}};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    size_t sz = plait_dtype_size(want[k].d);
    void *d = dv.alloc(3 * sz);
    plait_span_t sp = {d, NULL, 3};
    cr_assert_eq(T->batch_copy(S, &sp, 1, want[k].d, want[k].op,
                                 want[k].d == PLAIT_BOOL ? 1.0 : 2.0), PLAIT_SUCCESS, "%s",
                 T->last_error(S));
    cr_assert_eq(drain(), PLAIT_SUCCESS);
    unsigned char got[24];
    cr_assert_eq(dv.to_host(got, d, 3 * sz), 0);
    for (int i = 0; i < 3; i++) {
      uint64_t v = 0;
      memcpy(&v, got + i * sz, sz);
      cr_expect_eq(v, want[k].bits, "%s %s: element %d is 0x%llx", plait_dtype_name(want[k].d),
                   plait_op_name(want[k].op), i, (unsigned long long)v);
    }
    dv.free(d);
  }
  T->finalize(S);
}

Test(devsim_plugin, scaling_is_the_cores_kernel_bit_for_bit) {
  start();
  uint16_t h[7] = {0x3c00, 0x4000, 0x3555, 0xc200, 0x7bff, 0x0001, 0x8000}, want[7], got[7];
  void *src = dv.alloc(sizeof h), *dst = dv.alloc(sizeof h);
  dv.to_device(src, h, sizeof h);
  for (int dt = PLAIT_FLOAT16; dt <= PLAIT_BFLOAT16; dt++) {
    plait_span_t sp[2] = {{dst, src, 4}, {(char *)dst + 8, (char *)src + 8, 3}};
    cr_assert_eq(T->batch_copy(S, sp, 2, dt, PLAIT_OP_SUM, 1.0 / 3.0), PLAIT_SUCCESS);
    cr_assert_eq(drain(), PLAIT_SUCCESS);
    plait_scale(dt, want, h, 7, 1.0 / 3.0);
    dv.to_host(got, dst, sizeof got);
    cr_expect_eq(memcmp(got, want, sizeof got), 0, "%s scaled differently", plait_dtype_name(dt));
  }
  /* in place, and a copy (factor 1) */
  plait_span_t in = {src, src, 7};
  cr_assert_eq(T->batch_copy(S, &in, 1, PLAIT_FLOAT16, PLAIT_OP_SUM, 3.0), PLAIT_SUCCESS);
  plait_span_t cp = {dst, src, 7};
  cr_assert_eq(T->batch_copy(S, &cp, 1, PLAIT_FLOAT16, PLAIT_OP_SUM, 1.0), PLAIT_SUCCESS);
  cr_assert_eq(drain(), PLAIT_SUCCESS);
  plait_scale(PLAIT_FLOAT16, want, h, 7, 3.0);
  dv.to_host(got, dst, sizeof got);
  cr_expect_eq(memcmp(got, want, sizeof got), 0, "in place then copied");
  dv.free(src), dv.free(dst);
  T->finalize(S);
}

Test(devsim_plugin, batch_copy_refuses_what_the_contract_forbids) {
  start();
  void *d = dv.alloc(64);
  float host[4];
  plait_span_t overlap[2] = {{d, NULL, 4}, {(char *)d + 8, NULL, 4}};
  cr_expect_eq(T->batch_copy(S, overlap, 2, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0),
               PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(T->last_error(S), "overlaps"), "%s", T->last_error(S));
  plait_span_t hostp = {host, NULL, 4};
  cr_expect_eq(T->batch_copy(S, &hostp, 1, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0),
               PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(T->last_error(S), "not in devsim device memory"), "%s", T->last_error(S));
  plait_span_t past = {d, NULL, 17}; /* 68 bytes of a 64-byte block */
  cr_expect_eq(T->batch_copy(S, &past, 1, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0),
               PLAIT_ERR_INVALID_ARGUMENT);
  plait_span_t b = {d, d, 4};
  cr_expect_eq(T->batch_copy(S, &b, 1, PLAIT_BOOL, PLAIT_OP_SUM, 2.0), PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect_eq(tc_allreduce(T, S, host, 4, PLAIT_FLOAT32, PLAIT_OP_SUM), PLAIT_ERR_INVALID_ARGUMENT);
  dv.free(d);
  T->finalize(S);
}

Test(devsim_plugin, ready_waits_for_the_user_stream) {
  start();
  float old[4] = {1, 1, 1, 1}, fresh[4] = {5, 6, 7, 8}, got[4];
  void *a = dv.alloc(sizeof old), *b = dv.alloc(sizeof old), *s = dv.stream_create();
  dv.to_device(a, old, sizeof old);
  cr_assert_eq(dv.stream_enqueue_write(s, a, fresh, sizeof fresh, 300), 0);
  cr_assert_eq(T->ready(S, s), PLAIT_SUCCESS);
  plait_span_t sp = {b, a, 4};
  cr_assert_eq(T->batch_copy(S, &sp, 1, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0), PLAIT_SUCCESS);
  cr_assert_eq(tc_allreduce(T, S, b, 4, PLAIT_FLOAT32, PLAIT_OP_SUM), PLAIT_SUCCESS, "%s",
               T->last_error(S));
  cr_assert_eq(drain(), PLAIT_SUCCESS);
  dv.to_host(got, b, sizeof got);
  cr_expect_eq(memcmp(got, fresh, sizeof got), 0, "read %g, not the stream's write", got[0]);
  cr_expect_eq(dv.ready_calls(s), 1);
  dv.stream_destroy(s), dv.free(a), dv.free(b);
  T->finalize(S);
}

Test(devsim_plugin, the_gate_holds_done_and_interrupt_fails_it) {
  start();
  waiter_t w = {0};
  dv.gate(1);
  cr_assert_eq(T->notify(S, on_done, &w), PLAIT_SUCCESS);
  usleep(200000);
  cr_expect_eq(atomic_load(&w.calls), 0, "done came through a closed gate");
  cr_assert_eq(T->interrupt(S, PLAIT_ERR_PEER_LOST, "rank 3 was lost"), PLAIT_SUCCESS);
  cr_assert(await_calls(&w, 30), "interrupt did not release the held done");
  cr_expect_eq(atomic_load(&w.rc), PLAIT_ERR_PEER_LOST);
  cr_expect(strstr(w.msg, "rank 3 was lost"), "%s", w.msg);
  cr_expect_eq(T->barrier(S), PLAIT_ERR_PEER_LOST, "later work fails at once");
  waiter_t w2 = {0};
  cr_assert_eq(T->notify(S, on_done, &w2), PLAIT_SUCCESS);
  cr_assert(await_calls(&w2, 30));
  cr_expect_eq(atomic_load(&w2.rc), PLAIT_ERR_PEER_LOST, "a later done fails too");
  dv.gate(0);
  T->finalize(S);
}

Test(devsim_plugin, finalize_fails_held_completions_with_shutdown) {
  start();
  waiter_t w = {0};
  dv.gate(1);
  cr_assert_eq(T->notify(S, on_done, &w), PLAIT_SUCCESS);
  T->finalize(S);
  cr_expect_eq(atomic_load(&w.calls), 1, "finalize did not call the outstanding done");
  cr_expect_eq(atomic_load(&w.rc), PLAIT_ERR_SHUTDOWN);
  dv.gate(0);
}

Test(devsim_plugin, sync_mode_has_no_notify_and_blocks) {
  setenv("DEVSIM_SYNC", "1", 1);
  setenv("DEVSIM_NO_BATCH", "1", 1);
  start();
  cr_expect_null(T->notify, "DEVSIM_SYNC=1 leaves notify out");
  cr_expect_null(T->batch_copy, "DEVSIM_NO_BATCH=1 leaves batch_copy out");
  float old[2] = {1, 2}, fresh[2] = {3, 4}, got[2];
  void *a = dv.alloc(sizeof old), *s = dv.stream_create();
  dv.to_device(a, old, sizeof old);
  dv.stream_enqueue_write(s, a, fresh, sizeof fresh, 200);
  cr_assert_eq(T->ready(S, s), PLAIT_SUCCESS);
  cr_assert_eq(tc_allreduce(T, S, a, 2, PLAIT_FLOAT32, PLAIT_OP_SUM), PLAIT_SUCCESS);
  dv.to_host(got, a, sizeof got); /* no wait: the call blocked until done */
  cr_expect_eq(memcmp(got, fresh, sizeof got), 0);
  dv.stream_destroy(s), dv.free(a);
  T->finalize(S);
}
