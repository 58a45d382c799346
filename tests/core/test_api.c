/*
 * Tests of the public API's contract (include/plait/plait.h) on a job of one
 * rank: bad input to every function gives the documented code and a message
 * that says what was wrong; the life cycle (init, queries, shutdown, init
 * again, failed init); the code / dtype / op tables; versions; the per-thread
 * last error.
 *
 * Each test runs in its own forked process, so plait's global state and the
 * environment start fresh in every test. Single-rank jobs use the "fixture"
 * test plugin (tests/plugins/fixtures/fixture.c) unless a test says otherwise.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plait/dtypes.h"
#include "plait/plait.h"
#include "plait/transport.h"
#include "ranks.h"


/* A clean single-rank environment that loads the fixture plugin. */
static void fixture_env(void) {
  plait_test_clear_env();
  plait_test_set_plugin_path();
  setenv("PLAIT_TRANSPORT", "fixture", 1);
}

TestSuite(api, .init = plait_test_clear_env);
TestSuite(life, .init = fixture_env);
TestSuite(tables);
TestSuite(last_error);

#define INIT_OK()                                                              \
  do {                                                                         \
    plait_result_t init_rc_ = plait_init();                                    \
    cr_assert_eq(init_rc_, PLAIT_SUCCESS, "plait_init: %s: %s",                \
                 plait_result_name(init_rc_), plait_last_error());             \
  } while (0)

/* 1 when word occurs in text as a whole identifier (not inside a longer one:
 * "rank" is not found in "plait_rank"). */
static int has_word(const char *text, const char *word) {
  size_t n = strlen(word);
  for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
    int before = p > text && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                              (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9'));
    char c = p[n];
    int after = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!before && !after) return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The table of queries: every function of plait.h with an output pointer    */
/* ------------------------------------------------------------------------ */

typedef plait_result_t (*query_fn)(void *out);

static plait_result_t q_rank(void *p) { return plait_rank(p); }
static plait_result_t q_size(void *p) { return plait_size(p); }
static plait_result_t q_local_rank(void *p) { return plait_local_rank(p); }
static plait_result_t q_local_size(void *p) { return plait_local_size(p); }
static plait_result_t q_cross_rank(void *p) { return plait_cross_rank(p); }
static plait_result_t q_cross_size(void *p) { return plait_cross_size(p); }
static plait_result_t q_transport_name(void *p) { return plait_transport_name(p); }
static plait_result_t q_is_initialized(void *p) { return plait_is_initialized(p); }

typedef struct {
  const char *fn;   /* function name, as the message must give it */
  const char *arg;  /* the output argument's name in plait.h */
  query_fn call;
  int needs_init;   /* 1: PLAIT_ERR_NOT_INITIALIZED outside a session */
  int single_value; /* its value in a job of one rank (ints only) */
} query_t;

static const query_t queries[] = {
    {"plait_rank", "rank", q_rank, 1, 0},
    {"plait_size", "size", q_size, 1, 1},
    {"plait_local_rank", "local_rank", q_local_rank, 1, 0},
    {"plait_local_size", "local_size", q_local_size, 1, 1},
    {"plait_cross_rank", "cross_rank", q_cross_rank, 1, 0},
    {"plait_cross_size", "cross_size", q_cross_size, 1, 1},
    {"plait_transport_name", "name", q_transport_name, 1, -1},
    {"plait_is_initialized", "initialized", q_is_initialized, 0, -1},
};
#define N_QUERIES (sizeof queries / sizeof queries[0])

/* Sentinel-filled output big enough for an int or a pointer. */
typedef union {
  int i;
  const char *s;
  unsigned char bytes[sizeof(void *) > sizeof(int) ? sizeof(void *) : sizeof(int)];
} out_t;

static void fill(out_t *o) { memset(o, 0xA5, sizeof *o); }
static int untouched(const out_t *o) {
  for (size_t i = 0; i < sizeof o->bytes; i++)
    if (o->bytes[i] != 0xA5) return 0;
  return 1;
}

/* Every query before init (or after shutdown): NOT_INITIALIZED naming the
 * function, output not written; plait_is_initialized says 0. */
static void expect_not_initialized(const char *when) {
  for (size_t i = 0; i < N_QUERIES; i++) {
    const query_t *q = &queries[i];
    out_t o;
    fill(&o);
    plait_result_t rc = q->call(&o);
    if (!q->needs_init) {
      cr_expect_eq(rc, PLAIT_SUCCESS, "%s %s: %s", q->fn, when, plait_result_name(rc));
      cr_expect_eq(o.i, 0, "%s %s gives %d", q->fn, when, o.i);
      continue;
    }
    cr_expect_eq(rc, PLAIT_ERR_NOT_INITIALIZED, "%s %s: %s, expected PLAIT_ERR_NOT_INITIALIZED",
                 q->fn, when, plait_result_name(rc));
    cr_expect(strstr(plait_last_error(), q->fn) != NULL, "%s %s: message does not name it: \"%s\"",
              q->fn, when, plait_last_error());
    cr_expect(strstr(plait_last_error(), "not initialized") != NULL, "%s %s: \"%s\"", q->fn, when,
              plait_last_error());
    cr_expect(untouched(&o), "%s %s wrote its output on error", q->fn, when);
  }
}

/* ------------------------------------------------------------------------ */
/* Bad input to every function                                               */
/* ------------------------------------------------------------------------ */

Test(api, null_output_is_invalid_argument_before_init) {
  for (size_t i = 0; i < N_QUERIES; i++) {
    plait_result_t rc = queries[i].call(NULL);
    cr_expect_eq(rc, PLAIT_ERR_INVALID_ARGUMENT, "%s(NULL): %s, expected PLAIT_ERR_INVALID_ARGUMENT",
                 queries[i].fn, plait_result_name(rc));
    cr_expect(strstr(plait_last_error(), queries[i].fn) != NULL,
              "%s(NULL): message does not name the function: \"%s\"", queries[i].fn,
              plait_last_error());
    cr_expect(strstr(plait_last_error(), "NULL") != NULL, "%s(NULL): \"%s\"", queries[i].fn,
              plait_last_error());
  }
}

Test(life, null_output_is_invalid_argument_after_init) {
  INIT_OK();
  for (size_t i = 0; i < N_QUERIES; i++) {
    plait_result_t rc = queries[i].call(NULL);
    cr_expect_eq(rc, PLAIT_ERR_INVALID_ARGUMENT, "%s(NULL): %s", queries[i].fn,
                 plait_result_name(rc));
    cr_expect(strstr(plait_last_error(), queries[i].fn) != NULL, "\"%s\"", plait_last_error());
  }
  int on = 0;
  cr_expect_eq(plait_is_initialized(&on), PLAIT_SUCCESS);
  cr_expect_eq(on, 1, "a bad call ended the session");
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

Test(api, null_output_message_names_the_argument) {
  /* plait.h: "plait_last_error() ... says what was wrong (which argument ...)".
   * The argument is named as plait.h names it, as a word of its own. */
  for (size_t i = 0; i < N_QUERIES; i++) {
    cr_assert_eq(queries[i].call(NULL), PLAIT_ERR_INVALID_ARGUMENT);
    cr_expect(has_word(plait_last_error(), queries[i].arg),
              "%s(NULL): message does not name the argument '%s': \"%s\"", queries[i].fn,
              queries[i].arg, plait_last_error());
  }
}

Test(api, every_query_before_init_is_not_initialized) {
  expect_not_initialized("before plait_init");
}

Test(api, shutdown_before_init) {
  plait_result_t rc = plait_shutdown();
  cr_expect_eq(rc, PLAIT_ERR_NOT_INITIALIZED, "%s", plait_result_name(rc));
  cr_expect(strstr(plait_last_error(), "plait_shutdown") != NULL, "%s", plait_last_error());
  cr_expect(strstr(plait_last_error(), "not initialized") != NULL, "%s", plait_last_error());
  /* and it did nothing: still no session, still refused */
  expect_not_initialized("after a refused plait_shutdown");
  cr_expect_eq(plait_shutdown(), PLAIT_ERR_NOT_INITIALIZED);
}

Test(api, config_dump_and_help_null_buffer_with_a_size) {
  static const struct {
    const char *fn;
    plait_result_t (*call)(char *, size_t, size_t *);
  } fns[] = {{"plait_config_dump", plait_config_dump}, {"plait_config_help", plait_config_help}};
  for (size_t i = 0; i < 2; i++) {
    static const size_t sizes[] = {1, 64, (size_t)-1};
    for (size_t k = 0; k < 3; k++) {
      size_t needed = 77;
      plait_result_t rc = fns[i].call(NULL, sizes[k], &needed);
      cr_expect_eq(rc, PLAIT_ERR_INVALID_ARGUMENT, "%s(NULL, %zu): %s", fns[i].fn, sizes[k],
                   plait_result_name(rc));
      cr_expect(strstr(plait_last_error(), fns[i].fn) != NULL, "%s", plait_last_error());
      cr_expect(has_word(plait_last_error(), "buf"), "message does not name buf: %s",
                plait_last_error());
      cr_expect_eq(needed, 77, "%s wrote *needed on error", fns[i].fn);
    }
    /* NULL with size 0 is the documented way to ask for the size */
    size_t needed = 0;
    cr_expect_eq(fns[i].call(NULL, 0, &needed), PLAIT_ERR_BUFFER_TOO_SMALL, "%s", fns[i].fn);
    cr_expect_gt(needed, 1, "%s(NULL, 0) gives needed %zu", fns[i].fn, needed);
  }
}

Test(api, config_dump_before_init_rejects_a_bad_value) {
  setenv("PLAIT_STALL_ABORT_S", "soon", 1);
  char buf[4096];
  cr_expect_eq(plait_config_dump(buf, sizeof buf, NULL), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "PLAIT_STALL_ABORT_S='soon'") != NULL, "%s",
            plait_last_error());
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------ */

static void expect_single_rank_session(const char *transport) {
  for (size_t i = 0; i < N_QUERIES; i++) {
    const query_t *q = &queries[i];
    out_t o;
    fill(&o);
    plait_result_t rc = q->call(&o);
    cr_expect_eq(rc, PLAIT_SUCCESS, "%s: %s: %s", q->fn, plait_result_name(rc), plait_last_error());
    if (q->call == q_transport_name)
      cr_expect(!untouched(&o) && o.s && !strcmp(o.s, transport), "%s gives \"%s\", expected \"%s\"",
                q->fn, untouched(&o) || !o.s ? "(nothing)" : o.s, transport);
    else if (q->call == q_is_initialized)
      cr_expect_eq(o.i, 1, "%s gives %d", q->fn, o.i);
    else
      cr_expect_eq(o.i, q->single_value, "%s gives %d, expected %d", q->fn, o.i, q->single_value);
  }
}

Test(life, init_query_shutdown) {
  INIT_OK();
  expect_single_rank_session("fixture");
  plait_result_t rc = plait_shutdown();
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_shutdown: %s", plait_last_error());
  expect_not_initialized("after plait_shutdown");
  cr_expect_eq(plait_shutdown(), PLAIT_ERR_NOT_INITIALIZED, "second plait_shutdown");
}

Test(life, double_init) {
  INIT_OK();
  plait_result_t rc = plait_init();
  cr_expect_eq(rc, PLAIT_ERR_ALREADY_INITIALIZED, "%s", plait_result_name(rc));
  cr_expect(strstr(plait_last_error(), "plait_init") != NULL, "%s", plait_last_error());
  cr_expect(strstr(plait_last_error(), "already initialized") != NULL, "%s", plait_last_error());
  /* the first session is untouched */
  expect_single_rank_session("fixture");
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
}

Test(life, init_again_after_shutdown) {
  for (int round = 0; round < 3; round++) {
    plait_result_t rc = plait_init();
    cr_assert_eq(rc, PLAIT_SUCCESS, "round %d: plait_init: %s", round, plait_last_error());
    expect_single_rank_session("fixture");
    rc = plait_shutdown();
    cr_assert_eq(rc, PLAIT_SUCCESS, "round %d: plait_shutdown: %s", round, plait_last_error());
    expect_not_initialized("after plait_shutdown");
  }
}

Test(life, failed_init_leaves_plait_uninitialized) {
  static const struct {
    const char *var, *value;
    plait_result_t code;
    const char *words[3];
  } cases[] = {
      {"PLAIT_CACHE_CAPACITY", "-1", PLAIT_ERR_CONFIG, {"PLAIT_CACHE_CAPACITY", "'-1'", "integer"}},
      {"PLAIT_LOG_LEVEL", "chatty", PLAIT_ERR_CONFIG, {"PLAIT_LOG_LEVEL", "'chatty'", "debug"}},
      {"PLAIT_RENDEZVOUS", "nohost", PLAIT_ERR_CONFIG, {"PLAIT_RENDEZVOUS", "'nohost'", "host:port"}},
      {"PLAIT_RANK", "0", PLAIT_ERR_CONFIG, {"PLAIT_SIZE", NULL, NULL}},
      {"PLAIT_TRANSPORT", "nosuchtransport", PLAIT_ERR_PLUGIN,
       {"libplait-transport-nosuchtransport.so", NULL, NULL}},
      {"PLAIT_TRANSPORT", "initfail", PLAIT_ERR_TRANSPORT, {"the fabric is on fire", NULL, NULL}},
      {"PLAIT_TRANSPORT", "nullfn", PLAIT_ERR_PLUGIN, {"nullfn", NULL, NULL}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *saved = getenv(cases[i].var);
    char keep[256] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    setenv(cases[i].var, cases[i].value, 1);
    plait_result_t rc = plait_init();
    cr_expect_eq(rc, cases[i].code, "%s=%s: plait_init gave %s (%s), expected %s", cases[i].var,
                 cases[i].value, plait_result_name(rc), plait_last_error(),
                 plait_result_name(cases[i].code));
    for (size_t w = 0; w < 3 && cases[i].words[w]; w++)
      cr_expect(strstr(plait_last_error(), cases[i].words[w]) != NULL,
                "%s=%s: message does not mention \"%s\": \"%s\"", cases[i].var, cases[i].value,
                cases[i].words[w], plait_last_error());
    if (rc == PLAIT_SUCCESS) plait_shutdown();
    expect_not_initialized("after a failed plait_init");
    cr_expect_eq(plait_shutdown(), PLAIT_ERR_NOT_INITIALIZED);

    /* put the good value back: init works */
    if (saved)
      setenv(cases[i].var, keep, 1);
    else
      unsetenv(cases[i].var);
    rc = plait_init();
    cr_assert_eq(rc, PLAIT_SUCCESS, "after %s=%s failed, a good plait_init: %s", cases[i].var,
                 cases[i].value, plait_last_error());
    expect_single_rank_session("fixture");
    cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
  }
}

Test(life, config_dump_after_init_shows_the_values_in_use) {
  setenv("PLAIT_FUSION_THRESHOLD", "1K", 1);
  INIT_OK();
  setenv("PLAIT_FUSION_THRESHOLD", "2K", 1);
  setenv("PLAIT_CACHE_CAPACITY", "bad", 1); /* not read again while initialized */
  char buf[8192];
  plait_result_t rc = plait_config_dump(buf, sizeof buf, NULL);
  cr_expect_eq(rc, PLAIT_SUCCESS, "%s: %s", plait_result_name(rc), plait_last_error());
  cr_expect(strstr(buf, "PLAIT_FUSION_THRESHOLD=1024\n") != NULL, "%s", buf);
  cr_expect(strstr(buf, "PLAIT_TRANSPORT=fixture\n") != NULL, "%s", buf);
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS);
  /* after shutdown the environment is read again */
  cr_expect_eq(plait_config_dump(buf, sizeof buf, NULL), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "PLAIT_CACHE_CAPACITY") != NULL, "%s", plait_last_error());
}

/* Unset, PLAIT_TRANSPORT is auto: one rank takes ofi where it was built
 * (nothing to open), else gloo (tests/core/test_transport_auto.c: the rule). */
Test(life, default_transport_is_auto) {
  static const char gloo[] = PLAIT_TEST_LIB_DIR "/libplait-transport-gloo.so";
  static const char ofi[] = PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so";
  if (access(gloo, R_OK) != 0)
    cr_skip_test("no %s in this build (libgloo-dev not found at configure time)", gloo);
  unsetenv("PLAIT_TRANSPORT");
  INIT_OK();
  expect_single_rank_session(access(ofi, R_OK) == 0 ? "ofi" : "gloo");
  char buf[8192];
  cr_expect_eq(plait_config_dump(buf, sizeof buf, NULL), PLAIT_SUCCESS);
  cr_expect(strstr(buf, "PLAIT_TRANSPORT=auto\n") != NULL, "%s", buf);
  cr_expect_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
  expect_not_initialized("after plait_shutdown");
}

/* plait.h: the transport's name stays valid until the next plait_init, so
 * after plait_shutdown too (the ASan build sees a read of freed memory). */
Test(life, transport_name_stays_valid_after_shutdown) {
  INIT_OK();
  const char *name = NULL;
  cr_assert_eq(plait_transport_name(&name), PLAIT_SUCCESS, "%s", plait_last_error());
  char copy[80];
  snprintf(copy, sizeof copy, "%s", name);
  cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_str_eq(name, copy);
}

/* ------------------------------------------------------------------------ */
/* Result codes, dtypes, ops, versions                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
  plait_result_t code;
  int value;
  const char *name, *message;
} result_row_t;

static const result_row_t results[] = {
#define X(name, value, message) {name, value, #name, message},
    PLAIT_RESULT_LIST(X)
#undef X
};
#define N_RESULTS (sizeof results / sizeof results[0])

Test(tables, result_names_and_messages) {
  cr_expect_eq((size_t)PLAIT_RESULT_COUNT_, N_RESULTS, "codes are not 0..N-1");
  for (size_t i = 0; i < N_RESULTS; i++) {
    const result_row_t *r = &results[i];
    cr_expect_eq((int)r->code, (int)i, "%s = %d, expected %zu (codes are only appended)", r->name,
                 r->code, i);
    cr_expect_eq((int)r->code, r->value);
    const char *name = plait_result_name(r->code), *text = plait_strerror(r->code);
    cr_assert_not_null(name);
    cr_assert_not_null(text);
    cr_expect_str_eq(name, r->name);
    cr_expect_str_eq(text, r->message);
    cr_expect_gt(strlen(text), 0, "%s has an empty message", r->name);
    cr_expect_str_neq(text, "unknown result code", "%s", r->name);
    cr_expect_str_neq(name, "PLAIT_RESULT_UNKNOWN", "%s", r->name);
    for (size_t j = 0; j < i; j++) {
      cr_expect_str_neq(name, plait_result_name(results[j].code), "%s and %s share a name", r->name,
                        results[j].name);
      cr_expect_str_neq(text, plait_strerror(results[j].code), "%s and %s share a message", r->name,
                        results[j].name);
    }
  }
  cr_expect_eq(PLAIT_SUCCESS, 0);
}

Test(tables, unknown_result_codes) {
  const plait_result_t bad[] = {(plait_result_t)-1, PLAIT_RESULT_COUNT_,
                                (plait_result_t)(PLAIT_RESULT_COUNT_ + 1), (plait_result_t)100000};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_str_eq(plait_strerror(bad[i]), "unknown result code", "code %d", (int)bad[i]);
    cr_expect_str_eq(plait_result_name(bad[i]), "PLAIT_RESULT_UNKNOWN", "code %d", (int)bad[i]);
  }
}

Test(tables, dtypes) {
  static const struct {
    plait_dtype_t dtype;
    const char *text;
    size_t bytes;
  } rows[] = {
#define X(name, value, text, bytes) {name, text, bytes},
      PLAIT_DTYPE_LIST(X)
#undef X
  };
  const size_t n = sizeof rows / sizeof rows[0];
  cr_expect_eq((size_t)PLAIT_DTYPE_COUNT_, n);
  for (size_t i = 0; i < n; i++) {
    cr_expect_eq((size_t)rows[i].dtype, i);
    const char *name = plait_dtype_name(rows[i].dtype);
    cr_assert_not_null(name, "plait_dtype_name(%zu) is NULL", i);
    cr_expect_str_eq(name, rows[i].text);
    cr_expect_eq(plait_dtype_size(rows[i].dtype), rows[i].bytes, "%s", rows[i].text);
    for (size_t j = 0; j < i; j++) cr_expect_str_neq(name, plait_dtype_name(rows[j].dtype));
  }
  const plait_dtype_t bad[] = {(plait_dtype_t)-1, PLAIT_DTYPE_COUNT_,
                               (plait_dtype_t)(PLAIT_DTYPE_COUNT_ + 1), (plait_dtype_t)1000};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_null(plait_dtype_name(bad[i]), "plait_dtype_name(%d)", (int)bad[i]);
    cr_expect_eq(plait_dtype_size(bad[i]), 0, "plait_dtype_size(%d)", (int)bad[i]);
  }
  /* spot checks independent of the list */
  cr_expect_eq(plait_dtype_size(PLAIT_FLOAT64), 8);
  cr_expect_eq(plait_dtype_size(PLAIT_BFLOAT16), 2);
  cr_expect_str_eq(plait_dtype_name(PLAIT_FLOAT32), "float32");
}

Test(tables, ops) {
  static const struct {
    plait_op_t op;
    const char *text;
  } rows[] = {
#define X(name, value, text) {name, text},
      PLAIT_OP_LIST(X)
#undef X
  };
  const size_t n = sizeof rows / sizeof rows[0];
  cr_expect_eq((size_t)PLAIT_OP_COUNT_, n);
  for (size_t i = 0; i < n; i++) {
    cr_expect_eq((size_t)rows[i].op, i);
    const char *name = plait_op_name(rows[i].op);
    cr_assert_not_null(name, "plait_op_name(%zu) is NULL", i);
    cr_expect_str_eq(name, rows[i].text);
    for (size_t j = 0; j < i; j++) cr_expect_str_neq(name, plait_op_name(rows[j].op));
  }
  const plait_op_t bad[] = {(plait_op_t)-1, PLAIT_OP_COUNT_, (plait_op_t)(PLAIT_OP_COUNT_ + 1),
                            (plait_op_t)1000};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_null(plait_op_name(bad[i]), "plait_op_name(%d)", (int)bad[i]);
  cr_expect_str_eq(plait_op_name(PLAIT_OP_AVERAGE), "average");
}

/* plait/dtypes.h, for plugins: the library's functions are built on it, so
 * the tables above test the names and sizes; here the rest. */
Test(tables, dtypes_header_validity_and_masks) {
  for (int v = -2; v < 64; v++) {
    int dt = v >= 0 && v < PLAIT_DTYPE_COUNT_, op = v >= 0 && v < PLAIT_OP_COUNT_;
    cr_expect_eq(plait_dtype_valid_inline((plait_dtype_t)v), dt, "dtype %d", v);
    cr_expect_eq(plait_op_valid_inline((plait_op_t)v), op, "op %d", v);
    if (v >= 0 && v < 32) {
      cr_expect_eq(!!(PLAIT_DTYPE_MASK_ALL & PLAIT_DTYPE_BIT(v)), dt, "dtype bit %d", v);
      cr_expect_eq(!!(PLAIT_OP_MASK_ALL & PLAIT_OP_BIT(v)), op, "op bit %d", v);
    }
    cr_expect_str_eq(plait_strerror_inline((plait_result_t)v), plait_strerror((plait_result_t)v));
  }
}

Test(tables, versions) {
  cr_expect_eq(plait_version(), (unsigned)PLAIT_VERSION);
  cr_expect_eq(PLAIT_VERSION, PLAIT_VERSION_MAJOR * 10000 + PLAIT_VERSION_MINOR * 100 +
                                  PLAIT_VERSION_PATCH);
  cr_assert_not_null(plait_version_string());
  cr_expect_str_eq(plait_version_string(), PLAIT_VERSION_STRING);
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", PLAIT_VERSION_MAJOR, PLAIT_VERSION_MINOR,
           PLAIT_VERSION_PATCH);
  cr_expect_str_eq(PLAIT_VERSION_STRING, want, "PLAIT_VERSION_STRING disagrees with the numbers");
  cr_expect_eq(plait_abi_version(), (unsigned)PLAIT_ABI_VERSION);
}

/* ------------------------------------------------------------------------ */
/* plait_last_error: per thread                                              */
/* ------------------------------------------------------------------------ */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int step;
  char fresh[256];   /* what the thread saw before doing anything */
  char failed[256];  /* its message after its own failure */
  char later[256];   /* its message after the main thread failed again */
} shared_t;

static void wait_step(shared_t *s, int step) {
  pthread_mutex_lock(&s->mu);
  while (s->step < step) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

static void set_step(shared_t *s, int step) {
  pthread_mutex_lock(&s->mu);
  s->step = step;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void *other_thread(void *arg) {
  shared_t *s = arg;
  snprintf(s->fresh, sizeof s->fresh, "%s", plait_last_error());
  plait_shutdown(); /* fails: not initialized */
  snprintf(s->failed, sizeof s->failed, "%s", plait_last_error());
  set_step(s, 1);
  wait_step(s, 2); /* main fails again meanwhile */
  snprintf(s->later, sizeof s->later, "%s", plait_last_error());
  return NULL;
}

Test(last_error, empty_in_a_fresh_thread_and_per_thread) {
  /* the main thread has failed before the other thread starts */
  cr_assert_eq(plait_rank(NULL), PLAIT_ERR_INVALID_ARGUMENT);
  char mine[256];
  snprintf(mine, sizeof mine, "%s", plait_last_error());
  cr_assert(strstr(mine, "plait_rank") != NULL, "%s", mine);

  shared_t s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, other_thread, &s), 0);
  wait_step(&s, 1);
  cr_expect_str_eq(plait_last_error(), mine, "the other thread's failure changed this thread's error");
  cr_assert_eq(plait_size(NULL), PLAIT_ERR_INVALID_ARGUMENT);
  char second[256];
  snprintf(second, sizeof second, "%s", plait_last_error());
  set_step(&s, 2);
  pthread_join(th, NULL);

  cr_expect_str_eq(s.fresh, "", "a fresh thread sees \"%s\"", s.fresh);
  cr_expect(strstr(s.failed, "plait_shutdown") != NULL, "the other thread's own error: \"%s\"",
            s.failed);
  cr_expect_str_eq(s.later, s.failed, "this thread's failure changed the other thread's error");
  cr_expect(strstr(second, "plait_size") != NULL, "%s", second);
  pthread_cond_destroy(&s.cv);
  pthread_mutex_destroy(&s.mu);
}

Test(last_error, success_leaves_it_unchanged) {
  cr_assert_eq(plait_cross_size(NULL), PLAIT_ERR_INVALID_ARGUMENT);
  char before[256];
  snprintf(before, sizeof before, "%s", plait_last_error());
  int flag = -1;
  cr_assert_eq(plait_is_initialized(&flag), PLAIT_SUCCESS);
  (void)plait_version();
  (void)plait_strerror(PLAIT_ERR_TIMEOUT);
  size_t needed;
  char buf[16];
  (void)plait_config_help(buf, sizeof buf, &needed); /* fails: too small */
  cr_expect_str_neq(plait_last_error(), before, "a failure must replace the message");
  snprintf(before, sizeof before, "%s", plait_last_error());
  char big[16384];
  cr_assert_eq(plait_config_help(big, sizeof big, NULL), PLAIT_SUCCESS);
  cr_expect_str_eq(plait_last_error(), before, "a successful call changed the last error");
}

Test(last_error, empty_before_any_failure) {
  cr_expect_str_eq(plait_last_error(), "");
  cr_assert_not_null(plait_last_error());
}

/* plait_transport_algorithm: what the plugin says, "" from a first-version
 * plugin whose table ends before the field (the fixture), clear errors. */
Test(life, transport_algorithm_of_a_first_version_plugin_is_empty) {
  const char *name = "x";
  cr_expect_eq(plait_transport_algorithm("allreduce", 1024, &name), PLAIT_ERR_NOT_INITIALIZED);
  INIT_OK();
  cr_assert_eq(plait_transport_algorithm("allreduce", 1024, &name), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_expect_str_eq(name, "");
  cr_expect_eq(plait_transport_algorithm("allsum", 1024, &name), PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(plait_last_error(), "collective 'allsum' is not allreduce"), "%s",
            plait_last_error());
  cr_expect_eq(plait_transport_algorithm(NULL, 1, &name), PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect_eq(plait_transport_algorithm("barrier", 0, NULL), PLAIT_ERR_INVALID_ARGUMENT);
  plait_shutdown();
}

Test(api, transport_algorithm_of_gloo_and_ofi) {
  plait_test_set_plugin_path();
  const char *name = NULL;
  setenv("PLAIT_TRANSPORT", "gloo", 1);
  INIT_OK();
  cr_assert_eq(plait_transport_algorithm("allreduce", 64 << 20, &name), PLAIT_SUCCESS);
  cr_expect_str_eq(name, "ring (gloo)");
  cr_assert_eq(plait_transport_algorithm("broadcast", 4096, &name), PLAIT_SUCCESS);
  cr_expect_str_eq(name, "");
  plait_shutdown();
  setenv("PLAIT_TRANSPORT", "ofi", 1);
  /* A job of one rank does not touch libfabric: only a plugin that was not
   * built (no libfabric at configure time) is a reason to skip. */
  if (access(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", F_OK) != 0) {
    cr_skip_test("the ofi plugin is not built here (" PLAIT_TEST_LIB_DIR
                 "/libplait-transport-ofi.so is missing: no libfabric at configure time)");
    return;
  }
  INIT_OK();
  /* One rank moves nothing (the size rules at 2 ranks: tests/tools/bench). */
  cr_assert_eq(plait_transport_algorithm("allreduce", 4096, &name), PLAIT_SUCCESS);
  cr_expect_str_eq(name, "none (one rank)");
  plait_shutdown();
}

/* plait_transport_query: what plait_init would load, with no engine running
 * (the bindings' build queries); plait_transport_list: the installed names. */
Test(life, transport_query_and_list_need_no_engine) {
  plait_transport_info_t info = {.struct_size = sizeof info};
  cr_assert_eq(plait_transport_query("fixture", "no_such_version_fn", &info), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_expect_eq(info.found, 1);
  cr_expect_eq(info.host_memory, !!(info.caps & PLAIT_CAP_HOST_MEMORY));
  cr_expect_eq(info.device_memory, !!(info.caps & PLAIT_CAP_DEVICE_MEMORY));
  cr_expect(strstr(info.path, "/libplait-transport-fixture.so"), "%s", info.path);
  cr_expect_eq(info.library_version, 0);
  cr_assert_eq(plait_transport_query("nosuch", NULL, &info), PLAIT_SUCCESS);
  cr_expect_eq(info.found, 0);
  cr_expect_eq(info.caps, 0);
  cr_expect_str_eq(info.path, "");
  cr_expect(strstr(plait_last_error(), "'nosuch'"), "%s", plait_last_error());
  info.struct_size = 8;
  cr_expect_eq(plait_transport_query("fixture", NULL, &info), PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect_eq(plait_transport_query(NULL, NULL, &info), PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect_eq(plait_transport_query("fixture", NULL, NULL), PLAIT_ERR_INVALID_ARGUMENT);

  size_t needed = 0;
  cr_expect_eq(plait_transport_list(NULL, 0, &needed), PLAIT_ERR_BUFFER_TOO_SMALL);
  char buf[4096];
  cr_assert(needed > 1 && needed <= sizeof buf, "%zu", needed);
  cr_assert_eq(plait_transport_list(buf, sizeof buf, &needed), PLAIT_SUCCESS, "%s",
               plait_last_error());
  cr_expect(strstr(buf, "fixture\n"), "%s", buf);
  cr_expect_eq(strlen(buf) + 1, needed);
  cr_expect_eq(plait_transport_list(NULL, 4, NULL), PLAIT_ERR_INVALID_ARGUMENT);
}
