/* Bursts: which cached allreduces ran in the same response list last time. */
#include "engine/negotiate/burst.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void plait_bursts_init(plait_bursts_t *b) { memset(b, 0, sizeof *b); }

void plait_bursts_free(plait_bursts_t *b) {
  free(b->list_ids);
  free(b->of);
  free(b->count);
  free(b->free_list);
  free(b->stamp);
  free(b->ready);
  memset(b, 0, sizeof *b);
}

/* Room for cache ids below need (and as many burst numbers). */
static int grow(plait_bursts_t *b, int need) {
  if (need <= b->cap) return 0;
  int cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  int *of = realloc(b->of, sizeof *of * (size_t)cap);
  if (of) b->of = of;
  int *count = realloc(b->count, sizeof *count * (size_t)cap);
  if (count) b->count = count;
  int *fl = realloc(b->free_list, sizeof *fl * (size_t)cap);
  if (fl) b->free_list = fl;
  uint64_t *stamp = realloc(b->stamp, sizeof *stamp * (size_t)cap);
  if (stamp) b->stamp = stamp;
  int *ready = realloc(b->ready, sizeof *ready * (size_t)cap);
  if (ready) b->ready = ready;
  if (!of || !count || !fl || !stamp || !ready) return -1;
  for (int i = b->cap; i < cap; i++) {
    b->of[i] = -1;
    b->count[i] = 0;
    b->stamp[i] = 0;
    b->ready[i] = 0;
    b->free_list[b->nfree++] = cap - 1 - (i - b->cap); /* lowest numbers first out */
  }
  b->cap = cap;
  return 0;
}

plait_result_t plait_bursts_record(plait_bursts_t *b, const int *ids, int n) {
  if (n <= 0) return PLAIT_SUCCESS;
  int top = 0;
  for (int i = 0; i < n; i++)
    if (ids[i] + 1 > top) top = ids[i] + 1;
  if (grow(b, top)) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory recording bursts");
  for (int i = 0; i < n; i++) { /* leave the old bursts first: frees their numbers */
    int old = b->of[ids[i]];
    if (old >= 0 && --b->count[old] == 0) b->free_list[b->nfree++] = old;
    b->of[ids[i]] = -1;
  }
  /* live bursts <= ids with a burst < cap, and n >= 1 of them have none now */
  int burst = b->free_list[--b->nfree];
  for (int i = 0; i < n; i++) b->of[ids[i]] = burst;
  b->count[burst] = n;
  return PLAIT_SUCCESS;
}

/* Counts, per burst, its members among ready[0..n); returns the query's stamp. */
static uint64_t count_ready(plait_bursts_t *b, const int *ready, int n) {
  uint64_t q = ++b->queries;
  for (int i = 0; i < n; i++) {
    int id = ready[i];
    int burst = id >= 0 && id < b->cap ? b->of[id] : -1;
    if (burst < 0) continue;
    if (b->stamp[burst] != q) b->stamp[burst] = q, b->ready[burst] = 0;
    b->ready[burst]++;
  }
  return q;
}

void plait_bursts_record_list(plait_bursts_t *b, const plait_response_list_t *l) {
  uint32_t total = 0;
  for (uint32_t i = 0; i < l->n; i++) total += l->r[i].n;
  if (total > (uint32_t)b->list_cap) {
    int *p = realloc(b->list_ids, sizeof *p * total);
    if (!p) return;
    b->list_ids = p;
    b->list_cap = (int)total;
  }
  int k = 0;
  for (uint32_t i = 0; i < l->n; i++) {
    const plait_response_t *x = &l->r[i];
    if (x->coll != PLAIT_COLL_ALLREDUCE || x->status) continue;
    for (uint32_t j = 0; j < x->n; j++) {
      int id = x->e[j].cache_id >= 0 ? x->e[j].cache_id : x->e[j].assign_id;
      if (id >= 0) b->list_ids[k++] = id;
    }
  }
  plait_bursts_record(b, b->list_ids, k);
}

int plait_bursts_incomplete(plait_bursts_t *b, const int *ready, int n) {
  count_ready(b, ready, n);
  for (int i = 0; i < n; i++) {
    int id = ready[i];
    int burst = id >= 0 && id < b->cap ? b->of[id] : -1;
    if (burst >= 0 && b->ready[burst] < b->count[burst]) return 1;
  }
  return 0;
}

int plait_bursts_missing(plait_bursts_t *b, const int *ready, int n) {
  uint64_t q = count_ready(b, ready, n), done = ++b->queries; /* done: counted once */
  int missing = 0;
  for (int i = 0; i < n; i++) {
    int id = ready[i];
    int burst = id >= 0 && id < b->cap ? b->of[id] : -1;
    if (burst < 0 || b->stamp[burst] != q) continue;
    b->stamp[burst] = done;
    if (b->ready[burst] < b->count[burst]) missing += b->count[burst] - b->ready[burst];
  }
  return missing;
}
