/*
 * Tests of the timeline (src/engine/observe/timeline.h) and of plait_timeline_start/stop.
 *
 * Every file is parsed by a strict JSON parser written below (RFC 8259: no
 * raw control characters in strings, well-formed UTF-8, nothing after the
 * array) and, where python3 is installed, checked again by Python's json.
 * Each test runs in its own process and writes under its own mkdtemp folder.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plait/plait.h"
#include "ranks.h"
#include "api/current.h"
#include "engine/observe/timeline.h"

/* ------------------------------------------------------------------------ */
/* A strict JSON parser                                                      */
/* ------------------------------------------------------------------------ */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
  int type;
  double num;
  char *str; /* J_STR: unescaped UTF-8, NUL-terminated */
  size_t len, n;
  struct jv *items; /* J_ARR, J_OBJ (values) */
  char **keys;      /* J_OBJ */
} jv_t;

typedef struct {
  const char *p, *end;
} jp_t;

static void jv_free(jv_t *v) {
  for (size_t i = 0; i < v->n; i++) {
    jv_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->str);
  memset(v, 0, sizeof *v);
}

static void ws(jp_t *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int hex4(jp_t *j, unsigned *out) {
  if (j->end - j->p < 4) return -1;
  *out = 0;
  for (int i = 0; i < 4; i++) {
    char c = *j->p++;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    *out = *out * 16 + (unsigned)d;
  }
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 63)),
           o[2] = (char)(0x80 | (cp & 63)), 3;
  return o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 63)),
         o[2] = (char)(0x80 | (cp >> 6 & 63)), o[3] = (char)(0x80 | (cp & 63)), 4;
}

/* Length of a well-formed UTF-8 sequence at s, 0 if none. */
static size_t utf8_ok(const unsigned char *s, size_t n) {
  unsigned c = s[0], lo = 0x80, hi = 0xBF;
  size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (c == 0xE0) lo = 0xA0;
  if (c == 0xED) hi = 0x9F;
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F;
  if (!len || n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

static int parse_string(jp_t *j, char **out, size_t *outlen) {
  if (*j->p != '"') return -1;
  j->p++;
  const char *q = j->p; /* the text is at least as long as what it decodes to */
  while (q < j->end && *q != '"') q += *q == '\\' && q + 1 < j->end ? 2 : 1;
  char *s = malloc((size_t)(q - j->p) + 1);
  size_t o = 0;
  while (j->p < j->end && *j->p != '"') {
    unsigned char c = (unsigned char)*j->p;
    if (c < 0x20) goto bad;
    if (c >= 0x80) {
      size_t len = utf8_ok((const unsigned char *)j->p, (size_t)(j->end - j->p));
      if (!len) goto bad;
      memcpy(s + o, j->p, len), o += len, j->p += len;
      continue;
    }
    j->p++;
    if (c != '\\') {
      s[o++] = (char)c;
      continue;
    }
    if (j->p >= j->end) goto bad;
    char e = *j->p++;
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *hit = e ? strchr(from, e) : NULL;
    if (hit) {
      s[o++] = to[hit - from];
      continue;
    }
    unsigned cp, lo;
    if (e != 'u' || hex4(j, &cp)) goto bad;
    if (cp >= 0xDC00 && cp <= 0xDFFF) goto bad;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') goto bad;
      j->p += 2;
      if (hex4(j, &lo) || lo < 0xDC00 || lo > 0xDFFF) goto bad;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    o += put_utf8(s + o, cp);
  }
  if (j->p >= j->end) goto bad;
  j->p++;
  s[o] = '\0';
  *out = s;
  *outlen = o;
  return 0;
bad:
  free(s);
  return -1;
}

static int parse_number(jp_t *j, double *out) {
  const char *s = j->p;
  if (j->p < j->end && *j->p == '-') j->p++;
  if (j->p >= j->end) return -1;
#define DIGITS(min)                                                            \
  do {                                                                         \
    int k_ = 0;                                                                \
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++, k_++;        \
    if (k_ < (min)) return -1;                                                 \
  } while (0)
  if (*j->p == '0') j->p++;
  else DIGITS(1);
  if (j->p < j->end && *j->p == '.') {
    j->p++;
    DIGITS(1);
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
    DIGITS(1);
  }
#undef DIGITS
  char tmp[64];
  size_t n = (size_t)(j->p - s);
  if (n >= sizeof tmp) return -1;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  *out = strtod(tmp, NULL);
  return 0;
}

static int parse_value(jp_t *j, jv_t *v, int depth);

static int parse_items(jp_t *j, jv_t *v, int depth, int obj) {
  char close = obj ? '}' : ']';
  size_t cap = 0;
  j->p++;
  ws(j);
  if (j->p < j->end && *j->p == close) return j->p++, 0;
  for (;;) {
    if (v->n == cap) {
      cap = cap ? cap * 2 : 8;
      v->items = realloc(v->items, cap * sizeof *v->items);
      if (obj) v->keys = realloc(v->keys, cap * sizeof *v->keys);
    }
    jv_t *it = &v->items[v->n];
    memset(it, 0, sizeof *it);
    if (obj) {
      size_t kl;
      ws(j);
      if (j->p >= j->end || parse_string(j, &v->keys[v->n], &kl)) return -1;
      ws(j);
      if (j->p >= j->end || *j->p++ != ':') return v->n++, -1;
    }
    v->n++;
    if (parse_value(j, it, depth + 1)) return -1;
    ws(j);
    if (j->p >= j->end) return -1;
    char c = *j->p++;
    if (c == close) return 0;
    if (c != ',') return -1;
  }
}

static int parse_value(jp_t *j, jv_t *v, int depth) {
  ws(j);
  if (j->p >= j->end || depth > 64) return -1;
  char c = *j->p;
  if (c == '{' || c == '[') return v->type = c == '{' ? J_OBJ : J_ARR, parse_items(j, v, depth, c == '{');
  if (c == '"') return v->type = J_STR, parse_string(j, &v->str, &v->len);
  static const char *words[] = {"null", "true", "false"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, words[i], n))
      return v->type = i ? J_BOOL : J_NULL, v->num = i == 1, j->p += n, 0;
  }
  return v->type = J_NUM, parse_number(j, &v->num);
}

static const jv_t *jget(const jv_t *o, const char *key) {
  if (!o || o->type != J_OBJ) return NULL;
  for (size_t i = 0; i < o->n; i++)
    if (!strcmp(o->keys[i], key)) return &o->items[i];
  return NULL;
}

static const char *jstr(const jv_t *o, const char *key) {
  const jv_t *v = jget(o, key);
  return v && v->type == J_STR ? v->str : NULL;
}

static double jnum(const jv_t *o, const char *key) {
  const jv_t *v = jget(o, key);
  return v && v->type == J_NUM ? v->num : -1;
}

/* ------------------------------------------------------------------------ */
/* Reading a timeline                                                        */
/* ------------------------------------------------------------------------ */

typedef struct ev {
  char ph, s;
  int pid, tid;
  double ts, sort;
  char *name, *arg; /* arg: args.name, or NULL */
} ev_t;

typedef struct evs {
  ev_t *e;
  size_t n, cap;
} evs_t;

static void evs_free(evs_t *v) {
  for (size_t i = 0; i < v->n; i++) free(v->e[i].name), free(v->e[i].arg);
  free(v->e);
  memset(v, 0, sizeof *v);
}

static void evs_add(evs_t *v, const jv_t *o) {
  if (v->n == v->cap) v->cap = v->cap ? v->cap * 2 : 1024, v->e = realloc(v->e, v->cap * sizeof *v->e);
  ev_t *e = &v->e[v->n++];
  const char *ph = jstr(o, "ph"), *s = jstr(o, "s"), *name = jstr(o, "name");
  const jv_t *args = jget(o, "args");
  const char *arg = jstr(args, "name");
  e->ph = ph ? ph[0] : '?';
  e->s = s ? s[0] : 0;
  e->pid = (int)jnum(o, "pid");
  e->tid = (int)jnum(o, "tid");
  e->ts = jnum(o, "ts");
  e->sort = jnum(args, "sort_index");
  e->name = name ? strdup(name) : NULL;
  e->arg = arg ? strdup(arg) : NULL;
}

/* The whole file, read under flock(LOCK_SH) as a cooperating reader does. */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  flock(fileno(f), LOCK_SH);
  size_t cap = 1 << 16, len = 0, got;
  char *s = malloc(cap);
  while ((got = fread(s + len, 1, cap - len, f)) > 0)
    if ((len += got) == cap) s = realloc(s, cap *= 2);
  flock(fileno(f), LOCK_UN);
  fclose(f);
  *n = len;
  return s;
}

/* Parses text as one JSON array of objects, streaming: each element is added
 * to out (when not NULL) and freed. 0 when the text is valid. */
static int scan_array(const char *text, size_t n, evs_t *out) {
  jp_t j = {text, text + n};
  ws(&j);
  if (j.p >= j.end || *j.p++ != '[') return -1;
  ws(&j);
  int closed = j.p < j.end && *j.p == ']';
  if (closed) j.p++;
  while (!closed) {
    jv_t v;
    memset(&v, 0, sizeof v);
    int bad = parse_value(&j, &v, 1) || v.type != J_OBJ;
    if (!bad && out) evs_add(out, &v);
    jv_free(&v);
    ws(&j);
    if (bad || j.p >= j.end) return -1;
    char c = *j.p++;
    if (c == ']') closed = 1;
    else if (c != ',') return -1;
  }
  ws(&j);
  return j.p == j.end ? 0 : -1;
}

/* 1 when Python's json accepts the file, 0 when not, -1 without python3. */
static int python_accepts(const char *path) {
  static int have = -1;
  if (have < 0) have = system("command -v python3 >/dev/null 2>&1") == 0;
  if (!have) return -1;
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1],encoding=\"utf-8\")); "
           "assert isinstance(d, list)' '%s'", path);
  return system(cmd) == 0;
}

/* Loads path (which must be a valid timeline) into out. */
static void load(const char *path, evs_t *out) {
  size_t n;
  char *text = slurp(path, &n);
  cr_assert(text, "cannot read %s", path);
  memset(out, 0, sizeof *out);
  cr_assert_eq(scan_array(text, n, out), 0, "%s is not a valid JSON array (%zu bytes)", path, n);
  free(text);
  if (n < (16u << 20)) cr_assert_neq(python_accepts(path), 0, "python's json rejects %s", path);
}

static const ev_t *find(const evs_t *v, char ph, const char *name, int tid) {
  for (size_t i = 0; i < v->n; i++)
    if (v->e[i].ph == ph && (!name || (v->e[i].name && !strcmp(v->e[i].name, name))) &&
        (tid < 0 || v->e[i].tid == tid))
      return &v->e[i];
  return NULL;
}

/* The tid whose thread_name is name, or -1. */
static int tid_of(const evs_t *v, const char *name) {
  for (size_t i = 0; i < v->n; i++)
    if (v->e[i].ph == 'M' && !strcmp(v->e[i].name, "thread_name") && v->e[i].arg &&
        !strcmp(v->e[i].arg, name))
      return v->e[i].tid;
  return -1;
}

/* ts never decreases on a tid; every B has its E (same tid and name, stack
 * order). Returns the number of pairs. */
static size_t check_pairs(const evs_t *v) {
  enum { MAXTID = 4096, DEPTH = 16 };
  static const char *stack[MAXTID][DEPTH];
  static int depth[MAXTID];
  static double last[MAXTID];
  memset(depth, 0, sizeof depth);
  for (int i = 0; i < MAXTID; i++) last[i] = -1;
  size_t pairs = 0;
  for (size_t i = 0; i < v->n; i++) {
    const ev_t *e = &v->e[i];
    if (e->ph != 'B' && e->ph != 'E') continue;
    cr_assert(e->tid >= 0 && e->tid < MAXTID, "tid %d", e->tid);
    cr_assert_geq(e->ts, last[e->tid], "ts went back on tid %d: %f after %f", e->tid, e->ts,
                  last[e->tid]);
    last[e->tid] = e->ts;
    int *d = &depth[e->tid];
    if (e->ph == 'B') {
      cr_assert_lt(*d, DEPTH);
      stack[e->tid][(*d)++] = e->name;
    } else {
      cr_assert_gt(*d, 0, "E '%s' without B on tid %d", e->name, e->tid);
      cr_assert_str_eq(stack[e->tid][--*d], e->name, "E does not match its B on tid %d", e->tid);
      pairs++;
    }
  }
  for (int t = 0; t < MAXTID; t++) cr_assert_eq(depth[t], 0, "unclosed B on tid %d", t);
  return pairs;
}


/* ------------------------------------------------------------------------ */
/* Fixtures                                                                  */
/* ------------------------------------------------------------------------ */

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE 4 /* sanitizers: fewer events in the big tests */
#else
#define SCALE 1
#endif

static char g_dir[256];

static void make_dir(void) {
  const char *t = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/plait-tl-XXXXXX", t && *t ? t : "/tmp");
  cr_assert(mkdtemp(g_dir), "mkdtemp %s", g_dir);
}

static void remove_dir(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (g_dir[0] && system(cmd)) fprintf(stderr, "could not remove %s\n", g_dir);
}

/* The timeline under test: one engine's (timeline.h). */
static plait_timeline_t *TL;

static void tl_init(void) {
  make_dir();
  TL = plait_tl_create();
  cr_assert(TL, "plait_tl_create");
}

static void tl_fini(void) {
  plait_tl_destroy(TL);
  remove_dir();
}

static const char *in_dir(const char *file) {
  static char paths[8][512];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, 512, "%s/%s", g_dir, file);
  return p;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define START(path, rank)                                                      \
  do {                                                                         \
    plait_result_t start_rc_ = plait_tl_start(TL, (path), (rank));                 \
    cr_assert_eq(start_rc_, PLAIT_SUCCESS, "plait_tl_start: %s",               \
                 plait_last_error());                                          \
  } while (0)

TestSuite(timeline, .init = tl_init, .fini = tl_fini);

/* ------------------------------------------------------------------------ */
/* The file                                                                  */
/* ------------------------------------------------------------------------ */

/* The checker itself: what it must reject, what it must accept. */
Test(timeline, the_json_checker_is_strict) {
  static const char *bad[] = {
      "",           "[",           "[{}",       "[{},]",          "[{}]x",         "[{}][]",
      "[1]",        "[{\"a\"}]",   "[{\"a\" 1}]", "[{\"a\":01}]",   "[{\"a\":1.}]",  "[{\"a\":-}]",
      "[{\"a\":\"\x01\"}]",       "[{\"a\":\"\xff\"}]",           "[{\"a\":\"\xc0\xaf\"}]",
      "[{\"a\":\"\\ud800\"}]",     "[{\"a\":\"\\x41\"}]",          "[{\"a\":\"\n\"}]",
      "[{\"a\":tru}]",              "[{\"a\":\"open}]",
  };
  static const char *good[] = {
      "[]", " [ { } ] \n", "[{\"a\":[1,-2.5e3,true,false,null,{\"b\":\"\\u00e9\\ud83d\\ude00\\/\"}]}]",
      "[{\"a\":\"\xc3\xa9\xe5\xbc\xa0\xf0\x9f\x98\x80\"},{}]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    cr_expect_neq(scan_array(bad[i], strlen(bad[i]), NULL), 0, "accepted bad %zu: %s", i, bad[i]);
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    cr_expect_eq(scan_array(good[i], strlen(good[i]), NULL), 0, "rejected good %zu: %s", i, good[i]);
}

Test(timeline, start_stop_gives_a_valid_array_with_the_rank_rows) {
  const char *path = in_dir("tl.json");
  cr_assert_eq(plait_tl_active(TL), 0);
  START(path, 3);
  cr_assert_eq(plait_tl_active(TL), 1);
  plait_tl_stop(TL);
  cr_assert_eq(plait_tl_active(TL), 0);
  evs_t v;
  load(path, &v);
  const ev_t *p = find(&v, 'M', "process_name", -1);
  cr_assert(p && p->pid == 3 && p->arg && !strcmp(p->arg, "rank 3"), "process_name 'rank 3'");
  cr_assert_eq(tid_of(&v, "coordinator"), 0);
  for (size_t i = 0; i < v.n; i++) cr_expect_eq(v.e[i].pid, 3, "event %zu has pid %d", i, v.e[i].pid);
  evs_free(&v);
}

Test(timeline, begin_end_mark_fields) {
  const char *path = in_dir("tl.json");
  START(path, 0);
  plait_tl_begin(TL, "layer1/weight", "NEGOTIATE");
  plait_tl_mark(TL, "CYCLE");
  plait_tl_end(TL, "layer1/weight", "NEGOTIATE");
  plait_tl_stop(TL);
  evs_t v;
  load(path, &v);
  int tid = tid_of(&v, "layer1/weight");
  cr_assert_eq(tid, 1, "the first tensor is row 1");
  const ev_t *b = find(&v, 'B', "NEGOTIATE", tid), *e = find(&v, 'E', "NEGOTIATE", tid);
  const ev_t *m = find(&v, 'i', "CYCLE", 0);
  cr_assert(b && e && m, "B, E and the CYCLE mark are all there");
  cr_assert_eq(m->s, 't', "a mark is a thread-scoped instant");
  cr_assert(b->ts >= 0 && b->ts <= m->ts && m->ts <= e->ts, "ts %f %f %f", b->ts, m->ts, e->ts);
  evs_free(&v);
}

Test(timeline, every_tensor_gets_a_named_row_in_first_seen_order) {
  const char *path = in_dir("tl.json");
  START(path, 1);
  char name[64];
  for (int round = 0; round < 3; round++)
    for (int i = 49; i >= 0; i--) {
      snprintf(name, sizeof name, "tensor.%02d", i);
      plait_tl_begin(TL, name, "QUEUE");
      plait_tl_end(TL, name, "QUEUE");
    }
  plait_tl_stop(TL);
  evs_t v;
  load(path, &v);
  size_t rows = 0;
  for (size_t i = 0; i < v.n; i++) rows += v.e[i].ph == 'M' && !strcmp(v.e[i].name, "thread_name");
  cr_assert_eq(rows, 51, "50 tensors and the coordinator, each named once");
  for (int i = 0; i < 50; i++) {
    snprintf(name, sizeof name, "tensor.%02d", i);
    int tid = tid_of(&v, name);
    cr_assert_eq(tid, 50 - i, "%s first seen as number %d", name, 50 - i);
    int sorted = 0;
    for (size_t k = 0; k < v.n; k++)
      sorted |= v.e[k].ph == 'M' && !strcmp(v.e[k].name, "thread_sort_index") &&
                v.e[k].tid == tid && v.e[k].sort == tid;
    cr_assert(sorted, "thread_sort_index for %s", name);
    cr_assert(find(&v, 'B', "QUEUE", tid), "events of %s are on its row", name);
  }
  cr_assert_eq(check_pairs(&v), 150);
  evs_free(&v);
}

typedef struct {
  int thread, pairs; /* emits at most this many pairs, */
  atomic_int *stop;  /* fewer when *stop is set (may be NULL), */
  long pause_ns;     /* sleeping this long after every 8 pairs */
} emitter_arg_t;

/* Nested pairs over 8 tensors of this thread's own. Every loop is bounded,
 * so that no test can write without end. */
static void *emitter(void *p) {
  emitter_arg_t *a = p;
  char tensor[8][64];
  for (int k = 0; k < 8; k++) snprintf(tensor[k], sizeof tensor[k], "grad/t%d/%d", a->thread, k);
  for (int i = 0; i < a->pairs && !(a->stop && atomic_load(a->stop)); i += 2) {
    const char *t = tensor[i % 8];
    plait_tl_begin(TL, t, "QUEUE");
    plait_tl_begin(TL, t, "GLOO_ALLREDUCE");
    plait_tl_end(TL, t, "GLOO_ALLREDUCE");
    plait_tl_end(TL, t, "QUEUE");
    if (a->pause_ns && i % 8 == 0) nanosleep(&(struct timespec){0, a->pause_ns}, NULL);
  }
  return NULL;
}

Test(timeline, four_threads_every_pair_written_in_order) {
  const char *path = in_dir("tl.json");
  START(path, 0);
  pthread_t th[4];
  emitter_arg_t args[4];
  for (int t = 0; t < 4; t++) {
    args[t] = (emitter_arg_t){t, 10000, NULL, 0};
    pthread_create(&th[t], NULL, emitter, &args[t]);
  }
  for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
  plait_tl_stop(TL);
  evs_t v;
  load(path, &v);
  cr_assert_eq(check_pairs(&v), 4 * 10000, "every pair of 4 x 10,000");
  cr_assert_null(find(&v, 'M', "plait_dropped_events", -1));
  evs_free(&v);
}

/* A reader (taking the flock, as docs/timeline.md says) snapshots the file
 * 100 times while 4 threads write about 2 MB/s into it (at most 11 MB). */
Test(timeline, valid_json_while_being_written, .timeout = 300) {
  const char *path = in_dir("tl.json");
  START(path, 0);
  atomic_int stop = 0;
  pthread_t th[4];
  emitter_arg_t args[4];
  for (int t = 0; t < 4; t++) {
    args[t] = (emitter_arg_t){t, 20000, &stop, 2000000};
    pthread_create(&th[t], NULL, emitter, &args[t]);
  }
  size_t last = 0, grew = 0;
  for (int i = 0; i < 100; i++) {
    nanosleep(&(struct timespec){0, 3000000}, NULL);
    size_t n;
    char *text = slurp(path, &n);
    cr_assert(text);
    cr_assert_eq(scan_array(text, n, NULL), 0, "snapshot %d (%zu bytes) is not a JSON array", i, n);
    free(text);
    grew += n > last;
    last = n;
  }
  atomic_store(&stop, 1);
  for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
  plait_tl_stop(TL);
  cr_expect_geq(grew, 10, "the file grew between only %zu of 100 snapshots", grew);
  evs_t v;
  load(path, &v);
  check_pairs(&v);
  evs_free(&v);
}

Test(timeline, awkward_names_stay_valid_json) {
  static const char *good[] = {
      "quote\"d",   "back\\slash\\",  "new\nline", "tab\tcr\r",     "ctl\x01\x02\x1f\x7f",
      "",           "Gr\xc3\xbc\xc3\x9f" "e \xe5\xbc\xa0\xe9\x87\x8f \xf0\x9f\x98\x80",
      "</script>",  "{\"json\":[1,2]}", "\xef\xbf\xbd already a replacement",
  };
  static const char *bad[] = {
      "bad\xff\xfe", "cut\xe4\xb8", "overlong\xc0\xaf", "surrogate\xed\xa0\x80",
      "too big\xf4\x90\x80\x80", "lone\x80", "\xe4\xb8\xe4\xb8\xad",
  };
  const char *path = in_dir("tl.json");
  START(path, 0);
  size_t ng = sizeof good / sizeof *good, nb = sizeof bad / sizeof *bad;
  for (size_t i = 0; i < ng; i++) plait_tl_begin(TL, good[i], good[i]), plait_tl_end(TL, good[i], good[i]);
  for (size_t i = 0; i < nb; i++) plait_tl_begin(TL, bad[i], "X"), plait_tl_end(TL, bad[i], "X");
  char *huge = malloc(5001);
  memset(huge, 'h', 5000);
  huge[5000] = '\0';
  plait_tl_begin(TL, huge, "X");
  plait_tl_end(TL, huge, "X");
  plait_tl_mark(TL, "mark \"with\" \\ and \x01");
  plait_tl_stop(TL);
  evs_t v;
  load(path, &v);
  for (size_t i = 0; i < ng; i++) {
    int tid = tid_of(&v, good[i]);
    cr_expect_geq(tid, 1, "name %zu does not round-trip", i);
    cr_expect(find(&v, 'B', good[i], tid), "activity %zu does not round-trip", i);
  }
  size_t replaced = 0;
  for (size_t i = 0; i < v.n; i++)
    if (v.e[i].ph == 'M' && v.e[i].arg && strstr(v.e[i].arg, "\xef\xbf\xbd")) replaced++;
  cr_expect_eq(replaced, nb + 1, "each invalid name (and the real U+FFFD) shows U+FFFD");
  cr_expect_geq(tid_of(&v, "bad\xef\xbf\xbd\xef\xbf\xbd"), 1, "one U+FFFD per bad byte");
  huge[1024] = '\0';
  cr_expect_geq(tid_of(&v, huge), 1, "a long name is cut at 1024 bytes");
  cr_expect(find(&v, 'i', "mark \"with\" \\ and \x01", 0));
  cr_expect_eq(check_pairs(&v), ng + nb + 1);
  free(huge);
  evs_free(&v);
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------ */

Test(timeline, stop_without_start_and_emit_without_timeline_are_harmless) {
  plait_tl_stop(TL);
  plait_tl_stop(TL);
  plait_tl_begin(TL, "t", "A");
  plait_tl_end(TL, "t", "A");
  plait_tl_mark(TL, "CYCLE");
  plait_tl_begin(TL, NULL, NULL);
  cr_assert_eq(plait_tl_active(TL), 0);
  START(in_dir("tl.json"), 0);
  plait_tl_begin(TL, NULL, "A"); /* ignored */
  plait_tl_begin(TL, "t", NULL);
  plait_tl_mark(TL, NULL);
  plait_tl_stop(TL);
  plait_tl_stop(TL);
  evs_t v;
  load(in_dir("tl.json"), &v);
  cr_assert_eq(tid_of(&v, "t"), -1);
  evs_free(&v);
}

Test(timeline, rows_stay_nested_ends_without_begins_left_out_open_ones_closed_at_stop) {
  const char *path = in_dir("tl.json");
  START(path, 0);
  plait_tl_end(TL, "t", "NEGOTIATE"); /* no B: left out */
  plait_tl_begin(TL, "t", "NEGOTIATE");
  plait_tl_end(TL, "t", "NEGOTIATE");
  plait_tl_end(TL, "t", "NEGOTIATE"); /* already ended: left out */
  plait_tl_begin(TL, "t", "QUEUE");
  plait_tl_begin(TL, "t", "GLOO_ALLREDUCE");
  plait_tl_end(TL, "t", "QUEUE"); /* would cross GLOO_ALLREDUCE: left out */
  plait_tl_end(TL, "t", "GLOO_ALLREDUCE");
  plait_tl_begin(TL, "u", "NEGOTIATE"); /* open at stop */
  char level[16];
  for (int i = 0; i < 9; i++) snprintf(level, sizeof level, "L%d", i), plait_tl_begin(TL, "deep", level);
  for (int i = 8; i >= 0; i--) snprintf(level, sizeof level, "L%d", i), plait_tl_end(TL, "deep", level);
  plait_tl_stop(TL);
  evs_t v;
  load(path, &v);
  cr_assert_eq(check_pairs(&v), 4 + 8, "t: NEGOTIATE, GLOO_ALLREDUCE, QUEUE (closed at stop); u; "
               "deep: 8 levels of 9");
  size_t ends = 0;
  for (size_t i = 0; i < v.n; i++) ends += v.e[i].ph == 'E' && !strcmp(v.e[i].name, "NEGOTIATE");
  cr_assert_eq(ends, 2, "one NEGOTIATE end on t and one (at stop) on u");
  cr_assert_null(find(&v, 'B', "L8", -1));
  evs_free(&v);
}

Test(timeline, emitting_after_stop_changes_nothing) {
  const char *path = in_dir("tl.json");
  START(path, 0);
  plait_tl_begin(TL, "t", "A");
  plait_tl_end(TL, "t", "A");
  plait_tl_stop(TL);
  size_t n1, n2;
  char *before = slurp(path, &n1);
  plait_tl_begin(TL, "t", "B");
  plait_tl_end(TL, "u", "B");
  plait_tl_mark(TL, "CYCLE");
  nanosleep(&(struct timespec){0, 20000000}, NULL);
  char *after = slurp(path, &n2);
  cr_assert(n1 == n2 && !memcmp(before, after, n1), "the file changed after stop");
  free(before);
  free(after);
}

Test(timeline, restart_replaces_the_file_and_closes_the_old_one) {
  const char *a = in_dir("a.json"), *b = in_dir("b.json");
  START(a, 0);
  plait_tl_begin(TL, "old", "A");
  plait_tl_end(TL, "old", "A");
  START(b, 1); /* a is closed, complete */
  plait_tl_begin(TL, "new", "A");
  plait_tl_end(TL, "new", "A");
  START(a, 2); /* the same path again: replaced */
  plait_tl_begin(TL, "newer", "A");
  plait_tl_end(TL, "newer", "A");
  plait_tl_stop(TL);
  evs_t va, vb;
  load(a, &va);
  load(b, &vb);
  cr_expect_eq(tid_of(&vb, "new"), 1, "rows start again at 1");
  cr_expect_eq(tid_of(&vb, "old"), -1);
  cr_expect_eq(tid_of(&va, "old"), -1, "the old contents of a are gone");
  cr_expect_eq(tid_of(&va, "newer"), 1);
  cr_expect_eq(find(&va, 'M', "process_name", -1)->pid, 2);
  cr_expect_eq(check_pairs(&va), 1);
  evs_free(&va);
  evs_free(&vb);
}

Test(timeline, failed_start_keeps_the_running_timeline) {
  const char *path = in_dir("tl.json");
  START(path, 0);
  cr_assert_eq(plait_tl_start(TL, in_dir("missing/tl.json"), 0), PLAIT_ERR_SYSTEM);
  cr_assert(strstr(plait_last_error(), "missing/tl.json"), "%s", plait_last_error());
  cr_assert_eq(plait_tl_start(TL, g_dir, 0), PLAIT_ERR_SYSTEM, "a folder");
  cr_assert_eq(plait_tl_start(TL, NULL, 0), PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_eq(plait_tl_start(TL, "", 0), PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_eq(plait_tl_start(TL, path, -1), PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_eq(plait_tl_active(TL), 1);
  plait_tl_begin(TL, "still", "A");
  plait_tl_end(TL, "still", "A");
  plait_tl_stop(TL);
  evs_t v;
  load(path, &v);
  cr_assert_eq(tid_of(&v, "still"), 1);
  evs_free(&v);
}

/* Emitters keep going while the timeline is stopped and started under them. */
Test(timeline, stop_and_start_race_with_emitters) {
  atomic_int stop = 0;
  pthread_t th[4];
  emitter_arg_t args[4];
  for (int t = 0; t < 4; t++) {
    args[t] = (emitter_arg_t){t, 40000, &stop, 100000};
    pthread_create(&th[t], NULL, emitter, &args[t]);
  }
  char file[32];
  for (int i = 0; i < 20; i++) {
    snprintf(file, sizeof file, "tl%d.json", i % 3);
    START(in_dir(file), i);
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    if (i % 2) plait_tl_stop(TL);
  }
  plait_tl_stop(TL);
  atomic_store(&stop, 1);
  for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
  for (int i = 0; i < 3; i++) {
    snprintf(file, sizeof file, "tl%d.json", i);
    evs_t v;
    load(in_dir(file), &v);
    check_pairs(&v); /* an E whose B came before start is left out; stop closes what is open */
    evs_free(&v);
  }
}

/* ------------------------------------------------------------------------ */
/* Drops and throughput                                                      */
/* ------------------------------------------------------------------------ */

/* A count in the plait_dropped_events metadata ("queue_full", ...); 0
 * without it. */
static size_t drops(const char *path, const char *key) {
  size_t n, dropped = 0;
  char *text = slurp(path, &n), quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\":", key);
  const char *d = strstr(text, "\"plait_dropped_events\"");
  const char *q = d ? strstr(d, quoted) : NULL;
  if (q) dropped = strtoull(q + strlen(quoted), NULL, 10);
  free(text);
  return dropped;
}

/* A reader holding the file's lock stalls the writer (up to a second per
 * write): the queue fills, emitters drop instead of waiting, and the count
 * is in the file at stop. The writer holds at most one full queue (1M) while
 * another fills, so 2.5M events must overflow. */
Test(timeline, a_full_queue_drops_and_counts, .timeout = 120) {
  const char *path = in_dir("tl.json");
  START(path, 0);
  FILE *hold = fopen(path, "rb");
  cr_assert(hold);
  flock(fileno(hold), LOCK_SH);
  const long pairs = 1250000;
  double t0 = now_s();
  for (long i = 0; i < pairs; i++) plait_tl_begin(TL, "t", "A"), plait_tl_end(TL, "t", "A");
  double emit_s = now_s() - t0;
  flock(fileno(hold), LOCK_UN);
  fclose(hold);
  plait_tl_stop(TL);
  evs_t v;
  load(path, &v);
  size_t written = 0;
  for (size_t i = 0; i < v.n; i++) written += v.e[i].ph == 'B' || v.e[i].ph == 'E';
  const ev_t *d = find(&v, 'M', "plait_dropped_events", 0);
  cr_assert(d, "no plait_dropped_events metadata");
  cr_assert(find(&v, 'M', "process_labels", 0));
  /* a dropped B makes its E one left out; ends have room kept for them */
  size_t dropped = drops(path, "queue_full"), left_out = drops(path, "ends_left_out");
  cr_assert_gt(dropped, 0);
  cr_assert_eq(written + dropped + left_out, 2 * (size_t)pairs, "%zu written + %zu dropped + %zu "
               "ends left out", written, dropped, left_out);
  cr_assert_eq(check_pairs(&v), written / 2, "what was written is still paired");
  cr_log_info("emitting 2.5M events against a stalled writer took %.2f s", emit_s);
  evs_free(&v);
}

Test(timeline, throughput, .timeout = 300) {
  const char *path = in_dir("tl.json");
  const int pairs = 125000 / SCALE; /* per thread: 1M events in all */
  START(path, 0);
  pthread_t th[4];
  emitter_arg_t args[4];
  double t0 = now_s();
  for (int t = 0; t < 4; t++) {
    args[t] = (emitter_arg_t){t, pairs, NULL, 0};
    pthread_create(&th[t], NULL, emitter, &args[t]);
  }
  for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
  double t1 = now_s();
  plait_tl_stop(TL);
  double t2 = now_s();
  double events = 4.0 * 2 * pairs;
  struct stat st;
  stat(path, &st);
  evs_t v;
  load(path, &v);
  size_t written = 0;
  for (size_t i = 0; i < v.n; i++) written += v.e[i].ph == 'B' || v.e[i].ph == 'E';
  fprintf(stderr,
          "timeline throughput: 4 threads emitted %.0f events in %.3f s (%.2f M events/s); "
          "%zu written (%.1f MB) by stop at %.3f s (%.2f M events/s)%s\n",
          events, t1 - t0, events / (t1 - t0) / 1e6, written, st.st_size / 1e6, t2 - t0,
          written / (t2 - t0) / 1e6, SCALE > 1 ? " [sanitizer build]" : "");
  cr_assert_eq(written + drops(path, "queue_full") + drops(path, "ends_left_out"), (size_t)events,
               "every event written or counted");
  evs_free(&v);
}

/* ------------------------------------------------------------------------ */
/* plait_timeline_start / plait_timeline_stop                                */
/* ------------------------------------------------------------------------ */


static void api_init(void) {
  make_dir();
  plait_test_clear_env();
  plait_test_set_plugin_path();
  setenv("PLAIT_TRANSPORT", "fixture", 1);
}

TestSuite(timeline_api, .init = api_init, .fini = remove_dir);

Test(timeline_api, before_init_not_initialized) {
  cr_assert_eq(plait_timeline_start(in_dir("tl.json")), PLAIT_ERR_NOT_INITIALIZED);
  cr_assert(strstr(plait_last_error(), "plait_timeline_start"), "%s", plait_last_error());
  cr_assert_eq(plait_timeline_stop(), PLAIT_ERR_NOT_INITIALIZED);
  cr_assert(strstr(plait_last_error(), "plait_timeline_stop"), "%s", plait_last_error());
  cr_assert_eq(plait_tl_active(TL), 0);
}

Test(timeline_api, single_rank_job) {
  /* The fixture plugin is a build dependency of this test
   * (tests/CMakeLists.txt): without it the build is broken, not this host. */
  struct stat st;
  cr_assert_eq(stat(PLAIT_TEST_PLUGIN_DIR "/libplait-transport-fixture.so", &st), 0,
               "the fixture plugin was not built (" PLAIT_TEST_PLUGIN_DIR
               "/libplait-transport-fixture.so): the build is broken");
  plait_result_t rc = plait_init();
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_init: %s", plait_last_error());
  const char *path = in_dir("rank0.json"), *missing = in_dir("no/such/dir/tl.json");

  cr_expect_eq(plait_timeline_start(NULL), PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(plait_last_error(), "NULL"), "%s", plait_last_error());
  cr_expect_eq(plait_timeline_start(""), PLAIT_ERR_INVALID_ARGUMENT);
  cr_expect_eq(plait_timeline_start(missing), PLAIT_ERR_SYSTEM);
  cr_expect(strstr(plait_last_error(), missing) && strstr(plait_last_error(), strerror(ENOENT)),
            "names the path and the reason: %s", plait_last_error());
  cr_expect_eq(plait_timeline_stop(), PLAIT_SUCCESS, "stop with none running");

  rc = plait_timeline_start(path);
  cr_assert_eq(rc, PLAIT_SUCCESS, "%s", plait_last_error());
  plait_engine_t *engine = plait_api_acquire(); /* the public calls act on its timeline */
  cr_assert(engine);
  cr_assert_eq(plait_tl_active(engine->timeline), 1);
  plait_tl_begin(engine->timeline, "w", "NEGOTIATE");
  plait_tl_end(engine->timeline, "w", "NEGOTIATE");
  cr_assert_eq(plait_timeline_stop(), PLAIT_SUCCESS);
  cr_assert_eq(plait_tl_active(engine->timeline), 0);
  plait_api_release(&engine);
  plait_shutdown();
  cr_expect_eq(plait_timeline_start(path), PLAIT_ERR_NOT_INITIALIZED);

  evs_t v;
  load(path, &v);
  const ev_t *p = find(&v, 'M', "process_name", -1);
  cr_assert(p && p->pid == 0 && !strcmp(p->arg, "rank 0"));
  cr_assert_eq(check_pairs(&v), 1);
  evs_free(&v);
}

/* PLAIT_TIMELINE that cannot be written fails plait_init (it was a warning,
 * and the job ran without the timeline it was asked for). */
Test(timeline_api, unwritable_plait_timeline_fails_init) {
  const char *missing = in_dir("no/such/dir/tl.%r.json");
  setenv("PLAIT_TIMELINE", missing, 1);
  plait_result_t rc = plait_init();
  const char *msg = plait_last_error();
  if (rc == PLAIT_SUCCESS) plait_shutdown();
  unsetenv("PLAIT_TIMELINE");
  cr_assert_eq(rc, PLAIT_ERR_CONFIG, "got %s: %s", plait_result_name(rc), msg);
  cr_expect(strstr(msg, "PLAIT_TIMELINE") && strstr(msg, "no/such/dir/tl.0.json") &&
                strstr(msg, strerror(ENOENT)),
            "names the variable, the path and the reason: %s", msg);
  int on = 1;
  plait_is_initialized(&on);
  cr_expect_eq(on, 0, "a failed init leaves plait uninitialized");
  /* and a good one works afterwards */
  setenv("PLAIT_TIMELINE", in_dir("tl.%r.json"), 1);
  rc = plait_init();
  unsetenv("PLAIT_TIMELINE");
  cr_assert_eq(rc, PLAIT_SUCCESS, "%s", plait_last_error());
  plait_engine_t *engine = plait_api_acquire();
  cr_assert(engine);
  cr_expect_eq(plait_tl_active(engine->timeline), 1);
  plait_api_release(&engine);
  cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS);
}

/* The activity names come from one list (PLAIT_TL_ACTIVITIES): each is the
 * text docs/timeline.md gives it, all differ, and a value outside the list
 * has none. */
Test(timeline_names, one_list_gives_each_documented_name) {
  static const char *const want[PLAIT_TL_ACTIVITY_COUNT] = {
      [PLAIT_TL_NEGOTIATE] = "NEGOTIATE",
      [PLAIT_TL_QUEUE] = "QUEUE",
      [PLAIT_TL_MEMCPY_IN] = "MEMCPY_IN_FUSION_BUFFER",
      [PLAIT_TL_MEMCPY_OUT] = "MEMCPY_OUT_FUSION_BUFFER",
      [PLAIT_TL_CYCLE] = "CYCLE",
  };
  for (int a = 0; a < PLAIT_TL_ACTIVITY_COUNT; a++) {
    const char *name = plait_tl_name((plait_tl_activity_t)a);
    cr_assert(name && want[a], "activity %d has a name", a);
    cr_expect_str_eq(name, want[a]);
    for (int b = 0; b < a; b++) cr_expect_str_neq(name, plait_tl_name((plait_tl_activity_t)b));
  }
  cr_expect_null(plait_tl_name(PLAIT_TL_ACTIVITY_COUNT));
  cr_expect_null(plait_tl_name((plait_tl_activity_t)-1));
}

/* <TRANSPORT>_<OP> in capitals, cut to the room given. */
Test(timeline_names, transport_collectives_are_named_in_capitals) {
  char out[48];
  plait_tl_op_name(out, sizeof out, "gloo", "allreduce");
  cr_expect_str_eq(out, "GLOO_ALLREDUCE");
  plait_tl_op_name(out, sizeof out, "ofi", "process_set_add");
  cr_expect_str_eq(out, "OFI_PROCESS_SET_ADD");
  plait_tl_op_name(out, 8, "nccl", "reducescatter");
  cr_expect_str_eq(out, "NCCL_RE");
  plait_tl_op_name(out, 1, "nccl", "broadcast");
  cr_expect_str_eq(out, "");
}
