/*
 * The Chrome-trace timeline (timeline.h; format and use in docs/timeline.md).
 *
 * Threads and locks:
 *  - One plait_timeline_t per engine holds everything below.
 *  - ctl serialises plait_tl_start and plait_tl_stop (held across the join).
 *  - q.mu guards the queue, the name tables and q.accepting. Emitters hold it
 *    only to look names up and append: no I/O, no waiting for the writer (a
 *    full queue drops the event and counts it).
 *  - The writer thread owns w and the file: it swaps the pending array out
 *    under q.mu, then formats and writes without the lock. Stop joins it.
 *  - active is the fast path's hint; q.accepting decides. An emitter racing
 *    with stop appends before stop closes the queue (the writer drains it) or
 *    finds it closed. No emitter ever touches the file.
 *
 * The file is "[", events as ",\n{...}", then "\n]". Each pwrite puts events
 * plus a new "\n]" over the old "]", so the file is a complete JSON array
 * after every write. Writes hold flock(LOCK_EX): a reader taking LOCK_SH gets
 * a consistent snapshot mid-run; one that does not may see a write half done
 * (buffered reads and writes are not atomic with respect to each other).
 */
#include "engine/observe/timeline.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/affinity.h"
#include "util/clock.h"
#include "util/eintr.h"
#include "util/error.h"
#include "util/log.h"

#define TL_QUEUE_MAX (1u << 20)  /* events waiting for the writer; more are dropped */
#define TL_END_ROOM (1u << 16)   /* of those, kept for ends of open activities */
#define TL_ROWS_MAX (1u << 16)   /* distinct tensors (rows) in one timeline */
#define TL_NAMES_MAX 4096u       /* distinct activity and marker names */
#define TL_NAME_MAX 1024u        /* bytes of a name that are kept */
#define TL_DEPTH 8               /* activities open at once on one row */
#define TL_EVENT_MAX (6u * TL_NAME_MAX + 512u) /* longest formatted event */
#define TL_CHUNK 65536u          /* bytes of events per pwrite, about */
#define TL_BUF_CAP (TL_CHUNK + TL_EVENT_MAX + 8u)
#define TL_LOCK_WAIT_MS 1000     /* longest wait for a reader's flock */
#define TL_GATHER_NS 10000000    /* the writer collects events this long, */
#define TL_WAKE_AT 16384u        /* or until this many are queued */

/* An interned name: raw bytes (for lookup) and the JSON-escaped text; a
 * tensor's entry also holds the activities open on its row, innermost last. */
typedef struct tl_str {
  uint64_t hash;
  uint32_t len, id, depth;
  char *raw;
  char *esc;
  const struct tl_str *open[TL_DEPTH];
} tl_str_t;

typedef struct tl_table {
  tl_str_t **slots; /* open addressing, cap = 2 * max (a power of two) */
  uint32_t cap, count, max;
} tl_table_t;

enum { TL_BEGIN = 'B', TL_END = 'E', TL_MARK = 'i', TL_ROW = 'M' };

typedef struct tl_event {
  int64_t ts_ns;        /* since the timeline's start */
  const tl_str_t *name; /* activity, marker, or (TL_ROW) tensor */
  uint32_t tid;
  char ph;
} tl_event_t;

typedef struct tl_queue {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int accepting, stopping, writer_waiting;
  tl_event_t *pending;
  size_t n;
  int64_t t0_ns;
  tl_table_t rows, names;
  uint64_t dropped_full, dropped_names, unmatched;
} tl_queue_t;

/* The writer's state: set before its thread starts, then its own until join. */
typedef struct tl_writer {
  int fd, rank, warned_write, warned_drop;
  char *path;
  off_t end; /* offset of the closing ']' */
  tl_event_t *batch;
  char *buf;
  size_t len, chunk_events;
  uint64_t written, lost;
  pthread_t thread;
} tl_writer_t;

struct plait_timeline {
  pthread_mutex_t ctl; /* serialises start and stop */
  int running;         /* under ctl: a writer thread exists */
  atomic_int active;
  atomic_int mark_cycles;
  tl_queue_t q;        /* "Q" in the comments */
  tl_writer_t w;       /* "W" */
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t hash_bytes(const char *s, uint32_t len) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (uint32_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

/* ---- JSON text ---- */

/* Length of the well-formed UTF-8 sequence at s (n bytes left), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0], lo = 0x80, hi = 0xBF;
  size_t len;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : lo, hi = c == 0xED ? 0x9F : hi;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : lo, hi = c == 0xF4 ? 0x8F : hi;
  else return 0;
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

/* Writes s[0..n) as the inside of a JSON string (room: 6 * n + 1). Quotes,
 * backslashes and control characters are escaped; a byte that does not start
 * well-formed UTF-8 becomes U+FFFD. Returns the length written. */
static size_t json_escape(char *out, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    if (c == '"' || c == '\\') {
      out[o++] = '\\', out[o++] = (char)c, i++;
    } else if (c < 0x20 || c == 0x7F) {
      const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
      if (e) memcpy(out + o, e, 2), o += 2;
      else memcpy(out + o, "\\u00", 4), out[o + 4] = hex[c >> 4], out[o + 5] = hex[c & 15], o += 6;
      i++;
    } else if (c < 0x80) {
      out[o++] = (char)c, i++;
    } else {
      size_t len = utf8_len(p + i, n - i);
      if (len) memcpy(out + o, p + i, len), o += len, i += len;
      else memcpy(out + o, "\\ufffd", 6), o += 6, i++;
    }
  }
  out[o] = '\0';
  return o;
}

/* ",\n{...}" for one queued event (a new row gives two metadata objects). */
static size_t format_event(char *out, const tl_event_t *e, int rank) {
  if (e->ph == TL_ROW) /* once per tensor: no need for speed */
    return (size_t)snprintf(out, TL_EVENT_MAX,
                            ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,"
                            "\"args\":{\"name\":\"%s\"}},\n{\"name\":\"thread_sort_index\","
                            "\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
                            rank, e->tid, e->name->esc, rank, e->tid, e->tid);
  long long us = e->ts_ns / 1000, ns = e->ts_ns % 1000;
  return (size_t)snprintf(out, TL_EVENT_MAX, ",\n{\"name\":\"%s\",\"ph\":\"%s,\"ts\":%lld.%03lld,"
                          "\"pid\":%d,\"tid\":%u}", e->name->esc,
                          e->ph == TL_BEGIN ? "B\"" : e->ph == TL_END ? "E\"" : "i\",\"s\":\"t\"",
                          us, ns, rank, e->tid);
}

/* ---- Name tables (under q.mu) ---- */

static tl_str_t *find_locked(const tl_table_t *t, const char *s, uint32_t len, uint64_t h) {
  for (uint32_t j = (uint32_t)h & (t->cap - 1); t->cap && t->slots[j]; j = (j + 1) & (t->cap - 1)) {
    tl_str_t *e = t->slots[j];
    if (e->hash == h && e->len == len && !memcmp(e->raw, s, len)) return e;
  }
  return NULL;
}

static tl_str_t *intern_locked(tl_table_t *t, const char *s, uint32_t len, uint64_t h,
                               int *added) {
  tl_str_t *e = find_locked(t, s, len, h);
  *added = 0;
  if (e || t->count >= t->max) return e;
  e = malloc(sizeof *e + len + 1 + 6 * (size_t)len + 1);
  if (!e) return NULL;
  e->hash = h, e->len = len, e->id = ++t->count, e->depth = 0;
  e->raw = (char *)(e + 1);
  memcpy(e->raw, s, len);
  e->raw[len] = '\0';
  e->esc = e->raw + len + 1;
  json_escape(e->esc, s, len);
  uint32_t j = (uint32_t)h & (t->cap - 1);
  while (t->slots[j]) j = (j + 1) & (t->cap - 1);
  t->slots[j] = e;
  *added = 1;
  return e;
}

static int table_init(tl_table_t *t, uint32_t max) {
  t->slots = calloc(2 * (size_t)max, sizeof *t->slots);
  t->cap = t->slots ? 2 * max : 0, t->count = 0, t->max = max;
  return t->slots ? 0 : -1;
}

static void table_free(tl_table_t *t) {
  for (uint32_t i = 0; i < t->cap; i++) free(t->slots[i]);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

/* ---- Emitting ---- */

/* Keeps each row properly nested: a B opens name on row (at most TL_DEPTH
 * deep), an E must close the innermost open one. 0: drop the event. */
static int nest_locked(tl_str_t *row, const tl_str_t *name, char ph) {
  if (ph == TL_BEGIN) {
    if (row->depth == TL_DEPTH) return 0;
    row->open[row->depth++] = name;
    return 1;
  }
  if (!row->depth || row->open[row->depth - 1] != name) return 0;
  row->depth--;
  return 1;
}

static void enqueue_locked(plait_timeline_t *tl, const char *tensor, uint32_t tlen, uint64_t th,
                           const char *what, uint32_t wlen, uint64_t wh, char ph) {
  int64_t ts = now_ns() - tl->q.t0_ns; /* under the lock: the queue is in time order */
  size_t was = tl->q.n, limit = ph == TL_END ? TL_QUEUE_MAX : TL_QUEUE_MAX - TL_END_ROOM;
  if (tl->q.n + 2 > limit) { /* room for a new row's metadata too */
    tl->q.dropped_full++;
    tl_str_t *row = tensor && ph == TL_END ? find_locked(&tl->q.rows, tensor, tlen, th) : NULL;
    if (row) nest_locked(row, find_locked(&tl->q.names, what, wlen, wh), ph); /* B stays open */
    return;
  }
  int added;
  const tl_str_t *name = intern_locked(&tl->q.names, what, wlen, wh, &added);
  tl_str_t *row = tensor ? intern_locked(&tl->q.rows, tensor, tlen, th, &added) : NULL;
  if (!name || (tensor && !row)) {
    tl->q.dropped_names++;
    return;
  }
  uint32_t tid = row ? row->id : 0;
  if (row && added) tl->q.pending[tl->q.n++] = (tl_event_t){ts, row, tid, TL_ROW};
  if (!row || nest_locked(row, name, ph))
    tl->q.pending[tl->q.n++] = (tl_event_t){ts, name, tid, ph};
  else tl->q.unmatched++;
  /* Wake the writer for the first event after it went idle, then only for a
   * big batch: it wakes itself to write what gathered, so emitters seldom
   * pay for a wake-up. */
  if (tl->q.writer_waiting && (!was || tl->q.n >= TL_WAKE_AT)) {
    tl->q.writer_waiting = 0;
    pthread_cond_signal(&tl->q.cv);
  }
}

/* At stop: an E, now, for every activity still open. */
static void close_open_locked(plait_timeline_t *tl) {
  int64_t ts = now_ns() - tl->q.t0_ns;
  for (uint32_t i = 0; i < tl->q.rows.cap; i++)
    for (tl_str_t *r = tl->q.rows.slots[i]; r && r->depth && tl->q.n < TL_QUEUE_MAX;)
      tl->q.pending[tl->q.n++] = (tl_event_t){ts, r->open[--r->depth], r->id, TL_END};
}

static void emit(plait_timeline_t *tl, const char *tensor, const char *what, char ph) {
  if (!atomic_load_explicit(&tl->active, memory_order_relaxed)) return;
  if (!what || (ph != TL_MARK && !tensor)) return;
  uint32_t wlen = (uint32_t)strnlen(what, TL_NAME_MAX), tlen = 0;
  uint64_t wh = hash_bytes(what, wlen), th = 0;
  if (tensor) tlen = (uint32_t)strnlen(tensor, TL_NAME_MAX), th = hash_bytes(tensor, tlen);
  pthread_mutex_lock(&tl->q.mu);
  if (tl->q.accepting) enqueue_locked(tl, tensor, tlen, th, what, wlen, wh, ph);
  pthread_mutex_unlock(&tl->q.mu);
}

void plait_tl_begin(plait_timeline_t *tl, const char *tensor, const char *activity) {
  if (tl) emit(tl, tensor, activity, TL_BEGIN);
}
void plait_tl_end(plait_timeline_t *tl, const char *tensor, const char *activity) {
  if (tl) emit(tl, tensor, activity, TL_END);
}
void plait_tl_mark(plait_timeline_t *tl, const char *what) {
  if (tl) emit(tl, NULL, what, TL_MARK);
}
void plait_tl_set_mark_cycles(plait_timeline_t *tl, int on) {
  if (tl) atomic_store(&tl->mark_cycles, on != 0);
}
void plait_tl_mark_cycle(plait_timeline_t *tl) {
  if (tl && atomic_load_explicit(&tl->mark_cycles, memory_order_relaxed))
    emit(tl, NULL, plait_tl_name(PLAIT_TL_CYCLE), TL_MARK);
}
int plait_tl_active(plait_timeline_t *tl) {
  return tl && atomic_load_explicit(&tl->active, memory_order_relaxed);
}

void plait_tl_op_name(char *out, size_t cap, const char *transport, const char *op) {
  snprintf(out, cap, "%s_%s", transport, op);
  for (; *out; out++) *out = (char)toupper((unsigned char)*out);
}

/* ---- Writing ---- */

/* Takes the file's flock for a write, waiting at most TL_LOCK_WAIT_MS for a
 * reader; 1 when held. Writing goes ahead unlocked otherwise. */
static int lock_file(int fd) {
  for (int waited = 0;; waited++) {
    if (!flock(fd, LOCK_EX | LOCK_NB)) return 1;
    if (errno != EWOULDBLOCK && errno != EINTR) return 0;
    if (waited >= TL_LOCK_WAIT_MS) return 0;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
}

static int write_all(int fd, const char *p, size_t len, off_t off) {
  while (len) {
    ssize_t n;
    PLAIT_RETRY_EINTR(n, pwrite(fd, p, len, off));
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    p += n, len -= (size_t)n, off += n;
  }
  return 0;
}

/* Writes tl->w.buf's events plus "\n]" over the closing ']' (one pwrite). On
 * failure the file is put back as it was after the last good write. */
static void flush(plait_timeline_t *tl) {
  if (!tl->w.len) return;
  memcpy(tl->w.buf + tl->w.len, "\n]", 2);
  int locked = lock_file(tl->w.fd);
  int err = write_all(tl->w.fd, tl->w.buf, tl->w.len + 2, tl->w.end);
  if (!err) {
    tl->w.end += (off_t)tl->w.len + 1;
    tl->w.written += tl->w.chunk_events;
  } else {
    tl->w.lost += tl->w.chunk_events;
    /* cut what a partial write left and put the ']' back */
    int torn = ftruncate(tl->w.fd, tl->w.end + 1) != 0 ||
               write_all(tl->w.fd, "]", 1, tl->w.end) != 0;
    if (!tl->w.warned_write++)
      PLAIT_WARN("timeline", "writing '%s' failed: %s; events are lost until writes succeed "
                 "again%s", tl->w.path, strerror(err), torn ? " (and the file could not be "
                 "repaired)" : " (the file stays valid JSON)");
  }
  if (locked) flock(tl->w.fd, LOCK_UN);
  tl->w.len = 0;
  tl->w.chunk_events = 0;
}

static void write_events(plait_timeline_t *tl, const tl_event_t *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (tl->w.len >= TL_CHUNK) flush(tl);
    tl->w.len += format_event(tl->w.buf + tl->w.len, &ev[i], tl->w.rank);
    tl->w.chunk_events++;
  }
  flush(tl);
}

static void *writer_main(void *arg) {
  plait_timeline_t *tl = arg;
  pthread_mutex_lock(&tl->q.mu);
  for (;;) {
    while (!tl->q.n && !tl->q.stopping) { /* idle until the first event */
      tl->q.writer_waiting = 1;
      pthread_cond_wait(&tl->q.cv, &tl->q.mu);
    }
    struct timespec until; /* then let a batch gather */
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += TL_GATHER_NS;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    while (!tl->q.stopping && tl->q.n < TL_WAKE_AT) {
      tl->q.writer_waiting = 1;
      if (plait_cond_wait_until(&tl->q.cv, &tl->q.mu, &until) == ETIMEDOUT) break;
    }
    tl->q.writer_waiting = 0;
    if (!tl->q.n) break; /* stopping, and everything is written */
    tl_event_t *batch = tl->q.pending;
    size_t n = tl->q.n;
    uint64_t dropped = tl->q.dropped_full + tl->q.dropped_names;
    tl->q.pending = tl->w.batch;
    tl->q.n = 0;
    tl->w.batch = batch;
    pthread_mutex_unlock(&tl->q.mu);
    if (dropped && !tl->w.warned_drop++)
      PLAIT_WARN("timeline", "'%s': dropping events (queue full or too many distinct names); "
                 "the count is written when the timeline stops", tl->w.path);
    write_events(tl, batch, n);
    pthread_mutex_lock(&tl->q.mu);
  }
  pthread_mutex_unlock(&tl->q.mu);
  return NULL;
}

/* The first elements: this rank's process row and the coordinator's row. */
static plait_result_t write_header(plait_timeline_t *tl, const struct timespec *wall) {
  int n = snprintf(tl->w.buf, TL_BUF_CAP,
                   "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"name\":\"rank %d\"}},\n"
                   "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"sort_index\":%d}},\n"
                   "{\"name\":\"plait_clock\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"unix_time_us_at_ts_0\":%lld}},\n"
                   "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"name\":\"coordinator\"}},\n"
                   "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"sort_index\":0}}\n]",
                   tl->w.rank, tl->w.rank, tl->w.rank, tl->w.rank, tl->w.rank,
                   (long long)wall->tv_sec * 1000000 + wall->tv_nsec / 1000, tl->w.rank,
                   tl->w.rank);
  int locked = lock_file(tl->w.fd);
  int err = ftruncate(tl->w.fd, 0) ? errno : write_all(tl->w.fd, tl->w.buf, (size_t)n, 0);
  if (locked) flock(tl->w.fd, LOCK_UN);
  if (err)
    return plait_error(PLAIT_ERR_SYSTEM, "cannot write timeline '%s': %s", tl->w.path,
                       strerror(err));
  tl->w.end = n - 1;
  return PLAIT_SUCCESS;
}

/* ---- Start and stop ---- */

static void reset_queue_locked(plait_timeline_t *tl) {
  table_free(&tl->q.rows);
  table_free(&tl->q.names);
  free(tl->q.pending);
  tl->q.pending = NULL;
  tl->q.n = 0;
  tl->q.accepting = tl->q.stopping = tl->q.writer_waiting = 0;
  tl->q.dropped_full = tl->q.dropped_names = tl->q.unmatched = 0;
}

static void free_writer(plait_timeline_t *tl) {
  if (tl->w.fd >= 0) close(tl->w.fd);
  free(tl->w.path);
  free(tl->w.batch);
  free(tl->w.buf);
  memset(&tl->w, 0, sizeof tl->w);
  tl->w.fd = -1;
}

/* After the join: the drop count if any, then close. */
static void finish_locked(plait_timeline_t *tl) {
  typedef unsigned long long ull;
  pthread_mutex_lock(&tl->q.mu);
  ull full = tl->q.dropped_full, names = tl->q.dropped_names, unmatched = tl->q.unmatched;
  reset_queue_locked(tl);
  pthread_mutex_unlock(&tl->q.mu);
  if (full + names) {
    tl->w.len = (size_t)snprintf(
        tl->w.buf, TL_BUF_CAP,
        ",\n{\"name\":\"plait_dropped_events\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":"
        "{\"queue_full\":%llu,\"too_many_names\":%llu,\"ends_left_out\":%llu}},\n"
        "{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
        "\"args\":{\"labels\":\"timeline dropped %llu events\"}}",
        tl->w.rank, full, names, unmatched, tl->w.rank, full + names);
    flush(tl);
  }
  if (full + names || tl->w.lost)
    PLAIT_WARN("timeline", "'%s': %llu events written, %llu dropped (queue full %llu, too many "
               "distinct names %llu), %llu lost to write errors", tl->w.path, (ull)tl->w.written,
               full + names, full, names, (ull)tl->w.lost);
  else
    PLAIT_INFO("timeline", "'%s': %llu events written", tl->w.path, (ull)tl->w.written);
  if (unmatched) /* a caller's slip, not the user's: for plait's developers */
    PLAIT_DEBUG("timeline", "'%s': %llu ends without their begin (or nested more than %d "
                "deep) left out", tl->w.path, unmatched, TL_DEPTH);
  free_writer(tl);
}

static void stop_locked(plait_timeline_t *tl) {
  if (!tl->running) return;
  atomic_store(&tl->active, 0);
  pthread_mutex_lock(&tl->q.mu);
  close_open_locked(tl);
  tl->q.accepting = 0;
  tl->q.stopping = 1;
  pthread_cond_signal(&tl->q.cv);
  pthread_mutex_unlock(&tl->q.mu);
  pthread_join(tl->w.thread, NULL);
  tl->running = 0;
  finish_locked(tl);
}

plait_timeline_t *plait_tl_create(void) {
  plait_timeline_t *tl = calloc(1, sizeof *tl);
  if (!tl) return NULL;
  pthread_condattr_t attr; /* q.cv times its waits on the monotonic clock */
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&tl->q.cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&tl->q.mu, NULL);
  pthread_mutex_init(&tl->ctl, NULL);
  tl->w.fd = -1;
  return tl;
}

void plait_tl_destroy(plait_timeline_t *tl) {
  if (!tl) return;
  plait_tl_stop(tl);
  pthread_cond_destroy(&tl->q.cv);
  pthread_mutex_destroy(&tl->q.mu);
  pthread_mutex_destroy(&tl->ctl);
  free(tl);
}

static plait_result_t start_locked(plait_timeline_t *tl, int fd, const char *path, int rank) {
  memset(&tl->w, 0, sizeof tl->w);
  tl->w.fd = fd, tl->w.rank = rank;
  tl->w.path = strdup(path);
  tl->w.buf = malloc(TL_BUF_CAP);
  tl->w.batch = malloc(TL_QUEUE_MAX * sizeof(tl_event_t));
  pthread_mutex_lock(&tl->q.mu);
  tl->q.pending = malloc(TL_QUEUE_MAX * sizeof(tl_event_t));
  int ok = tl->w.path && tl->w.buf && tl->w.batch && tl->q.pending &&
           !table_init(&tl->q.rows, TL_ROWS_MAX) &&
           !table_init(&tl->q.names, TL_NAMES_MAX);
  pthread_mutex_unlock(&tl->q.mu);
  plait_result_t rc = PLAIT_ERR_NO_MEMORY;
  if (!ok) {
    plait_error(rc, "no memory for the timeline's queue");
    goto fail;
  }
  struct timespec wall; /* the wall clock at ts 0, for lining up ranks' files */
  int64_t t0 = now_ns();
  clock_gettime(CLOCK_REALTIME, &wall);
  PLAIT_CHECK_GOTO(rc, write_header(tl, &wall), fail);
  pthread_mutex_lock(&tl->q.mu);
  tl->q.t0_ns = t0;
  tl->q.accepting = 1;
  pthread_mutex_unlock(&tl->q.mu);
  sigset_t all, old; /* the writer takes no signals meant for the application */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = plait_thread_start(&tl->w.thread, writer_main, tl, "plait-timeline", -1);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == PLAIT_SUCCESS) {
    tl->running = 1;
    atomic_store(&tl->active, 1);
    return PLAIT_SUCCESS;
  }
fail:
  pthread_mutex_lock(&tl->q.mu);
  reset_queue_locked(tl);
  pthread_mutex_unlock(&tl->q.mu);
  free_writer(tl);
  return rc;
}

plait_result_t plait_tl_start(plait_timeline_t *tl, const char *path, int rank) {
  if (!tl) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "timeline is NULL");
  if (!path || !*path)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "timeline path is %s", path ? "empty" : "NULL");
  if (rank < 0) return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "timeline rank %d < 0", rank);
  /* Opened before the old timeline stops, so a bad path leaves it running;
   * O_NONBLOCK so that a FIFO cannot hang us (it is refused below). */
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0)
    return plait_error(PLAIT_ERR_SYSTEM, "cannot open timeline '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return plait_error(PLAIT_ERR_SYSTEM, "cannot use timeline '%s': not a regular file", path);
  }
  pthread_mutex_lock(&tl->ctl);
  stop_locked(tl);
  plait_result_t rc = start_locked(tl, fd, path, rank);
  pthread_mutex_unlock(&tl->ctl);
  return rc;
}

void plait_tl_stop(plait_timeline_t *tl) {
  if (!tl) return;
  pthread_mutex_lock(&tl->ctl);
  stop_locked(tl);
  pthread_mutex_unlock(&tl->ctl);
}
