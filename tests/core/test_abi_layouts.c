/*
 * The size-prefix rule of plait.h ("Size-prefixed structs") and transport.h,
 * tested with the first published layout of every size-prefixed struct
 * frozen below: this file is "a program built against the first header".
 *
 * Each first-layout struct is placed so that it ends exactly where a page
 * ends and the next page is PROT_NONE: a library that reads or writes one
 * byte past the caller's struct_size crashes the test, in any build.
 *
 * Do not change the *_v1_t types when plait.h grows: they are the layouts
 * programs were compiled against.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api/struct_size.h"
#include "plait/plait.h"
#include "plait/transport.h"
#include "ranks.h"

/* ------------------------------------------------------------------------ */
/* The first published layouts (plait 0.1.0), frozen                         */
/* ------------------------------------------------------------------------ */

typedef struct {
  size_t struct_size;
  void *data;
  plait_dtype_t dtype;
  int32_t device;
  int32_t ndim;
  int64_t shape[16];
} tensor_v1_t;

typedef struct {
  size_t struct_size;
  double prescale_factor;
  double postscale_factor;
  plait_callback_fn callback;
  void *user_data;
} op_options_v1_t;

typedef struct {
  size_t struct_size;
  uint64_t cycles, busy_cycles, cache_hits, cache_misses, responses, tensors, bytes,
      fused_responses, fused_tensors, fusion_bytes, fusion_capacity, control_messages,
      control_bytes;
  double negotiate_s, copy_in_s, transport_s, copy_out_s;
} stats_v1_t;

typedef struct {
  size_t size;
  void *ctx;
  int rank;
  int nranks;
  plait_result_t (*allgather)(void *, const void *, size_t, void *);
  plait_result_t (*broadcast)(void *, void *, size_t, int);
  plait_result_t (*barrier)(void *);
} bootstrap_v1_t;

typedef struct {
  size_t size;
  int rank, nranks, local_rank, local_size, cross_rank, cross_size;
  const bootstrap_v1_t *bootstrap;
  plait_log_fn log;
  int log_level;
  double timeout_s;
  plait_reduce_fn reduce;
  plait_scale_fn scale;
  plait_divide_fn divide;
  const char *host_address;
} init_args_v1_t;

#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

_Static_assert(END_OF(tensor_v1_t, shape) == PLAIT_TENSOR_SIZE_V1, "PLAIT_TENSOR_SIZE_V1 moved");
_Static_assert(END_OF(op_options_v1_t, user_data) == PLAIT_OP_OPTIONS_SIZE_V1,
               "PLAIT_OP_OPTIONS_SIZE_V1 moved");
_Static_assert(END_OF(stats_v1_t, copy_out_s) == PLAIT_STATS_SIZE_V1, "PLAIT_STATS_SIZE_V1 moved");
_Static_assert(END_OF(bootstrap_v1_t, barrier) == PLAIT_BOOTSTRAP_SIZE_V1,
               "PLAIT_BOOTSTRAP_SIZE_V1 moved");
_Static_assert(END_OF(init_args_v1_t, host_address) == PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1,
               "PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1 moved");

static void single_rank_env(void) {
  plait_test_clear_env();
  plait_test_set_plugin_path();
}

TestSuite(abi, .init = single_rank_env);

/* A zeroed block of `bytes` that ends where a readable page ends; the next
 * page is PROT_NONE. */
static void *at_page_end(size_t bytes) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  cr_assert(bytes <= pg && bytes % 8 == 0);
  char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(p != MAP_FAILED);
  cr_assert_eq(mprotect(p + pg, pg, PROT_NONE), 0);
  return p + pg - bytes;
}

static void unmap_page_end(void *block) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  munmap((void *)((uintptr_t)block / pg * pg), 2 * pg);
}

#define INIT_OK()                                                              \
  do {                                                                         \
    plait_result_t init_rc_ = plait_init();                                    \
    cr_assert_eq(init_rc_, PLAIT_SUCCESS, "plait_init: %s: %s",                \
                 plait_result_name(init_rc_), plait_last_error());             \
  } while (0)

static void fill_v1(tensor_v1_t *t, float *data, int64_t n) {
  t->struct_size = sizeof *t;
  t->data = data;
  t->dtype = PLAIT_FLOAT32;
  t->device = PLAIT_DEVICE_HOST;
  t->ndim = 1;
  t->shape[0] = n;
}

static atomic_int called;
static void count_cb(plait_handle_t *h, plait_result_t rc, void *user) {
  (void)h;
  if (rc == PLAIT_SUCCESS && user == &called) atomic_fetch_add(&called, 1);
}

/* ------------------------------------------------------------------------ */
/* First layouts against this library                                       */
/* ------------------------------------------------------------------------ */

Test(abi, first_layout_offsets_are_unchanged) {
#define SAME(v1, cur, f) cr_expect_eq(offsetof(v1, f), offsetof(cur, f), #cur "." #f " moved")
  SAME(tensor_v1_t, plait_tensor_t, data);
  SAME(tensor_v1_t, plait_tensor_t, dtype);
  SAME(tensor_v1_t, plait_tensor_t, device);
  SAME(tensor_v1_t, plait_tensor_t, ndim);
  SAME(tensor_v1_t, plait_tensor_t, shape);
  SAME(op_options_v1_t, plait_op_options_t, prescale_factor);
  SAME(op_options_v1_t, plait_op_options_t, postscale_factor);
  SAME(op_options_v1_t, plait_op_options_t, callback);
  SAME(op_options_v1_t, plait_op_options_t, user_data);
  SAME(stats_v1_t, plait_stats_t, cycles);
  SAME(stats_v1_t, plait_stats_t, control_bytes);
  SAME(stats_v1_t, plait_stats_t, copy_out_s);
  SAME(bootstrap_v1_t, plait_bootstrap_t, allgather);
  SAME(bootstrap_v1_t, plait_bootstrap_t, barrier);
  SAME(init_args_v1_t, plait_transport_init_args_t, bootstrap);
  SAME(init_args_v1_t, plait_transport_init_args_t, timeout_s);
  SAME(init_args_v1_t, plait_transport_init_args_t, divide);
  SAME(init_args_v1_t, plait_transport_init_args_t, host_address);
#undef SAME
}

Test(abi, first_layout_structs_work_and_nothing_past_them_is_touched, .timeout = 60) {
  INIT_OK();
  float x[4] = {1, 2, 3, 4};
  tensor_v1_t *in = at_page_end(sizeof *in);
  fill_v1(in, x, 4);
  op_options_v1_t *o = at_page_end(sizeof *o);
  *o = (op_options_v1_t){sizeof *o, 2.0, 1.0, count_cb, &called};
  atomic_store(&called, 0);
  plait_handle_t *h = NULL;
  cr_assert_eq(plait_allreduce_async("v1", (const plait_tensor_t *)in, (const plait_tensor_t *)in,
                                     PLAIT_OP_SUM, (const plait_op_options_t *)o, &h),
               PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_wait(h, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(x[0] == 2 && x[3] == 8, "prescale 2 on one rank: %g %g", x[0], x[3]);
  /* the callback runs on the coordinator just after the handle completes */
  for (int i = 0; i < 30000 && atomic_load(&called) == 0; i++) usleep(1000);
  cr_expect_eq(atomic_load(&called), 1, "the first-layout callback and user_data");
  tensor_v1_t *out = at_page_end(sizeof *out);
  cr_expect_eq(plait_handle_output(h, (plait_tensor_t *)out), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_expect(out->data == x && out->shape[0] == 4 && out->struct_size == PLAIT_TENSOR_SIZE_V1);
  plait_release(h);

  /* grouped: arrays of first-layout tensors (stride: their struct_size) */
  float a[2] = {1, 1}, b[3] = {5, 5, 5};
  tensor_v1_t *arr = at_page_end(2 * sizeof *arr);
  fill_v1(&arr[0], a, 2);
  fill_v1(&arr[1], b, 3);
  const char *names[2] = {"v1.a", "v1.b"};
  cr_assert_eq(plait_grouped_allreduce_async(2, names, (const plait_tensor_t *)arr,
                                             (const plait_tensor_t *)arr, PLAIT_OP_SUM,
                                             (const plait_op_options_t *)o, &h),
               PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_wait(h, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(a[1] == 2 && b[2] == 10, "%g %g", a[1], b[2]);
  plait_release(h);

  tensor_v1_t *t1 = at_page_end(sizeof *t1);
  cr_expect_eq(plait_tensor_1d((plait_tensor_t *)t1, x, 4, PLAIT_FLOAT32), PLAIT_SUCCESS);
  cr_expect_eq(t1->struct_size, PLAIT_TENSOR_SIZE_V1);
  stats_v1_t *s = at_page_end(sizeof *s);
  s->struct_size = sizeof *s;
  cr_expect_eq(plait_stats((plait_stats_t *)s), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_geq(s->tensors, 3);
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
  unmap_page_end(in), unmap_page_end(o), unmap_page_end(out), unmap_page_end(arr);
  unmap_page_end(t1), unmap_page_end(s);
}

Test(abi, smaller_than_the_first_layout_is_refused_by_name, .timeout = 30) {
  INIT_OK();
  float x[2] = {1, 2};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 2, PLAIT_FLOAT32);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  plait_handle_t *h = NULL;
  char want[64];
  o.struct_size = PLAIT_OP_OPTIONS_SIZE_V1 - 8;
  cr_expect_eq(plait_allreduce_async("small", &t, &t, PLAIT_OP_SUM, &o, &h),
               PLAIT_ERR_INVALID_ARGUMENT);
  snprintf(want, sizeof want, "is %zu, less than %zu", (size_t)PLAIT_OP_OPTIONS_SIZE_V1 - 8,
           (size_t)PLAIT_OP_OPTIONS_SIZE_V1);
  cr_expect(strstr(plait_last_error(), want) && strstr(plait_last_error(), "plait_op_options_t"),
            "\"%s\"", plait_last_error());
  t.struct_size = PLAIT_TENSOR_SIZE_V1 - 1;
  cr_expect_eq(plait_allreduce_async("small", &t, &t, PLAIT_OP_SUM, NULL, &h),
               PLAIT_ERR_INVALID_ARGUMENT);
  snprintf(want, sizeof want, "is %zu, less than %zu", (size_t)PLAIT_TENSOR_SIZE_V1 - 1,
           (size_t)PLAIT_TENSOR_SIZE_V1);
  cr_expect(strstr(plait_last_error(), want) && strstr(plait_last_error(), "plait_tensor_t"),
            "\"%s\"", plait_last_error());
  t.struct_size = (size_t)1 << 40; /* never set: refused before anything past it is read */
  cr_expect_eq(plait_allreduce_async("small", &t, &t, PLAIT_OP_SUM, NULL, &h),
               PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(plait_last_error(), "is it set"), "\"%s\"", plait_last_error());
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

/* ------------------------------------------------------------------------ */
/* Structs from a newer header                                                */
/* ------------------------------------------------------------------------ */

typedef struct {
  plait_tensor_t t;
  uint64_t future; /* a field this library does not know */
} tensor_next_t;

typedef struct {
  plait_op_options_t o;
  uint64_t future;
} options_next_t;

Test(abi, larger_structs_with_zero_new_fields_are_accepted, .timeout = 30) {
  INIT_OK();
  float a[2] = {1, 2}, b[2] = {3, 4};
  tensor_next_t arr[2];
  memset(arr, 0, sizeof arr);
  plait_tensor_1d(&arr[0].t, a, 2, PLAIT_FLOAT32);
  plait_tensor_1d(&arr[1].t, b, 2, PLAIT_FLOAT32);
  arr[0].t.struct_size = arr[1].t.struct_size = sizeof arr[0];
  options_next_t on = {PLAIT_OP_OPTIONS_INIT, 0};
  on.o.struct_size = sizeof on;
  on.o.postscale_factor = 3.0;
  const char *names[2] = {"next.a", "next.b"};
  plait_handle_t *h = NULL;
  /* the arrays' stride is their struct_size, not this library's sizeof */
  cr_assert_eq(plait_grouped_allreduce_async(2, names, &arr[0].t, &arr[0].t, PLAIT_OP_SUM, &on.o,
                                             &h),
               PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_wait(h, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(a[0] == 3 && a[1] == 6 && b[0] == 9 && b[1] == 12, "%g %g %g %g", a[0], a[1], b[0],
            b[1]);
  plait_release(h);
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

Test(abi, larger_structs_with_a_new_field_set_are_refused, .timeout = 30) {
  INIT_OK();
  float x[2] = {1, 2};
  tensor_next_t tn;
  memset(&tn, 0, sizeof tn);
  plait_tensor_1d(&tn.t, x, 2, PLAIT_FLOAT32);
  tn.t.struct_size = sizeof tn;
  options_next_t on = {PLAIT_OP_OPTIONS_INIT, 0};
  on.o.struct_size = sizeof on;
  on.future = 7;
  plait_handle_t *h = NULL;
  char want[32];
  snprintf(want, sizeof want, "byte %zu", offsetof(options_next_t, future));
  cr_expect_eq(plait_allreduce_async("next", &tn.t, &tn.t, PLAIT_OP_SUM, &on.o, &h),
               PLAIT_ERR_UNSUPPORTED);
  cr_expect(strstr(plait_last_error(), "opts") && strstr(plait_last_error(), want) &&
                strstr(plait_last_error(), "plait_op_options_t"),
            "\"%s\"", plait_last_error());
  on.future = 0;
  tn.future = (uint64_t)1 << 56;
  snprintf(want, sizeof want, "byte %zu", offsetof(tensor_next_t, future) + 7);
  cr_expect_eq(plait_allreduce_async("next", &tn.t, &tn.t, PLAIT_OP_SUM, &on.o, &h),
               PLAIT_ERR_UNSUPPORTED);
  cr_expect(strstr(plait_last_error(), "input") && strstr(plait_last_error(), want),
            "\"%s\"", plait_last_error());
  /* nothing was queued: the same name goes through once the field is zero */
  tn.future = 0;
  cr_assert_eq(plait_allreduce_async("next", &tn.t, &tn.t, PLAIT_OP_SUM, &on.o, &h),
               PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(plait_wait(h, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  plait_release(h);
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

/* ------------------------------------------------------------------------ */
/* The reader itself: a struct that grew, read from its first layout        */
/* ------------------------------------------------------------------------ */

typedef struct {
  size_t struct_size;
  double a;
  int32_t b;    /* the first layout ends here */
  int32_t c;    /* appended: default 42 */
  double d;     /* appended: default 0.5 */
} grown_t;

Test(abi, fields_after_the_callers_layout_take_their_defaults) {
  size_t v1 = END_OF(grown_t, b);
  /* the caller's struct: 24 bytes (its first layout rounded to 8), at a page end */
  char *theirs = at_page_end(24);
  grown_t head = {v1, 1.5, -3, 0, 0};
  memcpy(theirs, &head, v1);
  grown_t out = {sizeof out, 0, 0, 42, 0.5};
  cr_assert_eq(plait_struct_read("fn", "arg", "grown_t", theirs, v1, sizeof out, &out),
               PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(out.struct_size == sizeof out && out.a == 1.5 && out.b == -3, "copied");
  cr_expect(out.c == 42 && out.d == 0.5, "defaults kept: c %d d %g", out.c, out.d);
  grown_t before = out;
  memcpy(theirs, &(size_t){v1 - 1}, sizeof(size_t));
  cr_expect_eq(plait_struct_read("fn", "arg", "grown_t", theirs, v1, sizeof out, &out),
               PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect(!memcmp(&before, &out, sizeof out), "out changed on error");
  unmap_page_end(theirs);
}

/* ------------------------------------------------------------------------ */
/* plait_op_options_t.stream, appended after process_set                      */
/* ------------------------------------------------------------------------ */

typedef struct {
  size_t struct_size;
  double prescale_factor, postscale_factor;
  plait_callback_fn callback;
  void *user_data;
  int32_t process_set; /* this layout ends here (padded to 8) */
} op_options_pset_t;

_Static_assert(offsetof(plait_op_options_t, stream) >= sizeof(op_options_pset_t),
               "stream must lie past the layout that ended with process_set");

Test(abi, options_stream_is_read_and_older_layouts_get_null) {
  cr_expect_eq(offsetof(op_options_pset_t, process_set),
               offsetof(plait_op_options_t, process_set));
  plait_op_options_t out;
  /* a caller built before stream: its struct ends at a page end */
  op_options_pset_t *old = at_page_end(sizeof *old);
  *old = (op_options_pset_t){sizeof *old, 2.0, 3.0, NULL, NULL, 0};
  memset(&out, 0xAB, sizeof out);
  cr_assert_eq(plait_op_options_read("fn", (const plait_op_options_t *)old, &out), PLAIT_SUCCESS,
               "%s", plait_last_error());
  cr_expect(out.stream == NULL, "an older struct gets stream NULL, not %p", out.stream);
  cr_expect(out.prescale_factor == 2.0 && out.postscale_factor == 3.0);
  /* the current layout: stream is read */
  int token;
  plait_op_options_t mine = PLAIT_OP_OPTIONS_INIT;
  cr_expect(mine.stream == NULL, "PLAIT_OP_OPTIONS_INIT sets stream NULL");
  mine.stream = &token;
  cr_assert_eq(plait_op_options_read("fn", &mine, &out), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(out.stream == &token, "stream read: %p", out.stream);
  /* NULL options: the defaults */
  cr_assert_eq(plait_op_options_read("fn", NULL, &out), PLAIT_SUCCESS);
  cr_expect(out.stream == NULL);
  unmap_page_end(old);
}

/* ------------------------------------------------------------------------ */
/* Plugins read init args of the first layout                                 */
/* ------------------------------------------------------------------------ */

static plait_result_t no_reduce(plait_dtype_t d, plait_op_t o, void *dst, const void *a,
                                const void *b, size_t n) {
  (void)d, (void)o, (void)dst, (void)a, (void)b, (void)n;
  return PLAIT_SUCCESS;
}
static plait_result_t no_divide(plait_dtype_t d, void *dst, const void *src, size_t n,
                                uint32_t k) {
  (void)d, (void)dst, (void)src, (void)n, (void)k;
  return PLAIT_SUCCESS;
}

static void plugin_takes_first_layout_args(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/libplait-transport-%s.so", PLAIT_TEST_LIB_DIR, name);
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    cr_log_warn("skipped: the %s plugin is not built here (%s)", name, dlerror());
    return;
  }
  const plait_transport_t *t = dlsym(so, PLAIT_TRANSPORT_SYMBOL);
  cr_assert(t != NULL, "%s: no %s", name, PLAIT_TRANSPORT_SYMBOL);
  init_args_v1_t *a = at_page_end(sizeof *a);
  *a = (init_args_v1_t){sizeof *a, 0, 1, 0, 1, 0, 1, NULL, NULL, PLAIT_LOG_OFF, 10.0,
                        no_reduce, NULL, no_divide, "127.0.0.1"};
  void *st = NULL;
  plait_result_t rc = t->init((const plait_transport_init_args_t *)a, &st);
  cr_expect_eq(rc, PLAIT_SUCCESS, "%s init with first-layout args: %s", name,
               t->last_error(NULL));
  if (rc == PLAIT_SUCCESS) t->finalize(st);
  a->size = PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1 - 8;
  rc = t->init((const plait_transport_init_args_t *)a, &st);
  cr_expect_eq(rc, PLAIT_ERR_INVALID_ARGUMENT, "%s: a smaller struct", name);
  cr_expect(strstr(t->last_error(NULL), "first layout") != NULL, "%s: \"%s\"", name,
            t->last_error(NULL));
  unmap_page_end(a);
  dlclose(so);
}

Test(abi, gloo_plugin_takes_first_layout_init_args) { plugin_takes_first_layout_args("gloo"); }
Test(abi, ofi_plugin_takes_first_layout_init_args) { plugin_takes_first_layout_args("ofi"); }
