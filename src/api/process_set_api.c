/* The process-set calls of the public ABI: plait_process_set_add/remove
 * (collective operations negotiated like any other, on the global set) and
 * the queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/current.h"
#include "api/process_set_api.h"
#include "engine/submit/handle.h"
#include "engine/transport/process_set.h"
#include "util/error.h"
#include "util/clock.h"

#define BAD(...) plait_error(PLAIT_ERR_INVALID_ARGUMENT, __VA_ARGS__)

static int by_value(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Submits one add/remove and waits for it; *result_id: the id it reports.
 * Every rank makes these calls in the same order, so the n-th has the same
 * internal name everywhere. */
static plait_result_t run(const char *fn, plait_engine_t *en, plait_meta_t *meta,
                          double timeout_s, int32_t *result_id) {
  char name[64];
  snprintf(name, sizeof name, "plait:process_set.%llu",
           (unsigned long long)plait_psets_next_call(en->psets));
  plait_entry_t *e = calloc(1, sizeof *e);
  plait_handle_t *h = plait_handle_new((plait_coll_t)meta->coll, 1, NULL);
  plait_result_t rc = PLAIT_SUCCESS;
  if (!e || !h || !(e->name = strdup(name))) {
    rc = plait_error(PLAIT_ERR_NO_MEMORY, "%s: out of memory", fn);
    plait_meta_free(meta);
    free(e ? e->name : NULL);
    free(e);
    e = NULL;
  } else {
    e->meta = *meta; /* owns splits now */
    e->handle = h;
    e->submitted_at = plait_now();
    rc = plait_engine_submit(en, &e, 1);
    if (rc) {
      plait_error_context(rc, "%s", fn);
      plait_entry_free(e);
    }
  }
  if (rc) {
    if (h) {
      plait_handle_abandon(h);
      plait_release(h);
    }
    return rc;
  }
  rc = plait_wait(h, timeout_s);
  if (rc == PLAIT_ERR_TIMEOUT) { /* init only: the others never came */
    plait_release(h); /* fails at shutdown, which the failed init runs */
    return plait_error(rc, "%s: the other ranks did not add the same process set within %g s "
                       "(PLAIT_START_TIMEOUT_S): is PLAIT_PROCESS_SETS the same on every rank?",
                       fn, timeout_s);
  }
  if (rc == PLAIT_SUCCESS && result_id) *result_id = h->join_rank;
  if (rc) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", plait_last_error());
    plait_release(h);
    return plait_error(rc, "%s: %s", fn, msg);
  }
  plait_release(h);
  return PLAIT_SUCCESS;
}

/* nsets: how many sets PLAIT_PROCESS_SETS lists (0 for a dynamic add), so
 * that ranks given different lists fail as a mismatch; timeout_s: how long
 * to wait (< 0: no limit). */
static plait_result_t add(const char *fn, plait_engine_t *en, const int *ranks, int n, int nsets,
                          double timeout_s, int32_t *id) {
  if (!ranks || !id) return BAD("%s: %s is NULL", fn, !ranks ? "ranks" : "id");
  PLAIT_CHECK(plait_api_check(fn, en));
  int size = en->topo.size;
  if (n < 1 || n > size) return BAD("%s: n is %d; a process set has 1 to %d ranks", fn, n, size);
  const plait_transport_t *t = plait_psets_transport(en->psets);
  if (!t || !PLAIT_TRANSPORT_HAS(t, subset))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: transport '%s' has no sub-communicators (its "
                       "table has no subset entry), so it runs no process set but the global "
                       "one", fn, t ? t->name : "?");
  plait_meta_t meta;
  memset(&meta, 0, sizeof meta);
  meta.coll = PLAIT_COLL_PSET_ADD;
  meta.device = PLAIT_DEVICE_HOST;
  meta.prescale = meta.postscale = 1.0;
  meta.root = nsets;
  meta.nsplits = (uint32_t)n;
  if (!(meta.splits = malloc(sizeof(int64_t) * (size_t)n)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "%s: out of memory", fn);
  for (int i = 0; i < n; i++) meta.splits[i] = ranks[i];
  qsort(meta.splits, (size_t)n, sizeof(int64_t), by_value);
  for (int i = 0; i < n; i++) {
    plait_result_t rc = PLAIT_SUCCESS;
    if (meta.splits[i] < 0 || meta.splits[i] >= size)
      rc = BAD("%s: rank %lld is not a rank of this job of %d", fn, (long long)meta.splits[i],
               size);
    else if (i && meta.splits[i] == meta.splits[i - 1])
      rc = BAD("%s: rank %lld is listed twice", fn, (long long)meta.splits[i]);
    if (rc) {
      free(meta.splits);
      return rc;
    }
  }
  int32_t existing = plait_psets_find(en->psets, meta.splits, n);
  if (existing >= 0) {
    free(meta.splits);
    return BAD("%s: a process set of these %d ranks exists already (id %d%s), as Horovod "
               "refuses a duplicate", fn, n, (int)existing, existing ? "" : ": the global set");
  }
  return run(fn, en, &meta, timeout_s, id);
}

static const char dynamic_help[] =
    "process sets can only be added or removed while plait runs with "
    "PLAIT_DYNAMIC_PROCESS_SETS=1 (or HOROVOD_DYNAMIC_PROCESS_SETS=1); sets known at init go in "
    "PLAIT_PROCESS_SETS";

PLAIT_API plait_result_t plait_process_set_add(const int *ranks, int n, int32_t *id) {
  static const char fn[] = "plait_process_set_add";
  if (!ranks || !id) return BAD("%s: %s is NULL", fn, !ranks ? "ranks" : "id");
  PLAIT_API_ENGINE(en);
  PLAIT_CHECK(plait_api_check(fn, en));
  if (!plait_psets_dynamic(en->psets))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: %s", fn, dynamic_help);
  return add(fn, en, ranks, n, 0, -1, id);
}

PLAIT_API plait_result_t plait_process_set_remove(int32_t id) {
  static const char fn[] = "plait_process_set_remove";
  PLAIT_API_ENGINE(en);
  PLAIT_CHECK(plait_api_check(fn, en));
  if (id == PLAIT_GLOBAL_PROCESS_SET)
    return BAD("%s: process set 0 is the global set, which is never removed", fn);
  PLAIT_CHECK(plait_psets_query(en->psets, fn, id, NULL, NULL, NULL, 0));
  if (!plait_psets_dynamic(en->psets))
    return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: %s", fn, dynamic_help);
  plait_meta_t meta;
  memset(&meta, 0, sizeof meta);
  meta.coll = PLAIT_COLL_PSET_REMOVE;
  meta.device = PLAIT_DEVICE_HOST;
  meta.prescale = meta.postscale = 1.0;
  meta.root = id;
  return run(fn, en, &meta, -1, NULL);
}

PLAIT_API plait_result_t plait_process_set_size(int32_t id, int *size) {
  if (!size) return BAD("plait_process_set_size: size is NULL");
  PLAIT_API_ENGINE(en);
  PLAIT_CHECK(plait_api_check("plait_process_set_size", en));
  return plait_psets_query(en->psets, "plait_process_set_size", id, size, NULL, NULL, 0);
}

PLAIT_API plait_result_t plait_process_set_rank(int32_t id, int *rank) {
  if (!rank) return BAD("plait_process_set_rank: rank is NULL");
  PLAIT_API_ENGINE(en);
  PLAIT_CHECK(plait_api_check("plait_process_set_rank", en));
  return plait_psets_query(en->psets, "plait_process_set_rank", id, NULL, rank, NULL, 0);
}

PLAIT_API plait_result_t plait_process_set_ranks(int32_t id, int *ranks, int capacity, int *n) {
  static const char fn[] = "plait_process_set_ranks";
  if (!n) return BAD("%s: n is NULL", fn);
  if (capacity < 0 || (!ranks && capacity))
    return BAD("%s: ranks is %s with capacity %d", fn, ranks ? "set" : "NULL", capacity);
  int count = 0;
  PLAIT_API_ENGINE(en);
  PLAIT_CHECK(plait_api_check(fn, en));
  PLAIT_CHECK(plait_psets_query(en->psets, fn, id, &count, NULL, ranks, capacity));
  *n = count;
  if (count > capacity)
    return plait_error(PLAIT_ERR_BUFFER_TOO_SMALL, "%s: process set %d has %d ranks, room for %d",
                       fn, (int)id, count, capacity);
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_process_set_ids(int32_t *ids, int capacity, int *n) {
  static const char fn[] = "plait_process_set_ids";
  if (!n) return BAD("%s: n is NULL", fn);
  if (capacity < 0 || (!ids && capacity))
    return BAD("%s: ids is %s with capacity %d", fn, ids ? "set" : "NULL", capacity);
  PLAIT_API_ENGINE(en);
  PLAIT_CHECK(plait_api_check(fn, en));
  int count = 0;
  plait_psets_ids(en->psets, ids, capacity, &count);
  *n = count;
  if (count > capacity)
    return plait_error(PLAIT_ERR_BUFFER_TOO_SMALL, "%s: %d process sets, room for %d", fn, count,
                       capacity);
  return PLAIT_SUCCESS;
}

plait_result_t plait_process_sets_from_config(plait_engine_t *e, const char *spec,
                                              double timeout_s) {
  static const char fn[] = "plait_init";
  if (!spec || !*spec) return PLAIT_SUCCESS;
  int size = e->topo.size, ranks[4096], n = 0, nsets = 0, total = 1;
  for (const char *c = spec; *c; c++) total += *c == ';';
  const char *p = spec;
  for (;;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v >= size || n == (int)(sizeof ranks / sizeof ranks[0]))
      return plait_error(PLAIT_ERR_CONFIG, "PLAIT_PROCESS_SETS='%s': at offset %d: expected a "
                         "rank of this job of %d (ranks separated by ',', sets by ';', e.g. "
                         "\"0,1;1,2\")", spec, (int)(p - spec), size);
    ranks[n++] = (int)v;
    p = end;
    while (*p == ' ') p++;
    if (*p == ',') {
      p++;
      continue;
    }
    if (*p != ';' && *p != '\0')
      return plait_error(PLAIT_ERR_CONFIG, "PLAIT_PROCESS_SETS='%s': at offset %d: unexpected "
                         "'%c' (ranks separated by ',', sets by ';')", spec, (int)(p - spec), *p);
    int32_t id = 0;
    plait_result_t rc = add(fn, e, ranks, n, total, timeout_s, &id);
    if (rc) return plait_error_context(rc, "PLAIT_PROCESS_SETS set number %d", nsets + 1);
    nsets++;
    n = 0;
    if (*p == '\0') return PLAIT_SUCCESS;
    p++;
  }
}
