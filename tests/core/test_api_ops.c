/*
 * Bad input to every operation of plait.h ("Tensors and operations"), table
 * driven: each row is one call with one thing wrong; it must return the
 * documented code, say in plait_last_error() which argument or problem it
 * was, leave *handle unwritten, queue nothing (the same call made right, with
 * the same name, then succeeds) and never call its callback.
 *
 * Single-rank jobs with the default transport (gloo); each Test runs in its
 * own forked process (Criterion), so every test starts uninitialized. The
 * checks that need an operation to stay in flight, or a rank count that a
 * dimension does not divide by, run on 2 real ranks (tests/harness/ranks.h).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plait/plait.h"
#include "ranks.h"

/* ------------------------------------------------------------------------ */
/* Environment                                                               */
/* ------------------------------------------------------------------------ */

/* Removes every variable that would make this process part of a bigger job
 * or change plait's configuration, then points plait at the built plugins. */
static void single_rank_env(void) {
  plait_test_clear_env();
  plait_test_set_plugin_path();
}

TestSuite(ops, .init = single_rank_env);
TestSuite(ops_2ranks, .init = single_rank_env);

#define INIT_OK()                                                              \
  do {                                                                         \
    plait_result_t init_rc_ = plait_init();                                    \
    cr_assert_eq(init_rc_, PLAIT_SUCCESS, "plait_init: %s: %s",                \
                 plait_result_name(init_rc_), plait_last_error());             \
  } while (0)

/* 1 when word occurs in text as a whole identifier (not inside a longer one). */
static int is_ident(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
static int has_word(const char *text, const char *word) {
  size_t n = strlen(word);
  for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
    int before = p > text && is_ident(p[-1]) && is_ident(word[0]);
    int after = is_ident(p[n]) && is_ident(word[n - 1]);
    if (!before && !after) return 1;
  }
  return 0;
}

/* Callbacks: the bad calls carry bad_cb (never to be called), the calls made
 * right afterwards carry good_cb (called once each). */
static atomic_int bad_calls, good_calls;
static void bad_cb(plait_handle_t *h, plait_result_t rc, void *user) {
  (void)h, (void)rc, (void)user;
  atomic_fetch_add(&bad_calls, 1);
}
static void good_cb(plait_handle_t *h, plait_result_t rc, void *user) {
  (void)h, (void)user;
  if (rc == PLAIT_SUCCESS) atomic_fetch_add(&good_calls, 1);
}

/* ------------------------------------------------------------------------ */
/* One call, described by what is wrong with it                              */
/* ------------------------------------------------------------------------ */

typedef enum {
  FN_ALLREDUCE, FN_GROUPED, FN_ALLGATHER, FN_BROADCAST, FN_ALLTOALL, FN_REDUCESCATTER,
  FN_BARRIER, FN_JOIN, FN_COUNT_
} fn_t;

static const char *const fn_names[] = {
    "plait_allreduce_async", "plait_grouped_allreduce_async", "plait_allgather_async",
    "plait_broadcast_async", "plait_alltoall_async",          "plait_reducescatter_async",
    "plait_barrier_async",   "plait_join_async"};

/* The tensor argument's name in plait.h, as messages should give it. */
static const char *tensor_arg(fn_t fn) { return fn == FN_BROADCAST ? "tensor" : "input"; }
static int named(fn_t fn) { return fn != FN_BARRIER && fn != FN_JOIN; }

typedef enum { NAME_OK, NAME_NULL, NAME_EMPTY, NAME_LONG, NAME_RESERVED } name_mut_t;
typedef enum {
  T_OK, T_NULL, T_STRUCT_SMALL, T_STRUCT_ZERO, T_DTYPE_BIG, T_DTYPE_NEG, T_NDIM_NEG, T_NDIM_17,
  T_SHAPE_NEG, T_SHAPE_NEG_LAST, T_DATA_NULL, T_DEVICE_0, T_DEVICE_NEG2, T_TOO_BIG, T_SCALAR,
  T_BOOL
} tensor_mut_t;
typedef enum { OUT_OK, OUT_NULL, OUT_STRUCT_SMALL, OUT_DTYPE, OUT_COUNT, OUT_NDIM_17 } out_mut_t;
typedef enum {
  OPT_OK, OPT_NULL, OPT_STRUCT_SMALL, OPT_STRUCT_ZERO, OPT_PRE_NAN, OPT_POST_INF, OPT_PRE_NEGINF,
  OPT_POST_NAN, OPT_SCALE2
} opt_mut_t;
typedef enum { SPLITS_NULL, SPLITS_NEG, SPLITS_SUM_LOW, SPLITS_SUM_HIGH } splits_mut_t;
typedef enum { G_OK, G_COUNT0, G_COUNT_HUGE, G_NAMES_NULL, G_INPUTS_NULL, G_OUTPUTS_NULL, G_DUP } group_mut_t;

typedef struct {
  fn_t fn;
  name_mut_t name;
  tensor_mut_t tensor; /* grouped: applied to member 1 */
  out_mut_t output;    /* allreduce and grouped (member 1) */
  int op;              /* plait_op_t; 0 = SUM */
  opt_mut_t opts;
  int root;
  splits_mut_t splits;
  group_mut_t group;
  int null_handle;
  plait_result_t code;
  const char *words[4]; /* each must occur in the message */
} row_t;

#define NELEM 4

/* What a call is made of; filled by build(), valid, then broken by the row. */
typedef struct {
  char name[2][PLAIT_MAX_NAME + 8];
  const char *names[2];
  float in[2][NELEM], out[2][NELEM];
  plait_tensor_t inputs[2], outputs[2];
  int64_t splits[PLAIT_TEST_MAX_RANKS];
  plait_op_options_t opts;
} call_t;

static void break_tensor(plait_tensor_t *t, tensor_mut_t m) {
  switch (m) {
  case T_STRUCT_SMALL: t->struct_size = sizeof *t - 1; break;
  case T_STRUCT_ZERO: t->struct_size = 0; break;
  case T_DTYPE_BIG: t->dtype = (plait_dtype_t)99; break;
  case T_DTYPE_NEG: t->dtype = (plait_dtype_t)-1; break;
  case T_NDIM_NEG: t->ndim = -1; break;
  case T_NDIM_17: t->ndim = 17; break;
  case T_SHAPE_NEG: t->shape[0] = -3; break;
  case T_SHAPE_NEG_LAST:
    t->ndim = 3, t->shape[0] = 1, t->shape[1] = 4, t->shape[2] = -1;
    break;
  case T_DATA_NULL: t->data = NULL; break;
  case T_DEVICE_0: t->device = 0; break;
  case T_DEVICE_NEG2: t->device = -2; break;
  case T_TOO_BIG: t->ndim = 2, t->shape[0] = (int64_t)1 << 40, t->shape[1] = (int64_t)1 << 40; break;
  case T_SCALAR: t->ndim = 0; break;
  case T_BOOL: t->dtype = PLAIT_BOOL; break;
  default: break;
  }
}

/* Makes the call described by r (nothing wrong when fix is set) with base as
 * the name (member 0 of a group; member 1 is base + "_1"). */
static plait_result_t make_call(const row_t *r, int fix, const char *base, int nranks,
                                plait_handle_t **out_h) {
  static call_t c; /* big: the names */
  memset(&c, 0, sizeof c);
  snprintf(c.name[0], sizeof c.name[0], "%s", base);
  snprintf(c.name[1], sizeof c.name[1], "%s_1", base);
  c.names[0] = c.name[0];
  c.names[1] = c.name[1];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < NELEM; i++) c.in[k][i] = (float)(i + 1);
    plait_tensor_1d(&c.inputs[k], c.in[k], NELEM, PLAIT_FLOAT32);
    plait_tensor_1d(&c.outputs[k], c.out[k], NELEM, PLAIT_FLOAT32);
  }
  c.opts = (plait_op_options_t)PLAIT_OP_OPTIONS_INIT;
  c.opts.callback = fix ? good_cb : bad_cb;
  const plait_op_options_t *opts = &c.opts;
  int m = r->fn == FN_GROUPED; /* the member that is broken */
  plait_op_t op = PLAIT_OP_SUM;
  int root = 0;
  const int64_t *splits = NULL;
  size_t count = 2;
  const char *const *names = c.names;
  const plait_tensor_t *inputs = c.inputs, *outputs = c.outputs;
  plait_handle_t **hp = out_h;
  if (!fix) {
    switch (r->name) {
    case NAME_NULL: c.names[m] = NULL; break;
    case NAME_EMPTY: c.name[m][0] = '\0'; break;
    case NAME_LONG:
      memset(c.name[m], 'x', PLAIT_MAX_NAME + 1);
      c.name[m][PLAIT_MAX_NAME + 1] = '\0';
      break;
    case NAME_RESERVED: snprintf(c.name[m], sizeof c.name[m], "plait:%s", base); break;
    default: break;
    }
    break_tensor(&c.inputs[m], r->tensor);
    if (r->tensor == T_BOOL) c.outputs[m].dtype = PLAIT_BOOL; /* else the dtype check fires */
    if (r->tensor == T_NULL) inputs = NULL;
    switch (r->output) {
    case OUT_NULL: outputs = r->fn == FN_GROUPED ? c.outputs : NULL; break;
    case OUT_STRUCT_SMALL: c.outputs[m].struct_size = 4; break;
    case OUT_DTYPE: c.outputs[m].dtype = PLAIT_INT32; break;
    case OUT_COUNT: c.outputs[m].shape[0] = NELEM - 1; break;
    case OUT_NDIM_17: c.outputs[m].ndim = 17; break;
    default: break;
    }
    op = (plait_op_t)r->op;
    switch (r->opts) {
    case OPT_NULL: opts = NULL; break;
    case OPT_STRUCT_SMALL: c.opts.struct_size = PLAIT_OP_OPTIONS_SIZE_V1 - 1; break;
    case OPT_STRUCT_ZERO: c.opts.struct_size = 0; break;
    case OPT_PRE_NAN: c.opts.prescale_factor = NAN; break;
    case OPT_POST_INF: c.opts.postscale_factor = INFINITY; break;
    case OPT_PRE_NEGINF: c.opts.prescale_factor = -INFINITY; break;
    case OPT_POST_NAN: c.opts.postscale_factor = -NAN; break;
    case OPT_SCALE2: c.opts.prescale_factor = 2.0; break;
    default: break;
    }
    root = r->root;
    if (r->fn == FN_ALLTOALL && r->splits != SPLITS_NULL) {
      int64_t rows = c.inputs[0].shape[0];
      for (int k = 0; k < nranks; k++) c.splits[k] = rows / nranks;
      c.splits[0] += rows % nranks;
      if (r->splits == SPLITS_NEG) c.splits[0] = -1;
      if (r->splits == SPLITS_SUM_LOW) c.splits[0] -= 1;
      if (r->splits == SPLITS_SUM_HIGH) c.splits[0] += 1;
      splits = c.splits;
    }
    switch (r->group) {
    case G_COUNT0: count = 0; break;
    case G_COUNT_HUGE: count = (size_t)-1; break;
    case G_NAMES_NULL: names = NULL; break;
    case G_INPUTS_NULL: inputs = NULL; break;
    case G_OUTPUTS_NULL: outputs = NULL; break;
    case G_DUP: c.names[1] = c.names[0]; break;
    default: break;
    }
    if (r->null_handle) hp = NULL;
  }
  switch (r->fn) {
  case FN_ALLREDUCE: return plait_allreduce_async(c.names[0], inputs, outputs, op, opts, hp);
  case FN_GROUPED: return plait_grouped_allreduce_async(count, names, inputs, outputs, op, opts, hp);
  case FN_ALLGATHER: return plait_allgather_async(c.names[0], inputs, opts, hp);
  case FN_BROADCAST: return plait_broadcast_async(c.names[0], inputs, root, opts, hp);
  case FN_ALLTOALL: return plait_alltoall_async(c.names[0], inputs, splits, opts, hp);
  case FN_REDUCESCATTER: return plait_reducescatter_async(c.names[0], inputs, op, opts, hp);
  case FN_BARRIER: return plait_barrier_async(opts, hp);
  case FN_JOIN: return plait_join_async(opts, hp);
  default: return PLAIT_ERR_INTERNAL;
  }
}

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

#define INV PLAIT_ERR_INVALID_ARGUMENT

/* Wrong in the same way for every named operation (the function and, for a
 * tensor, its argument name are checked besides the words). */
static const row_t generic[] = {
    {.name = NAME_NULL, .code = INV, .words = {"name", "NULL"}},
    {.name = NAME_EMPTY, .code = INV, .words = {"name", "empty"}},
    {.name = NAME_LONG, .code = INV, .words = {"name", "1025", "1024"}},
    {.name = NAME_RESERVED, .code = INV, .words = {"'plait:", "reserved"}},
    {.tensor = T_NULL, .code = INV, .words = {"NULL"}},
    {.tensor = T_STRUCT_SMALL, .code = INV, .words = {"struct_size", "sizeof(plait_tensor_t)"}},
    {.tensor = T_STRUCT_ZERO, .code = INV, .words = {"struct_size", "0"}},
    {.tensor = T_DTYPE_BIG, .code = INV, .words = {"dtype", "99"}},
    {.tensor = T_DTYPE_NEG, .code = INV, .words = {"dtype", "-1"}},
    {.tensor = T_NDIM_NEG, .code = INV, .words = {"ndim", "-1", "16"}},
    {.tensor = T_NDIM_17, .code = INV, .words = {"ndim", "17", "16"}},
    {.tensor = T_SHAPE_NEG, .code = INV, .words = {"shape[0]", "-3"}},
    {.tensor = T_SHAPE_NEG_LAST, .code = INV, .words = {"shape[2]", "-1"}},
    {.tensor = T_DATA_NULL, .code = INV, .words = {"data", "NULL", "4 elements"}},
    {.tensor = T_DEVICE_0, .code = PLAIT_ERR_UNSUPPORTED, .words = {"device 0", "host memory"}},
    {.tensor = T_DEVICE_NEG2, .code = INV, .words = {"device", "-2"}},
    {.tensor = T_TOO_BIG, .code = INV, .words = {"too many elements"}},
    {.opts = OPT_STRUCT_SMALL, .code = INV, .words = {"opts->struct_size", "sizeof(plait_op_options_t)"}},
    {.opts = OPT_STRUCT_ZERO, .code = INV, .words = {"opts->struct_size", "0"}},
    {.null_handle = 1, .code = INV, .words = {"handle", "NULL"}},
};
#define N_GENERIC (sizeof generic / sizeof generic[0])

/* Wrong in a way only some operations can be. */
static const row_t specific[] = {
    /* allreduce: the output */
    {FN_ALLREDUCE, .output = OUT_NULL, .code = INV, .words = {"output", "NULL"}},
    {FN_ALLREDUCE, .output = OUT_STRUCT_SMALL, .code = INV, .words = {"output->struct_size", "4"}},
    {FN_ALLREDUCE, .output = OUT_DTYPE, .code = INV, .words = {"output", "int32", "float32"}},
    {FN_ALLREDUCE, .output = OUT_COUNT, .code = INV, .words = {"output", "3 elements", "4"}},
    {FN_ALLREDUCE, .output = OUT_NDIM_17, .code = INV, .words = {"output->ndim", "17"}},
    {FN_GROUPED, .output = OUT_DTYPE, .code = INV, .words = {"member 1", "output", "int32"}},
    {FN_GROUPED, .output = OUT_COUNT, .code = INV, .words = {"member 1", "output", "3 elements"}},
    /* reductions: op, bool, scale factors */
    {FN_ALLREDUCE, .op = 5, .code = INV, .words = {"op", "5"}},
    {FN_ALLREDUCE, .op = -1, .code = INV, .words = {"op", "-1"}},
    {FN_GROUPED, .op = 7, .code = INV, .words = {"op", "7"}},
    {FN_REDUCESCATTER, .op = 5, .code = INV, .words = {"op", "5"}},
    {FN_ALLREDUCE, .tensor = T_BOOL, .output = OUT_DTYPE, .code = INV, .words = {"output", "int32", "bool"}},
    {FN_ALLREDUCE, .tensor = T_DEVICE_0, .opts = OPT_SCALE2, .code = PLAIT_ERR_UNSUPPORTED, .words = {"device"}},
    {FN_REDUCESCATTER, .tensor = T_BOOL, .op = PLAIT_OP_AVERAGE, .code = INV, .words = {"AVERAGE", "bool"}},
    {FN_REDUCESCATTER, .tensor = T_BOOL, .opts = OPT_SCALE2, .code = INV, .words = {"scale", "bool"}},
    {FN_ALLREDUCE, .opts = OPT_PRE_NAN, .code = INV, .words = {"prescale_factor", "nan", "finite"}},
    {FN_ALLREDUCE, .opts = OPT_POST_INF, .code = INV, .words = {"postscale_factor", "inf", "finite"}},
    {FN_ALLREDUCE, .opts = OPT_PRE_NEGINF, .code = INV, .words = {"prescale_factor", "-inf", "finite"}},
    {FN_ALLREDUCE, .opts = OPT_POST_NAN, .code = INV, .words = {"postscale_factor", "nan", "finite"}},
    {FN_GROUPED, .opts = OPT_PRE_NAN, .code = INV, .words = {"prescale_factor", "nan", "finite"}},
    {FN_GROUPED, .opts = OPT_POST_INF, .code = INV, .words = {"postscale_factor", "inf", "finite"}},
    {FN_REDUCESCATTER, .opts = OPT_PRE_NAN, .code = INV, .words = {"prescale_factor", "nan", "finite"}},
    {FN_REDUCESCATTER, .opts = OPT_POST_INF, .code = INV, .words = {"postscale_factor", "inf", "finite"}},
    /* broadcast: root */
    {FN_BROADCAST, .root = -1, .code = INV, .words = {"root", "-1", "1"}},
    {FN_BROADCAST, .root = 1, .code = INV, .words = {"root", "1", "job of 1"}},
    {FN_BROADCAST, .root = 1 << 30, .code = INV, .words = {"root", "1073741824"}},
    /* alltoall: splits */
    {FN_ALLTOALL, .splits = SPLITS_NEG, .code = INV, .words = {"splits[0]", "-1"}},
    {FN_ALLTOALL, .splits = SPLITS_SUM_LOW, .code = INV, .words = {"splits", "3", "4"}},
    {FN_ALLTOALL, .splits = SPLITS_SUM_HIGH, .code = INV, .words = {"splits", "5", "4"}},
    /* scalars have no first dimension */
    {FN_ALLGATHER, .tensor = T_SCALAR, .code = INV, .words = {"scalar", "first dimension"}},
    {FN_ALLTOALL, .tensor = T_SCALAR, .code = INV, .words = {"scalar", "first dimension"}},
    {FN_REDUCESCATTER, .tensor = T_SCALAR, .code = INV, .words = {"scalar", "first dimension"}},
    /* grouped: the arrays */
    {FN_GROUPED, .group = G_COUNT0, .code = INV, .words = {"count", "0"}},
    {FN_GROUPED, .group = G_COUNT_HUGE, .code = INV, .words = {"count"}},
    {FN_GROUPED, .group = G_NAMES_NULL, .code = INV, .words = {"names", "NULL"}},
    {FN_GROUPED, .group = G_INPUTS_NULL, .code = INV, .words = {"inputs", "NULL"}},
    {FN_GROUPED, .group = G_OUTPUTS_NULL, .code = INV, .words = {"outputs", "NULL"}},
    {FN_GROUPED, .group = G_DUP, .code = INV, .words = {"twice", "group"}},
    /* nameless operations: only the options and the handle can be wrong */
    {FN_BARRIER, .opts = OPT_STRUCT_SMALL, .code = INV, .words = {"opts->struct_size"}},
    {FN_BARRIER, .null_handle = 1, .code = INV, .words = {"handle", "NULL"}},
    {FN_JOIN, .opts = OPT_STRUCT_SMALL, .code = INV, .words = {"opts->struct_size"}},
    {FN_JOIN, .null_handle = 1, .code = INV, .words = {"handle", "NULL"}},
};
#define N_SPECIFIC (sizeof specific / sizeof specific[0])

/* AVERAGE and scale factors on bool for the reductions (generated). */
static const row_t bool_rows[] = {
    {.tensor = T_BOOL, .op = PLAIT_OP_AVERAGE, .code = INV, .words = {"AVERAGE", "bool"}},
    {.tensor = T_BOOL, .opts = OPT_SCALE2, .code = INV, .words = {"scale", "bool"}},
};

/* Every row, with its function; returns the count. */
static size_t all_rows(row_t *out, size_t cap) {
  size_t n = 0;
  for (int fn = 0; fn < FN_COUNT_; fn++) {
    if (!named((fn_t)fn)) continue;
    for (size_t i = 0; i < N_GENERIC && n < cap; i++) {
      if (fn == FN_GROUPED && generic[i].tensor == T_NULL) continue; /* see G_INPUTS_NULL */
      out[n] = generic[i];
      out[n++].fn = (fn_t)fn;
    }
    if (fn == FN_ALLREDUCE || fn == FN_GROUPED) /* input and output both bool */
      for (size_t i = 0; i < 2 && n < cap; i++) {
        out[n] = bool_rows[i];
        out[n++].fn = (fn_t)fn;
      }
  }
  for (size_t i = 0; i < N_SPECIFIC && n < cap; i++) out[n++] = specific[i];
  return n;
}

static void describe(const row_t *r, char *buf, size_t cap) {
  snprintf(buf, cap, "%s(name %d, tensor %d, output %d, op %d, opts %d, root %d, splits %d, "
           "group %d, null handle %d)", fn_names[r->fn], r->name, r->tensor, r->output, r->op,
           r->opts, r->root, r->splits, r->group, r->null_handle);
}

/* Checks one row: code, message, handle untouched; then the same call made
 * right with the same name succeeds. Returns the number of failed checks. */
static int check_row(const row_t *r, size_t idx, int nranks) {
  char what[256], base[32];
  describe(r, what, sizeof what);
  snprintf(base, sizeof base, "row%zu", idx);
  plait_handle_t *sentinel = (plait_handle_t *)(uintptr_t)0xDEADBEEF, *h = sentinel;
  plait_result_t rc = make_call(r, 0, base, nranks, &h);
  const char *msg = plait_last_error();
  int fails = 0;
  if (rc != r->code) {
    cr_expect_eq(rc, r->code, "%s: %s (%s), expected %s", what, plait_result_name(rc), msg,
                 plait_result_name(r->code));
    fails++;
  }
  /* The duplicate-in-group message comes from the submission table, which
   * does not know the function: it names the tensor instead. */
  const char *fn_word = r->group == G_DUP ? base : fn_names[r->fn];
  const char *must[6] = {r->words[0], r->words[1], r->words[2], r->words[3], fn_word, NULL};
  for (int i = 0; i < 5; i++) {
    if (!must[i]) continue;
    if (!strstr(msg, must[i])) {
      cr_expect(0, "%s: message does not say \"%s\": \"%s\"", what, must[i], msg);
      fails++;
    }
  }
  /* a tensor fault names the tensor argument as plait.h does */
  if (r->tensor != T_OK && r->tensor != T_BOOL && r->tensor != T_SCALAR &&
      !has_word(msg, tensor_arg(r->fn))) {
    cr_expect(0, "%s: message does not name '%s': \"%s\"", what, tensor_arg(r->fn), msg);
    fails++;
  }
  if (r->fn == FN_GROUPED && (r->tensor != T_OK || r->name != NAME_OK) && !strstr(msg, "member 1")) {
    cr_expect(0, "%s: message does not name the group member: \"%s\"", what, msg);
    fails++;
  }
  if (h != sentinel) {
    cr_expect(0, "%s: *handle written on error", what);
    fails++;
  }
  if (rc == PLAIT_SUCCESS && h != sentinel) { /* should not happen: do not leak it */
    plait_wait(h, 10);
    plait_release(h);
  }
  /* Nothing was queued: the same call made right, same name, succeeds now. */
  plait_handle_t *ok = NULL;
  rc = make_call(r, 1, base, nranks, &ok);
  if (rc != PLAIT_SUCCESS) {
    cr_expect_eq(rc, PLAIT_SUCCESS, "%s made right: %s: %s", what, plait_result_name(rc),
                 plait_last_error());
    return fails + 1;
  }
  rc = plait_wait(ok, 30);
  cr_expect_eq(rc, PLAIT_SUCCESS, "%s made right: wait: %s: %s", what, plait_result_name(rc),
               plait_last_error());
  plait_release(ok);
  return fails + (rc != PLAIT_SUCCESS);
}

Test(ops, every_bad_argument_of_every_operation, .timeout = 60) {
  static row_t rows[512];
  size_t n = all_rows(rows, 512);
  INIT_OK();
  int fails = 0;
  for (size_t i = 0; i < n; i++) fails += check_row(&rows[i], i, 1);
  cr_expect_eq(fails, 0, "%d of %zu rows failed", fails, n);
  /* every callback has run once the session is over */
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(atomic_load(&bad_calls), 0, "a callback ran for %d calls that returned an error",
               atomic_load(&bad_calls));
  cr_expect_eq(atomic_load(&good_calls), (int)n, "%d of %zu good calls called back",
               atomic_load(&good_calls), n);
}

/* ------------------------------------------------------------------------ */
/* Names at the limit, the tensor helper                                     */
/* ------------------------------------------------------------------------ */

Test(ops, name_of_exactly_max_name_bytes_works, .timeout = 30) {
  INIT_OK();
  static char name[PLAIT_MAX_NAME + 1];
  memset(name, 'n', PLAIT_MAX_NAME);
  name[PLAIT_MAX_NAME] = '\0';
  float x[3] = {1, 2, 3};
  plait_tensor_t t;
  cr_assert_eq(plait_tensor_1d(&t, x, 3, PLAIT_FLOAT32), PLAIT_SUCCESS);
  plait_handle_t *h = NULL;
  for (int round = 0; round < 2; round++) { /* the second round may go by cache id */
    plait_result_t rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h);
    cr_assert_eq(rc, PLAIT_SUCCESS, "%s", plait_last_error());
    rc = plait_wait(h, 30);
    cr_expect_eq(rc, PLAIT_SUCCESS, "%s", plait_last_error());
    plait_release(h);
  }
  cr_expect(x[0] == 1 && x[1] == 2 && x[2] == 3, "sum over one rank changed the data");
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

Test(ops, tensor_1d_helper, .timeout = 10) {
  /* a helper for C callers: usable without a session */
  plait_tensor_t t;
  memset(&t, 0x5A, sizeof t);
  plait_tensor_t before = t;
  float x[2];
  cr_expect_eq(plait_tensor_1d(NULL, x, 2, PLAIT_FLOAT32), INV);
  cr_expect(has_word(plait_last_error(), "t") && strstr(plait_last_error(), "NULL"), "\"%s\"",
            plait_last_error());
  cr_expect(strstr(plait_last_error(), "plait_tensor_1d") != NULL, "\"%s\"", plait_last_error());
  cr_expect_eq(plait_tensor_1d(&t, x, 2, (plait_dtype_t)11), INV);
  cr_expect(strstr(plait_last_error(), "dtype") && strstr(plait_last_error(), "11"), "\"%s\"",
            plait_last_error());
  cr_expect_eq(plait_tensor_1d(&t, x, 2, (plait_dtype_t)-1), INV);
  cr_expect_eq(plait_tensor_1d(&t, x, (size_t)INT64_MAX + 1, PLAIT_FLOAT32), INV);
  cr_expect(strstr(plait_last_error(), "count") != NULL, "\"%s\"", plait_last_error());
  cr_expect(!memcmp(&t, &before, sizeof t), "plait_tensor_1d wrote its output on error");
  cr_expect_eq(plait_tensor_1d(&t, x, 2, PLAIT_INT16), PLAIT_SUCCESS);
  cr_expect(t.struct_size == sizeof t && t.data == x && t.dtype == PLAIT_INT16 &&
            t.device == PLAIT_DEVICE_HOST && t.ndim == 1 && t.shape[0] == 2);
  cr_expect_eq(plait_tensor_1d(&t, NULL, 0, PLAIT_BOOL), PLAIT_SUCCESS, "empty tensor, NULL data");
}

/* ------------------------------------------------------------------------ */
/* Before plait_init and after plait_shutdown                                */
/* ------------------------------------------------------------------------ */

static void expect_every_op_not_initialized(const char *when) {
  for (int fn = 0; fn < FN_COUNT_; fn++) {
    row_t r = {.fn = (fn_t)fn};
    plait_handle_t *sentinel = (plait_handle_t *)(uintptr_t)0xDEADBEEF, *h = sentinel;
    plait_result_t rc = make_call(&r, 0, "early", 1, &h);
    cr_expect_eq(rc, PLAIT_ERR_NOT_INITIALIZED, "%s %s: %s", fn_names[fn], when,
                 plait_result_name(rc));
    cr_expect(strstr(plait_last_error(), fn_names[fn]) && strstr(plait_last_error(), "not initialized"),
              "%s %s: \"%s\"", fn_names[fn], when, plait_last_error());
    cr_expect(h == sentinel, "%s %s wrote *handle", fn_names[fn], when);
  }
  plait_stats_t s = {.struct_size = sizeof s};
  plait_result_t rc = plait_stats(&s);
  cr_expect_eq(rc, PLAIT_ERR_NOT_INITIALIZED, "plait_stats %s: %s", when, plait_result_name(rc));
  cr_expect(strstr(plait_last_error(), "plait_stats") && strstr(plait_last_error(), "not initialized"),
            "\"%s\"", plait_last_error());
  rc = plait_stats_reset();
  cr_expect_eq(rc, PLAIT_ERR_NOT_INITIALIZED, "plait_stats_reset %s: %s", when, plait_result_name(rc));
  cr_expect(strstr(plait_last_error(), "plait_stats_reset") &&
            strstr(plait_last_error(), "not initialized"), "\"%s\"", plait_last_error());
  cr_expect_eq(plait_release(NULL), PLAIT_SUCCESS, "plait_release(NULL) %s", when);
  cr_expect_eq(atomic_load(&bad_calls), 0, "a callback ran for a refused call %s", when);
}

Test(ops, every_operation_before_init, .timeout = 10) {
  expect_every_op_not_initialized("before plait_init");
}

Test(ops, every_operation_after_shutdown, .timeout = 30) {
  INIT_OK();
  /* a handle made in the session stays usable after it */
  float x[2] = {1, 2};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 2, PLAIT_FLOAT32);
  plait_handle_t *h = NULL;
  cr_assert_eq(plait_allreduce_async("kept", &t, &t, PLAIT_OP_SUM, NULL, &h), PLAIT_SUCCESS);
  cr_assert_eq(plait_wait(h, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
  expect_every_op_not_initialized("after plait_shutdown");
  int done = 0;
  cr_expect_eq(plait_poll(h, &done), PLAIT_SUCCESS);
  cr_expect_eq(done, 1);
  cr_expect_eq(plait_wait(h, 0), PLAIT_SUCCESS, "%s", plait_last_error());
  plait_tensor_t out;
  cr_expect_eq(plait_handle_output(h, &out), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(out.data, (void *)x);
  cr_expect_eq(plait_release(h), PLAIT_SUCCESS);
  /* a second session works normally */
  INIT_OK();
  cr_assert_eq(plait_allreduce_async("kept", &t, &t, PLAIT_OP_SUM, NULL, &h), PLAIT_SUCCESS,
               "%s", plait_last_error());
  cr_expect_eq(plait_wait(h, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  plait_release(h);
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

/* ------------------------------------------------------------------------ */
/* Handles: poll, wait, release, getters                                     */
/* ------------------------------------------------------------------------ */

Test(ops, handle_functions_with_bad_arguments, .timeout = 30) {
  int done = 7;
  plait_tensor_t out;
  int64_t splits[4] = {-9, -9, -9, -9};
  int jr = -7;
  cr_expect_eq(plait_release(NULL), PLAIT_SUCCESS);
  cr_expect_eq(plait_poll(NULL, &done), INV);
  cr_expect(strstr(plait_last_error(), "plait_poll") && has_word(plait_last_error(), "handle"),
            "\"%s\"", plait_last_error());
  cr_expect_eq(done, 7, "plait_poll wrote *done on error");
  cr_expect_eq(plait_wait(NULL, 1), INV);
  cr_expect(strstr(plait_last_error(), "plait_wait") && has_word(plait_last_error(), "handle"),
            "\"%s\"", plait_last_error());
  cr_expect_eq(plait_handle_output(NULL, &out), INV);
  cr_expect(strstr(plait_last_error(), "plait_handle_output"), "\"%s\"", plait_last_error());
  cr_expect_eq(plait_handle_splits(NULL, splits, 4), INV);
  cr_expect(strstr(plait_last_error(), "plait_handle_splits"), "\"%s\"", plait_last_error());
  cr_expect_eq(plait_handle_join_rank(NULL, &jr), INV);
  cr_expect(strstr(plait_last_error(), "plait_handle_join_rank"), "\"%s\"", plait_last_error());

  INIT_OK();
  float x[4] = {1, 2, 3, 4};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32);
  plait_handle_t *ar = NULL, *a2a = NULL, *bar = NULL, *join = NULL;
  cr_assert_eq(plait_allreduce_async("ar", &t, &t, PLAIT_OP_SUM, NULL, &ar), PLAIT_SUCCESS);
  cr_assert_eq(plait_alltoall_async("a2a", &t, NULL, NULL, &a2a), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_assert_eq(plait_barrier_async(NULL, &bar), PLAIT_SUCCESS);
  cr_expect_eq(plait_wait(ar, NAN), INV, "plait_wait with a NaN timeout");
  cr_expect(strstr(plait_last_error(), "timeout_s"), "\"%s\"", plait_last_error());
  cr_assert_eq(plait_wait(ar, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_wait(a2a, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_wait(bar, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_join_async(NULL, &join), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_wait(join, 30), PLAIT_SUCCESS, "%s", plait_last_error());

  /* NULL outputs */
  cr_expect_eq(plait_poll(ar, NULL), INV);
  cr_expect(has_word(plait_last_error(), "done"), "\"%s\"", plait_last_error());
  cr_expect_eq(plait_handle_output(ar, NULL), INV);
  cr_expect(has_word(plait_last_error(), "out"), "\"%s\"", plait_last_error());
  cr_expect_eq(plait_handle_splits(a2a, NULL, 4), INV);
  cr_expect(has_word(plait_last_error(), "splits"), "\"%s\"", plait_last_error());
  cr_expect_eq(plait_handle_join_rank(join, NULL), INV);
  cr_expect(has_word(plait_last_error(), "rank"), "\"%s\"", plait_last_error());
  /* the wrong kind of handle */
  cr_expect_eq(plait_handle_splits(ar, splits, 4), INV);
  cr_expect(strstr(plait_last_error(), "allreduce") && strstr(plait_last_error(), "alltoall"),
            "\"%s\"", plait_last_error());
  cr_expect_eq(splits[0], -9, "splits written on error");
  cr_expect_eq(plait_handle_join_rank(ar, &jr), INV);
  cr_expect(strstr(plait_last_error(), "join"), "\"%s\"", plait_last_error());
  cr_expect_eq(jr, -7, "rank written on error");
  memset(&out, 0x5A, sizeof out);
  plait_tensor_t before = out;
  cr_expect_eq(plait_handle_output(bar, &out), INV);
  cr_expect(strstr(plait_last_error(), "barrier"), "\"%s\"", plait_last_error());
  cr_expect_eq(plait_handle_output(join, &out), INV);
  cr_expect(!memcmp(&out, &before, sizeof out), "out written on error");
  /* too little room for the splits */
  cr_expect_eq(plait_handle_splits(a2a, splits, 0), PLAIT_ERR_BUFFER_TOO_SMALL);
  cr_expect(strstr(plait_last_error(), "capacity") && strstr(plait_last_error(), "1"), "\"%s\"",
            plait_last_error());
  /* and right */
  cr_expect_eq(plait_handle_splits(a2a, splits, 1), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(splits[0], 4);
  cr_expect_eq(plait_handle_join_rank(join, &jr), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(jr, 0);
  cr_expect_eq(plait_handle_output(a2a, &out), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(out.dtype == PLAIT_FLOAT32 && out.ndim == 1 && out.shape[0] == 4 && out.data != NULL);
  /* a join leaves later allreduces alone on a rank that keeps going */
  float y[2] = {3, 5};
  plait_tensor_t ty;
  plait_tensor_1d(&ty, y, 2, PLAIT_FLOAT32);
  plait_handle_t *after = NULL;
  cr_assert_eq(plait_allreduce_async("after_join", &ty, &ty, PLAIT_OP_SUM, NULL, &after), PLAIT_SUCCESS);
  cr_expect_eq(plait_wait(after, 30), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect(y[0] == 3 && y[1] == 5, "allreduce after a join gave %g %g", y[0], y[1]);
  plait_release(after);
  plait_release(ar);
  plait_release(a2a);
  plait_release(bar);
  plait_release(join);
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

Test(ops, release_before_completion_still_calls_back, .timeout = 30) {
  INIT_OK();
  float x[2] = {1, 2};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 2, PLAIT_FLOAT32);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.callback = good_cb;
  for (int i = 0; i < 50; i++) {
    char name[32];
    snprintf(name, sizeof name, "released%d", i);
    plait_handle_t *h = NULL;
    cr_assert_eq(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, &o, &h), PLAIT_SUCCESS);
    cr_expect_eq(plait_release(h), PLAIT_SUCCESS);
  }
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(atomic_load(&good_calls), 50, "%d of 50 callbacks", atomic_load(&good_calls));
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

Test(ops, stats_arguments, .timeout = 30) {
  INIT_OK();
  cr_expect_eq(plait_stats(NULL), INV);
  cr_expect(strstr(plait_last_error(), "plait_stats") && has_word(plait_last_error(), "stats"),
            "\"%s\"", plait_last_error());
  plait_stats_t s;
  memset(&s, 0, sizeof s);
  cr_expect_eq(plait_stats(&s), INV, "struct_size 0");
  cr_expect(strstr(plait_last_error(), "struct_size"), "\"%s\"", plait_last_error());
  s.struct_size = 4;
  cr_expect_eq(plait_stats(&s), INV, "struct_size 4");
  /* an older, smaller struct gets only the fields it has room for */
  float x[2] = {1, 2};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 2, PLAIT_FLOAT32);
  plait_handle_t *h = NULL;
  cr_assert_eq(plait_allreduce_async("counted", &t, &t, PLAIT_OP_SUM, NULL, &h), PLAIT_SUCCESS);
  cr_assert_eq(plait_wait(h, 30), PLAIT_SUCCESS);
  plait_release(h);
  memset(&s, 0xEE, sizeof s);
  s.struct_size = offsetof(plait_stats_t, busy_cycles);
  cr_expect_eq(plait_stats(&s), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(s.struct_size, offsetof(plait_stats_t, busy_cycles));
  cr_expect_neq(s.cycles, 0xEEEEEEEEEEEEEEEEull, "cycles not written");
  cr_expect_eq(s.busy_cycles, 0xEEEEEEEEEEEEEEEEull, "wrote past struct_size");
  /* a bigger struct from a newer header is fine */
  struct { plait_stats_t s; uint64_t extra; } big;
  memset(&big, 0xEE, sizeof big);
  big.s.struct_size = sizeof big;
  cr_expect_eq(plait_stats(&big.s), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_eq(big.extra, 0xEEEEEEEEEEEEEEEEull, "wrote past plait_stats_t");
  cr_expect_geq(big.s.tensors, 1);
  cr_expect_eq(plait_stats_reset(), PLAIT_SUCCESS, "%s", plait_last_error());
  plait_stats_t z = {.struct_size = sizeof z};
  cr_expect_eq(plait_stats(&z), PLAIT_SUCCESS);
  cr_expect_eq(z.tensors, 0, "tensors after reset: %llu", (unsigned long long)z.tensors);
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

/* ------------------------------------------------------------------------ */
/* On 2 ranks: in flight, getters before completion, rank-count checks       */
/* ------------------------------------------------------------------------ */

#define RFAIL(...)                                                             \
  do {                                                                         \
    plait_test_say(rank, __VA_ARGS__);                                         \
    return 1;                                                                  \
  } while (0)

/* Expects call to fail with code and a message containing w1 and w2. */
#define EXPECT_FAIL(call, code, w1, w2)                                        \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    const char *m_ = plait_last_error();                                       \
    if (rc_ != (code) || !strstr(m_, w1) || !strstr(m_, w2))                   \
      RFAIL("%s: %s: \"%s\", expected %s with \"%s\", \"%s\"", #call,          \
            plait_result_name(rc_), m_, plait_result_name(code), w1, w2);      \
  } while (0)

#define EXPECT_OK(call)                                                        \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS)                                                  \
      RFAIL("%s: %s: %s", #call, plait_result_name(rc_), plait_last_error());  \
  } while (0)

typedef struct {
  int go[2]; /* pipe: rank 0 tells rank 1 to submit */
} pipe_arg_t;

static int in_flight_and_getters(int rank, int n, void *arg) {
  pipe_arg_t *p = arg;
  (void)n;
  EXPECT_OK(plait_init());
  float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40}, z[3] = {0};
  plait_tensor_t tx, ty, tz;
  plait_tensor_1d(&tx, x, 4, PLAIT_FLOAT32);
  plait_tensor_1d(&ty, y, 4, PLAIT_FLOAT32);
  plait_tensor_1d(&tz, z, 3, PLAIT_FLOAT32);
  plait_op_options_t bad = PLAIT_OP_OPTIONS_INIT;
  bad.callback = bad_cb;
  if (rank == 1) {
    char c;
    if (read(p->go[0], &c, 1) != 1) RFAIL("rank 0 never said go");
  } else {
    plait_handle_t *h = NULL, *h2 = (plait_handle_t *)(uintptr_t)0xDEADBEEF, *keep = h2;
    EXPECT_OK(plait_allreduce_async("held", &tx, &tx, PLAIT_OP_SUM, NULL, &h));
    /* rank 1 has not submitted 'held': it cannot finish before "go" */
    int done = 5;
    EXPECT_OK(plait_poll(h, &done));
    if (done != 0) RFAIL("poll says done before rank 1 submitted");
    EXPECT_FAIL(plait_wait(h, 0), PLAIT_ERR_TIMEOUT, "plait_wait", "still running");
    EXPECT_FAIL(plait_wait(h, 0.05), PLAIT_ERR_TIMEOUT, "plait_wait", "still running");
    plait_tensor_t out;
    int64_t sp[2];
    int jr;
    EXPECT_FAIL(plait_handle_output(h, &out), INV, "plait_handle_output", "not finished");
    EXPECT_FAIL(plait_handle_splits(h, sp, 2), INV, "plait_handle_splits", "not finished");
    EXPECT_FAIL(plait_handle_join_rank(h, &jr), INV, "plait_handle_join_rank", "not finished");
    /* the same name again, of any kind, while it is in flight */
    EXPECT_FAIL(plait_allreduce_async("held", &ty, &ty, PLAIT_OP_SUM, &bad, &h2), INV, "'held'",
                "already in flight");
    EXPECT_FAIL(plait_broadcast_async("held", &ty, 0, &bad, &h2), INV, "'held'", "already in flight");
    EXPECT_FAIL(plait_allgather_async("held", &ty, &bad, &h2), INV, "'held'", "already in flight");
    const char *names[2] = {"other", "held"};
    plait_tensor_t ins[2] = {ty, ty};
    EXPECT_FAIL(plait_grouped_allreduce_async(2, names, ins, ins, PLAIT_OP_SUM, &bad, &h2), INV,
                "'held'", "already in flight");
    if (h2 != keep) RFAIL("*handle written by a refused call");
    /* rank-count checks: 2 ranks */
    EXPECT_FAIL(plait_alltoall_async("odd", &tz, NULL, &bad, &h2), INV, "3", "2 ranks");
    EXPECT_FAIL(plait_broadcast_async("b", &tz, 2, &bad, &h2), INV, "root 2", "2");
    int64_t two[2] = {4, -1};
    EXPECT_FAIL(plait_alltoall_async("neg", &tz, two, &bad, &h2), INV, "splits[1]", "-1");
    /* the refused group queued nothing: 'other' is free (but rank 1 will
     * not submit it: just check the name is not in flight) */
    plait_handle_t *o = NULL;
    EXPECT_OK(plait_allreduce_async("other", &ty, &ty, PLAIT_OP_SUM, NULL, &o));
    if (write(p->go[1], "g", 1) != 1) RFAIL("write");
    EXPECT_OK(plait_wait(h, 30));
    if (x[0] != 2 || x[3] != 8) RFAIL("'held' gave %g..%g", x[0], x[3]);
    EXPECT_OK(plait_wait(o, 30));
    if (y[0] != 20) RFAIL("'other' gave %g", y[0]);
    EXPECT_OK(plait_handle_output(h, &out));
    if (out.data != x || out.shape[0] != 4) RFAIL("output of 'held' is not the output tensor");
    /* finished: the name is free again */
    plait_handle_t *again = NULL;
    EXPECT_OK(plait_allreduce_async("held", &tx, &tx, PLAIT_OP_SUM, NULL, &again));
    EXPECT_OK(plait_wait(again, 30));
    if (x[0] != 4) RFAIL("second 'held' gave %g", x[0]);
    plait_release(h);
    plait_release(o);
    plait_release(again);
    EXPECT_OK(plait_shutdown());
    if (atomic_load(&bad_calls)) RFAIL("a refused call's callback ran");
    return 0;
  }
  plait_handle_t *h = NULL, *o = NULL, *again = NULL;
  EXPECT_OK(plait_allreduce_async("held", &tx, &tx, PLAIT_OP_SUM, NULL, &h));
  EXPECT_OK(plait_allreduce_async("other", &ty, &ty, PLAIT_OP_SUM, NULL, &o));
  EXPECT_OK(plait_wait(h, 30));
  EXPECT_OK(plait_wait(o, 30));
  EXPECT_OK(plait_allreduce_async("held", &tx, &tx, PLAIT_OP_SUM, NULL, &again));
  EXPECT_OK(plait_wait(again, 30));
  plait_release(h);
  plait_release(o);
  plait_release(again);
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(ops_2ranks, in_flight_names_and_getters_before_completion, .timeout = 60) {
  pipe_arg_t p;
  cr_assert_eq(pipe(p.go), 0);
  plait_test_job_t job = {.nranks = 2, .timeout_s = 40};
  cr_expect_eq(plait_test_run_ranks(&job, in_flight_and_getters, &p), 0);
  close(p.go[0]);
  close(p.go[1]);
}
