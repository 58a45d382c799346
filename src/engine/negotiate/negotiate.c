/* Rank 0's negotiation: records, readiness, agreement, groups, stalls, and
 * the tick that releases ready records to the fusion planner (fusion.c) and
 * the response list (responses.c). */
#include "engine/negotiate/negotiate.h"
#include "engine/negotiate/negotiate_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"
#include "util/clock.h"
#include "util/strdupf.h"
#include "engine/transport/process_set.h"

plait_result_t plait_neg_init(plait_negotiator_t *n, int size, const plait_config_t *cfg,
                              plait_cache_t *cache) {
  memset(n, 0, sizeof *n);
  n->size = size;
  n->threshold = cfg->fusion_threshold;
  n->max_tensor = cfg->fusion_max_tensor;
  n->stall_warn_s = cfg->stall_warn_s;
  n->stall_abort_s = cfg->stall_abort_s;
  n->cache = cache;
  n->shutdown_rank = -1;
  n->last_joined = -1;
  n->hold_s = cfg->cycle_time_ms * 1e-3;
  n->held_since = -1;
  plait_bursts_init(&n->bursts);
  n->joined = calloc((size_t)size, 1);
  if (!n->joined || plait_namemap_init(&n->records) || plait_namemap_init(&n->groups) ||
      plait_namemap_init(&n->tombstones) || plait_deadlock_init(&n->deadlock, size)) {
    free(n->joined);
    plait_deadlock_free(&n->deadlock);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for negotiation");
  }
  return PLAIT_SUCCESS;
}

static void free_record_cb(const char *key, void *value, void *arg) {
  (void)key;
  plait_record_free(value, *(int *)arg);
}

void plait_neg_free(plait_negotiator_t *n) {
  plait_namemap_each(&n->tombstones, plait_neg_free_tomb_cb, NULL);
  plait_namemap_free(&n->tombstones);
  plait_namemap_each(&n->records, free_record_cb, &n->size);
  plait_namemap_free(&n->records);
  plait_namemap_free(&n->groups);
  for (int i = 0; i < n->nready; i++) plait_record_free(n->ready[i], n->size);
  free(n->ready);
  free(n->joined);
  plait_bursts_free(&n->bursts);
  plait_deadlock_free(&n->deadlock);
  free(n->scratch);
  memset(n, 0, sizeof *n);
}

static plait_record_t *new_record(plait_negotiator_t *n, const char *key, const char *name,
                                  int32_t pset, double now) {
  /* one block: the record, then per rank its metadata, whether it announced
   * and whether it is a member (plait_record_free frees the block once) */
  size_t size = (size_t)n->size;
  plait_record_t *rec = malloc(sizeof *rec + size * (sizeof *rec->metas + 2));
  if (!rec) return NULL;
  memset(rec, 0, sizeof *rec); /* metas[r] is set where have[r] is: not cleared (N x its size) */
  rec->name = strdup(name);
  rec->key = pset ? strdup(key) : rec->name; /* the global set's key is the name */
  rec->pset = pset;
  rec->metas = (plait_meta_t *)(rec + 1);
  rec->have = (uint8_t *)(rec->metas + size);
  rec->member = rec->have + size; /* plait_neg_set_members fills it, or sets it NULL */
  memset(rec->have, 0, 2 * size);
  rec->cache_id = -1;
  rec->first_seen = now;
  rec->arrival = n->arrivals++;
  if (!rec->name || !rec->key || plait_neg_set_members(n, rec) ||
      plait_namemap_put(&n->records, key, rec)) {
    plait_record_free(rec, 0);
    return NULL;
  }
  return rec;
}

/* A record every rank has announced: do they agree? Sets status/message. */
static void check_agreement(plait_negotiator_t *n, plait_record_t *rec) {
  int ref = -1;
  for (int r = 0; r < n->size && ref < 0; r++)
    if (rec->have[r]) ref = r;
  char what[64], va[256], vb[256];
  int odd = -1; /* a rank covered by a subtree's item (have 2) has its root's metadata */
  for (int r = 0, seen = 0; r < n->size && odd < 0 && seen < rec->nown; r++)
    if (rec->have[r] == 1 && ++seen && plait_meta_describe_difference(&rec->metas[ref], &rec->metas[r], what,
                                                       sizeof what, va, vb, sizeof va))
      odd = r;
  if (odd < 0) return;
  /* Group the ranks by their value of the field that differs. */
  size_t cap = 4096, used = 0;
  char *msg = malloc(cap);
  uint8_t *done = calloc((size_t)n->size, 1), *same = calloc((size_t)n->size, 1);
  if (!msg || !done || !same) {
    free(msg), free(done), free(same);
    rec->status = PLAIT_ERR_MISMATCH;
    return;
  }
  used += (size_t)snprintf(msg, cap, "%s '%s': mismatched %s across ranks:",
                           plait_coll_name((plait_coll_t)rec->metas[ref].coll), rec->name, what);
  for (int r = 0; r < n->size; r++) {
    if (!rec->have[r] || done[r]) continue;
    char value[256], w2[64], x[256];
    memset(same, 0, (size_t)n->size);
    /* value of rank r: compare against a rank known to differ, or ref */
    const plait_meta_t *mr = plait_record_meta(rec, r), *mo = plait_record_meta(rec, odd);
    int other = plait_meta_describe_difference(mr, mo, w2, sizeof w2, value, x, sizeof value)
                    ? odd : ref;
    if (!plait_meta_describe_difference(mr, plait_record_meta(rec, other), w2, sizeof w2, value,
                                        x, sizeof value))
      plait_meta_describe_difference(mr, plait_record_meta(rec, r == ref ? odd : ref), w2,
                                     sizeof w2, value, x, sizeof value);
    for (int q = r; q < n->size; q++)
      if (rec->have[q] && !done[q] && plait_meta_equal(plait_record_meta(rec, q), mr))
        same[q] = done[q] = 1;
    char who[512];
    plait_format_ranks(who, sizeof who, n->size, same);
    if (used < cap) used += (size_t)snprintf(msg + used, cap - used, " %s sent %s;", who, value);
  }
  if (used < cap && used > 0 && msg[used - 1] == ';') msg[used - 1] = '\0';
  free(done);
  free(same);
  rec->status = PLAIT_ERR_MISMATCH;
  rec->message = msg;
}

/* Collectives a joined rank takes part in: allreduce (with the op's identity),
 * allgather (no rows) and barrier. Horovod 0.28.1 fails allgather, broadcast,
 * alltoall and reducescatter while a rank has joined, and its joined rank
 * crashes in a barrier (docs/horovod-comparison.md, "Join"). */
static int counts_joined(const plait_meta_t *m) {
  return m->coll == PLAIT_COLL_ALLREDUCE || m->coll == PLAIT_COLL_ALLGATHER ||
         m->coll == PLAIT_COLL_BARRIER;
}

static int first_have(const plait_negotiator_t *n, const plait_record_t *rec) {
  int r = 0;
  while (r < n->size - 1 && !rec->have[r]) r++;
  return r;
}

/* A record sent for a process set that does not exist at rank 0, or by a
 * rank outside it: it fails at once on the ranks that sent it. */
static plait_result_t fail_outside_set(plait_negotiator_t *n, plait_record_t *rec, int rank) {
  rec->status = PLAIT_ERR_INVALID_ARGUMENT;
  if (!rec->member)
    rec->message = plait_strdupf("'%s' is on process set %d, which does not exist (removed "
                                 "while the operation was on its way, or never added)",
                                 rec->name, (int)rec->pset);
  else
    rec->message = plait_strdupf("'%s': rank %d is not a member of process set %d", rec->name,
                                 rank, (int)rec->pset);
  plait_namemap_remove(&n->records, rec->key);
  return plait_neg_push_ready(n, rec);
}

/* A record is complete: agree, then hand it (or its whole group) on. */
static plait_result_t complete(plait_negotiator_t *n, plait_record_t *rec) {
  plait_namemap_remove(&n->records, rec->key);
  check_agreement(n, rec);
  if (!rec->status && rec->metas[first_have(n, rec)].coll == PLAIT_COLL_PSET_REMOVE)
    plait_neg_check_removal(n, rec);
  PLAIT_CHECK(plait_neg_push_ready(n, rec));
  return PLAIT_SUCCESS;
}

/* The ranks counted present for rec: those that announced it, and joined
 * ranks where they count. Without a join it looks at no rank: every
 * announcement asks, so a scan here would make a record of N ranks cost
 * O(N^2) (n->rank_scans counts what it looks at). */
static int present(plait_negotiator_t *n, const plait_record_t *rec) {
  int count = rec->count;
  if (!n->njoined || rec->pset != 0) return count;
  int ref = 0;
  while (ref < n->size && !rec->have[ref]) ref++;
  n->rank_scans += (uint64_t)ref;
  if (ref < n->size && counts_joined(&rec->metas[ref])) {
    for (int r = 0; r < n->size; r++) count += !rec->have[r] && n->joined[r];
    n->rank_scans += (uint64_t)n->size;
  }
  return count;
}

static void note_join(plait_negotiator_t *n, int rank) {
  if (!n->joined[rank]) {
    n->joined[rank] = 1;
    n->njoined++;
  }
  n->last_joined = rank;
}

/* Joined ranks make other pending records ready (or impossible). */
static plait_result_t sweep_joined(plait_negotiator_t *n);
static plait_result_t settle_joined(plait_negotiator_t *n, plait_record_t *rec);

plait_record_t *plait_neg_record(plait_negotiator_t *n, const char *key, const char *name,
                                 int32_t pset) {
  n->lookups++;
  plait_record_t *rec = plait_namemap_get(&n->records, key);
  if (!rec && !(rec = new_record(n, key, name, pset, plait_now())))
    plait_error(PLAIT_ERR_NO_MEMORY, "out of memory recording '%s'", name);
  return rec;
}

plait_result_t plait_neg_settle(plait_negotiator_t *n, plait_record_t *rec) {
  if (present(n, rec) == rec->nmembers) return complete(n, rec);
  if (n->njoined) return settle_joined(n, rec); /* e.g. a broadcast after a join */
  return PLAIT_SUCCESS;
}

plait_result_t plait_neg_add(plait_negotiator_t *n, int rank, const char *name,
                             const plait_meta_t *meta, int cache_id, uint64_t acked) {
  char buf[PLAIT_OP_KEY_MAX];
  const char *key = plait_op_key(buf, meta->pset, name);
  if (n->tombstones.count && plait_neg_stale(n, rank, key, acked)) return PLAIT_SUCCESS;
  plait_record_t *rec = plait_neg_record(n, key, name, meta->pset);
  if (!rec) return PLAIT_ERR_NO_MEMORY;
  if (rec->have[rank])
    return plait_error(PLAIT_ERR_PROTOCOL, "rank %d announced '%s' twice", rank, name);
  if (plait_meta_copy(&rec->metas[rank], meta))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory recording '%s'", name);
  rec->have[rank] = 1;
  rec->nown++;
  rec->count++;
  plait_deadlock_moved(&n->deadlock, rank);
  if (cache_id >= 0) rec->cache_id = cache_id;
  if (!rec->member || !rec->member[rank]) return fail_outside_set(n, rec, rank);
  if (meta->coll == PLAIT_COLL_JOIN) {
    note_join(n, rank);
    PLAIT_CHECK(sweep_joined(n));
    if (!plait_namemap_get(&n->records, key)) return PLAIT_SUCCESS; /* completed by the sweep */
  }
  return plait_neg_settle(n, rec);
}

typedef struct {
  plait_record_t **list;
  int n, cap;
} collect_t;

static void collect_cb(const char *key, void *value, void *arg) {
  (void)key;
  collect_t *c = arg;
  if (c->n < c->cap) c->list[c->n++] = value;
}

static int by_arrival(const void *a, const void *b) {
  const plait_record_t *x = *(plait_record_t *const *)a, *y = *(plait_record_t *const *)b;
  return (x->arrival > y->arrival) - (x->arrival < y->arrival);
}

/* Snapshot of the pending records, in arrival order. */
static plait_record_t **pending_records(plait_negotiator_t *n, int *count) {
  collect_t c = {NULL, 0, (int)n->records.count};
  c.list = malloc(sizeof *c.list * (c.cap ? (size_t)c.cap : 1));
  if (!c.list) return NULL;
  plait_namemap_each(&n->records, collect_cb, &c);
  qsort(c.list, (size_t)c.n, sizeof *c.list, by_arrival);
  *count = c.n;
  return c.list;
}

/* A pending record whose missing ranks have all joined completes (allreduce,
 * allgather) or fails naming them (anything else). */
static plait_result_t settle_joined(plait_negotiator_t *n, plait_record_t *rec) {
  if (rec->pset != 0) return PLAIT_SUCCESS; /* join is the global set's only */
  plait_result_t rc = PLAIT_SUCCESS;
  uint8_t *missing = calloc((size_t)n->size, 1);
  int nmissing = 0, all_joined = 1, ref = 0;
  while (!rec->have[ref]) ref++;
  for (int r = 0; r < n->size && missing; r++)
    if (!rec->have[r]) missing[r] = 1, nmissing++, all_joined &= n->joined[r];
  if (missing && nmissing && all_joined && rec->metas[ref].coll != PLAIT_COLL_JOIN) {
    if (!counts_joined(&rec->metas[ref])) {
      char who[256];
      plait_format_ranks(who, sizeof who, n->size, missing);
      const char *coll = plait_coll_name((plait_coll_t)rec->metas[ref].coll);
      rec->status = PLAIT_ERR_MISMATCH;
      rec->message = plait_strdupf("%s '%s' cannot run: %s joined (plait_join) and only take%s "
                                   "part in allreduce, allgather and barrier (%s is not supported "
                                   "with join, as in Horovod)", coll, rec->name, who,
                                   nmissing == 1 ? "s" : "", coll);
      plait_namemap_remove(&n->records, rec->key);
      rc = plait_neg_push_ready(n, rec);
    } else {
      rc = complete(n, rec);
    }
  }
  free(missing);
  return rc;
}

static plait_result_t sweep_joined(plait_negotiator_t *n) {
  int count;
  plait_record_t **list = pending_records(n, &count);
  if (!list) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory in negotiation");
  plait_result_t rc = PLAIT_SUCCESS;
  for (int i = 0; i < count && rc == PLAIT_SUCCESS; i++) rc = settle_joined(n, list[i]);
  free(list);
  return rc;
}

/* Fails every pending record of a group that already failed, so no member
 * waits for announcements that cannot complete it. */
static plait_result_t fail_group(plait_negotiator_t *n, int32_t pset, const char *group,
                                 uint32_t status, const char *why) {
  int count;
  plait_record_t **list = pending_records(n, &count);
  if (!list) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory in negotiation");
  plait_result_t rc = PLAIT_SUCCESS;
  for (int i = 0; i < count && rc == PLAIT_SUCCESS; i++) {
    plait_record_t *rec = list[i];
    int ref = 0;
    while (!rec->have[ref]) ref++;
    const plait_meta_t *m = &rec->metas[ref];
    if (!m->group || strcmp(m->group, group) || rec->pset != pset) continue;
    rec->status = status;
    rec->message = plait_strdupf("allreduce '%s' failed with its group '%s': %s", rec->name,
                                 group, why);
    rec->counted = 1; /* released with its group now, not counted towards it */
    plait_neg_bury(n, rec);
    plait_namemap_remove(&n->records, rec->key);
    rc = plait_neg_push_ready(n, rec);
  }
  free(list);
  return rc;
}

typedef struct {
  const plait_negotiator_t *n;
  double now;
  int due;
} stall_scan_t;

static void stall_scan_cb(const char *key, void *value, void *arg) {
  (void)key;
  stall_scan_t *s = arg;
  const plait_record_t *rec = value;
  double age = s->now - rec->first_seen;
  s->due |= (s->n->stall_warn_s > 0 && age >= s->n->stall_warn_s && !rec->warned) ||
            (s->n->stall_abort_s > 0 && age >= s->n->stall_abort_s);
}

/* Warns about, and with PLAIT_STALL_ABORT_S fails, records that some ranks
 * have not announced for long. */
static plait_result_t inspect_stalls(plait_negotiator_t *n, double now) {
  if (n->stall_warn_s <= 0 && n->stall_abort_s <= 0) return PLAIT_SUCCESS;
  if (now - n->last_stall_check < 0.1) return PLAIT_SUCCESS;
  n->last_stall_check = now;
  stall_scan_t scan = {n, now, 0};
  plait_namemap_each(&n->records, stall_scan_cb, &scan);
  if (!scan.due) return PLAIT_SUCCESS; /* the common case: nothing old enough */
  int count;
  plait_record_t **list = pending_records(n, &count);
  if (!list) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory in negotiation");
  plait_result_t rc = PLAIT_SUCCESS;
  for (int i = 0; i < count && rc == PLAIT_SUCCESS; i++) {
    plait_record_t *rec = list[i];
    double age = now - rec->first_seen;
    int warn = n->stall_warn_s > 0 && age >= n->stall_warn_s && !rec->warned;
    int abort_now = n->stall_abort_s > 0 && age >= n->stall_abort_s;
    if (!warn && !abort_now) continue;
    uint8_t *missing = calloc((size_t)n->size, 1);
    if (!missing) break;
    for (int r = 0; r < n->size; r++) missing[r] = (uint8_t)plait_neg_missing(n, rec, r);
    char who[512], where[48] = "";
    plait_format_ranks(who, sizeof who, n->size, missing);
    free(missing);
    if (rec->pset) snprintf(where, sizeof where, " of process set %d", (int)rec->pset);
    if (warn) {
      PLAIT_WARN("stall", "'%s' has waited %.1f s: submitted by %d of %d ranks%s; missing: %s "
                 "(PLAIT_STALL_WARN_S=%g)", rec->name, age, rec->count, rec->nmembers, where, who,
                 n->stall_warn_s);
      rec->warned = 1;
    }
    if (abort_now) {
      char *msg = plait_strdupf("'%s' stalled for %.1f s (PLAIT_STALL_ABORT_S=%g): %s never "
                                "submitted it", rec->name, age, n->stall_abort_s, who);
      rc = plait_neg_fail_record(n, rec, PLAIT_ERR_STALLED, msg);
    }
  }
  free(list);
  return rc;
}

/* Gives every member of a released group that has a failed member that
 * failure, so a group succeeds or fails as a whole. */
static void fail_released_group(plait_negotiator_t *n, plait_record_t **out, int k,
                                int32_t pset, const char *group) {
  const plait_record_t *bad = NULL;
  for (int i = 0; i < k && !bad; i++) {
    const plait_meta_t *m = &out[i]->metas[plait_record_ref(out[i], n->size)];
    if (m->group && !strcmp(m->group, group) && out[i]->pset == pset && out[i]->status)
      bad = out[i];
  }
  if (!bad) return;
  for (int i = 0; i < k; i++) {
    plait_record_t *rec = out[i];
    const plait_meta_t *m = &rec->metas[plait_record_ref(rec, n->size)];
    if (!m->group || strcmp(m->group, group) || rec->pset != pset || rec->status) continue;
    rec->status = bad->status;
    rec->message = plait_strdupf("allreduce '%s' failed with its group '%s': its member '%s' "
                                 "failed: %s", rec->name, group, bad->name,
                                 bad->message ? bad->message : plait_strerror(bad->status));
  }
}

/* Groups with a failed member: they leave at once (their pending members
 * failed too), instead of waiting for members that cannot all come. */
static void fail_broken_groups(plait_negotiator_t *n, plait_namemap_t *broken) {
  for (int i = 0; i < n->nready; i++) {
    plait_record_t *rec = n->ready[i];
    const plait_meta_t *m = &rec->metas[plait_record_ref(rec, n->size)];
    if (!m->group || !rec->status) continue;
    char gk[PLAIT_OP_KEY_MAX];
    const char *gkey = plait_op_key(gk, rec->pset, m->group); /* a group within its set */
    if (plait_namemap_get(broken, gkey)) continue;
    plait_namemap_put(broken, gkey, rec);
    char why[1200];
    snprintf(why, sizeof why, "its member '%s' failed: %s", rec->name,
             rec->message ? rec->message : plait_strerror(rec->status));
    fail_group(n, rec->pset, m->group, rec->status, why); /* appends to n->ready */
  }
}

/* Releases the ready records, a group only once all its members are ready
 * (or one has failed), in order. */
static plait_record_t **release(plait_negotiator_t *n, int *count) {
  plait_namemap_t broken;
  *count = 0;
  if (plait_namemap_init(&broken)) return NULL;
  fail_broken_groups(n, &broken);
  plait_record_t **out = malloc(sizeof *out * (size_t)(n->nready ? n->nready : 1));
  if (!out) {
    plait_namemap_free(&broken);
    return NULL;
  }
  for (int i = 0; i < n->nready; i++) {
    plait_record_t *rec = n->ready[i];
    const plait_meta_t *m = &rec->metas[plait_record_ref(rec, n->size)];
    if (!m->group || rec->counted) continue;
    rec->counted = 1;
    char gk[PLAIT_OP_KEY_MAX];
    const char *gkey = plait_op_key(gk, rec->pset, m->group);
    intptr_t have = (intptr_t)plait_namemap_get(&n->groups, gkey);
    plait_namemap_put(&n->groups, gkey, (void *)(have + 1));
  }
  int k = 0, kept = 0;
  for (int i = 0; i < n->nready; i++) {
    plait_record_t *rec = n->ready[i];
    const plait_meta_t *m = &rec->metas[plait_record_ref(rec, n->size)];
    char gk[PLAIT_OP_KEY_MAX];
    const char *gkey = m->group ? plait_op_key(gk, rec->pset, m->group) : NULL;
    if (!m->group || plait_namemap_get(&broken, gkey) ||
        (intptr_t)plait_namemap_get(&n->groups, gkey) >= (intptr_t)m->group_size)
      out[k++] = rec;
    else
      n->ready[kept++] = rec;
  }
  n->nready = kept;
  for (int i = 0; i < k; i++) {
    const plait_meta_t *m = &out[i]->metas[plait_record_ref(out[i], n->size)];
    char gk[PLAIT_OP_KEY_MAX];
    const char *gkey = m->group ? plait_op_key(gk, out[i]->pset, m->group) : NULL;
    if (m->group && plait_namemap_get(&n->groups, gkey)) {
      fail_released_group(n, out, k, out[i]->pset, m->group);
      plait_namemap_remove(&n->groups, gkey);
    }
  }
  plait_namemap_free(&broken);
  *count = k;
  return out;
}

/* What the fusion planner needs of a released record, and nothing else. */
static plait_fusion_item_t fusion_item(const plait_negotiator_t *n, const plait_record_t *rec) {
  const plait_meta_t *m = &rec->metas[plait_record_ref(rec, n->size)];
  return (plait_fusion_item_t){
      .coll = m->coll,
      .failed = rec->status != 0,
      .solo = n->device_solo && m->device >= 0,
      .key = {.dtype = m->dtype, .op = m->op, .device = m->device, .prescale = m->prescale,
              .postscale = m->postscale, .pset = rec->pset},
      .bytes = plait_meta_bytes(m)};
}

/* A join released (it succeeded): the ranks that joined are back. Returns
 * the last rank to join, which its response reports. */
static int end_joins(plait_negotiator_t *n, plait_record_t **recs, int count) {
  for (int i = 0; i < count; i++) {
    const plait_meta_t *m = &recs[i]->metas[plait_record_ref(recs[i], n->size)];
    if (m->coll != PLAIT_COLL_JOIN || recs[i]->status) continue;
    n->njoined = 0;
    memset(n->joined, 0, (size_t)n->size);
  }
  return n->last_joined;
}

/* Room for need ints, kept between ticks (no allocation per tick). */
static int *scratch_ids(plait_negotiator_t *n, int need) {
  if (need > n->scratch_cap) {
    int cap = need > 64 ? need : 64;
    int *p = realloc(n->scratch, sizeof *p * (size_t)cap);
    if (!p) return NULL;
    n->scratch = p;
    n->scratch_cap = cap;
  }
  return n->scratch;
}

/* Whether the ready records wait for companions expected from their last
 * burst: only while one is missing, the fusion buffer is not full yet, and
 * for at most hold_s. Failures, joins and uncached operations never wait on
 * their own account. */
static int hold(plait_negotiator_t *n, double now) {
  if (n->hold_s <= 0 || n->threshold == 0 || n->njoined) return 0;
  if (n->held_since >= 0 && now >= n->held_since + n->hold_s) return 0;
  int *ids = scratch_ids(n, n->nready);
  if (!ids) return 0;
  uint64_t bytes = 0;
  int k = 0;
  for (int i = 0; i < n->nready; i++) {
    const plait_record_t *rec = n->ready[i];
    const plait_meta_t *m = &rec->metas[plait_record_ref(rec, n->size)];
    if (rec->status) k = -1;
    if (k < 0) break;
    if (m->coll != PLAIT_COLL_ALLREDUCE || rec->cache_id < 0) continue;
    bytes += plait_meta_bytes(m);
    ids[k++] = rec->cache_id;
  }
  int wait = k > 0 && bytes < n->threshold && plait_bursts_incomplete(&n->bursts, ids, k);
  if (wait && n->held_since < 0) n->held_since = now;
  return wait;
}

double plait_neg_hold_until(const plait_negotiator_t *n) {
  return n->holding ? n->held_since + n->hold_s : 0;
}

plait_result_t plait_neg_plan(plait_negotiator_t *n, double now, plait_response_list_t *out,
                              int *any) {
  memset(out, 0, sizeof *out);
  out->shutdown_rank = -1;
  *any = 0;
  PLAIT_CHECK(plait_deadlock_inspect(n, now)); /* 1. deadlock, then stalls: may fail */
  PLAIT_CHECK(inspect_stalls(n, now));          /*    records into n->ready */
  n->holding = n->nready > 0 && hold(n, now); /* 2. dispatch now, or wait for companions */
  if (n->nready == 0 || n->holding) return PLAIT_SUCCESS;
  n->held_since = -1;
  int count = 0;
  plait_record_t **recs = release(n, &count); /* 3. release: groups whole, in order */
  /* a few records (the latency-bound case) need no allocation */
  enum { FEW = 16 };
  plait_fusion_item_t few_items[FEW];
  plait_fusion_bin_t few_bins[FEW];
  int few_bin_of[FEW];
  size_t cap = (size_t)(count ? count : 1);
  int few = count <= FEW;
  plait_fusion_item_t *items = few ? few_items : malloc(sizeof *items * cap);
  plait_fusion_bin_t *bins = few ? few_bins : malloc(sizeof *bins * cap);
  int *bin_of = few ? few_bin_of : malloc(sizeof *bin_of * cap);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!recs || !items || !bins || !bin_of) {
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "out of memory planning responses");
    goto out;
  }
  for (int i = 0; i < count; i++) items[i] = fusion_item(n, recs[i]);
  /* 4. plan: pure, from the records' metadata, the threshold and the limit */
  int nb = plait_fusion_plan(items, count, n->threshold, n->max_tensor, bins, bin_of);
  int join_rank = end_joins(n, recs, count);
  /* 5. the response list, in the plan's order; what ran together */
  PLAIT_CHECK_GOTO(rc, plait_neg_respond(n, recs, count, bins, nb, bin_of, join_rank, out), out);
  *any = out->n > 0;
  plait_bursts_record_list(&n->bursts, out); /* their burst from now on */
out:
  for (int i = 0; i < count; i++) plait_record_free(recs[i], n->size);
  free(recs);
  if (!few) {
    free(items);
    free(bins);
    free(bin_of);
  }
  if (rc) plait_responses_free(out);
  return rc;
}

plait_result_t plait_neg_fail_all(plait_negotiator_t *n, plait_result_t rc, const char *why,
                                  plait_response_list_t *out) {
  int count;
  plait_record_t **list = pending_records(n, &count);
  if (!list) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory in negotiation");
  for (int i = 0; i < count; i++) {
    plait_record_t *rec = list[i];
    rec->status = rc;
    rec->message = plait_strdupf("'%s' was pending: %s", rec->name, why);
    plait_namemap_remove(&n->records, rec->key);
    plait_result_t prc = plait_neg_push_ready(n, rec);
    if (prc) {
      free(list);
      return prc;
    }
  }
  free(list);
  n->njoined = 0;
  memset(n->joined, 0, (size_t)n->size);
  n->hold_s = 0; /* coordination is ending: nothing waits */
  int any;
  return plait_neg_plan(n, plait_now(), out, &any);
}
