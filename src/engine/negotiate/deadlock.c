/* Rank 0's deadlock detection: see deadlock.h. */
#include "engine/negotiate/deadlock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strdupf.h"

enum {
  NAMES_PER_RANK = 3,  /* names listed per rank, then "and N more" */
  RANKS_LISTED = 8,    /* ranks listed, then "and N more ranks" */
  NAME_CHARS = 64,     /* a longer name is cut, with "..." */
  MESSAGE_CAP = 2048,
};

/* What moved since the last tick moved at now (rank -1 above: everyone). */
static void note_moves(plait_deadlock_t *d, int everyone, double now) {
  if (!d->any_dirty && !everyone) return;
  for (int r = 0; r < d->size; r++) {
    if (everyone || d->dirty[r]) d->moved[r] = now;
    d->dirty[r] = 0;
  }
  d->any_dirty = 0;
}

typedef struct {
  plait_record_t **list;
  int n, cap;
} snap_t;

static void snap_cb(const char *key, void *value, void *arg) {
  (void)key;
  snap_t *s = arg;
  if (s->n < s->cap) s->list[s->n++] = value;
}

static int by_arrival(const void *a, const void *b) {
  const plait_record_t *x = *(plait_record_t *const *)a, *y = *(plait_record_t *const *)b;
  return (x->arrival > y->arrival) - (x->arrival < y->arrival);
}

static int is_join(const plait_negotiator_t *n, const plait_record_t *rec) {
  return rec->metas[plait_record_ref(rec, n->size)].coll == PLAIT_COLL_JOIN;
}

/* Whether rec still misses a rank marked in stuck. A record of an unknown
 * set (it fails at once anyway) misses nobody. */
static int misses_stuck(const plait_negotiator_t *n, const plait_record_t *rec,
                        const uint8_t *stuck) {
  for (int r = 0; r < n->size; r++)
    if (stuck[r] && plait_neg_missing(n, rec, r)) return 1;
  return 0;
}

/* Whether rank r has been quiet (nothing moved for it) for the stall time. */
static int quiet(const plait_negotiator_t *n, int r, double now) {
  return now - n->deadlock.moved[r] >= n->stall_warn_s;
}

/* The largest set of ranks, each quiet for the stall time, that can only be
 * released by each other (see deadlock.h); returns how many, marked in
 * stuck. A rank that moved lately is counted as free: it may move again. */
static int stuck_ranks(const plait_negotiator_t *n, plait_record_t **recs, int count,
                       double now, uint8_t *stuck) {
  memset(stuck, 0, (size_t)n->size);
  for (int i = 0; i < count; i++)
    for (int r = 0; r < n->size; r++) stuck[r] |= recs[i]->have[r] != 0; /* 1 or 2 */
  for (int r = 0; r < n->size; r++) stuck[r] &= (uint8_t)quiet(n, r, now);
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = 0; i < count; i++) {
      const plait_record_t *rec = recs[i];
      if (misses_stuck(n, rec, stuck)) continue;
      /* rec may complete once the ranks outside do their part: its ranks
       * may be released */
      for (int r = 0; r < n->size; r++)
        if (rec->have[r] && stuck[r]) stuck[r] = 0, changed = 1;
    }
  }
  int k = 0;
  for (int r = 0; r < n->size; r++) k += stuck[r];
  return k;
}

/* Appends with snprintf, never past cap. */
static void add(char *buf, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t cap, size_t *used, const char *fmt, ...) {
  if (*used >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *used, cap - *used, fmt, ap);
  va_end(ap);
  if (w > 0) *used = *used + (size_t)w < cap ? *used + (size_t)w : cap;
}

/* "rank 0 waits on 'a', 'b' and 2 more; rank 1 waits on 'c'" */
static void describe(const plait_negotiator_t *n, plait_record_t **recs, int count,
                     const uint8_t *stuck, char *buf, size_t cap, size_t *used) {
  int listed = 0, nstuck = 0;
  for (int r = 0; r < n->size; r++) nstuck += stuck[r];
  for (int r = 0; r < n->size; r++) {
    if (!stuck[r]) continue;
    if (listed == RANKS_LISTED) {
      add(buf, cap, used, "; and %d more rank%s", nstuck - listed,
          nstuck - listed == 1 ? "" : "s");
      break;
    }
    add(buf, cap, used, "%srank %d waits on ", listed++ ? "; " : "", r);
    int names = 0;
    for (int i = 0; i < count; i++) {
      if (!recs[i]->have[r]) continue;
      if (names++ >= NAMES_PER_RANK) continue;
      const char *name = recs[i]->name;
      add(buf, cap, used, "%s'%.*s%s'", names > 1 ? ", " : "", NAME_CHARS, name,
          strlen(name) > NAME_CHARS ? "..." : "");
    }
    if (names > NAMES_PER_RANK) add(buf, cap, used, " and %d more", names - NAMES_PER_RANK);
  }
}

/* Whether the verdict fails rec: announced by a stuck rank, and no join. */
static int condemned(const plait_negotiator_t *n, const plait_record_t *rec,
                     const uint8_t *stuck) {
  int mine = 0;
  for (int r = 0; r < n->size && !mine; r++) mine = stuck[r] && rec->have[r];
  return mine && !is_join(n, rec);
}

/* The verdict: every condemned record fails with msg. */
static plait_result_t fail_stuck(plait_negotiator_t *n, plait_record_t **recs, int count,
                                 const uint8_t *stuck, const char *msg) {
  plait_result_t rc = PLAIT_SUCCESS;
  for (int i = 0; i < count && rc == PLAIT_SUCCESS; i++) {
    plait_record_t *rec = recs[i];
    if (!condemned(n, rec, stuck)) continue;
    char *text = plait_strdupf("'%s': %s", rec->name, msg);
    rc = plait_neg_fail_record(n, rec, PLAIT_ERR_STALLED, text);
  }
  return rc;
}

/* The shortest time any stuck rank has been quiet. */
static double quiet_for(const plait_negotiator_t *n, const uint8_t *stuck, double now) {
  double q = -1;
  for (int r = 0; r < n->size; r++)
    if (stuck[r] && (q < 0 || now - n->deadlock.moved[r] < q)) q = now - n->deadlock.moved[r];
  return q;
}

static plait_result_t judge(plait_negotiator_t *n, double now) {
  snap_t s = {NULL, 0, (int)n->records.count};
  s.list = malloc(sizeof *s.list * (size_t)(s.cap ? s.cap : 1));
  uint8_t *stuck = calloc((size_t)n->size, 1);
  char *msg = malloc(MESSAGE_CAP);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!s.list || !stuck || !msg) goto out; /* checked again at the next tick */
  plait_namemap_each(&n->records, snap_cb, &s);
  qsort(s.list, (size_t)s.n, sizeof *s.list, by_arrival);
  int k = stuck_ranks(n, s.list, s.n, now, stuck), any = 0;
  for (int i = 0; i < s.n && !any; i++) any = condemned(n, s.list[i], stuck);
  if (k == 0 || !any) goto out; /* (a stuck rank of T waits on a rank of T
                                    that is not joined: never only joins) */
  size_t used = 0;
  char who[256];
  plait_format_ranks(who, sizeof who, n->size, stuck);
  if (k == n->size)
    add(msg, MESSAGE_CAP, &used, "deadlock: no operation can complete: ");
  else
    add(msg, MESSAGE_CAP, &used, "deadlock among %s (each of their operations waits for one of "
        "them): ", who);
  describe(n, s.list, s.n, stuck, msg, MESSAGE_CAP, &used);
  add(msg, MESSAGE_CAP, &used, " (nothing moved for %.1f s, PLAIT_STALL_WARN_S=%g)",
      quiet_for(n, stuck, now), n->stall_warn_s);
  PLAIT_WARN("stall", "%s; failing their pending operations on every rank", msg);
  n->deadlock.verdicts++;
  rc = fail_stuck(n, s.list, s.n, stuck, msg);
out:
  free(s.list);
  free(stuck);
  free(msg);
  return rc;
}

plait_result_t plait_deadlock_inspect(struct plait_negotiator *n, double now) {
  plait_deadlock_t *d = &n->deadlock;
  if (n->stall_warn_s <= 0 || !d->moved) return PLAIT_SUCCESS;
  /* rank 0's thread was away (a collective, or descheduled): everyone may
   * have moved meanwhile */
  double away = n->stall_warn_s / 4 > 0.5 ? n->stall_warn_s / 4 : 0.5;
  if (away > n->stall_warn_s) away = n->stall_warn_s;
  note_moves(d, d->last_tick <= 0 || now - d->last_tick > away, now);
  d->last_tick = now;
  /* the common case: nothing pending. (Ready records do not stop the check:
   * a group's ready members wait in n->ready for the others, which may be
   * the very operations that are deadlocked; what becomes ready moves.) */
  if (n->records.count == 0) return PLAIT_SUCCESS;
  if (now - d->last_check < 0.1) return PLAIT_SUCCESS;
  d->last_check = now;
  int any_quiet = 0; /* a busy job: every rank moved lately, nothing to judge */
  for (int r = 0; r < n->size && !any_quiet; r++) any_quiet = quiet(n, r, now);
  return any_quiet ? judge(n, now) : PLAIT_SUCCESS;
}
