/* An engine's process sets: the table, its queries, and what adding
 * and removing a set do on every rank. */
#include "engine/transport/process_set.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"

struct plait_psets {
  pthread_mutex_t mu;
  uint64_t calls; /* add/remove calls made on this rank */
  int running;
  int rank, size, dynamic;
  const plait_transport_t *t;
  plait_pset_t **sets; /* by id; NULL where free */
  int cap;
};

static void free_set(plait_psets_t *P, plait_pset_t *s) {
  if (!s) return;
  if (s->id != 0 && s->ts) {
    if (s->fusion) P->t->mem_free(s->ts, s->fusion);
    if (P->t->finalize(s->ts))
      PLAIT_WARN("pset", "transport '%s' finalize of process set %d: %s", P->t->name, s->id,
                 P->t->last_error(NULL));
  }
  free(s->ranks);
  free(s);
}

plait_psets_t *plait_psets_create(int rank, int size, const plait_transport_t *t, void *ts,
                                  int dynamic) {
  plait_psets_t *P = calloc(1, sizeof *P);
  plait_pset_t *g = calloc(1, sizeof *g);
  int *ranks = calloc((size_t)size, sizeof *ranks);
  plait_pset_t **sets = calloc(8, sizeof *sets);
  if (!P || !g || !ranks || !sets || pthread_mutex_init(&P->mu, NULL)) {
    free(P), free(g), free(ranks), free(sets);
    plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for the process sets");
    return NULL;
  }
  for (int r = 0; r < size; r++) ranks[r] = r;
  g->n = size;
  g->ranks = ranks;
  g->index = rank;
  g->ts = ts;
  sets[0] = g;
  P->sets = sets;
  P->cap = 8;
  P->rank = rank;
  P->size = size;
  P->dynamic = dynamic;
  P->t = t;
  P->running = 1;
  return P;
}

void plait_psets_destroy(plait_psets_t *P) {
  if (!P) return;
  for (int i = P->cap - 1; i >= 0; i--) free_set(P, P->sets[i]); /* sub-states before the job's */
  free(P->sets);
  pthread_mutex_destroy(&P->mu);
  free(P);
}

uint64_t plait_psets_next_call(plait_psets_t *P) {
  pthread_mutex_lock(&P->mu);
  uint64_t k = P->calls++;
  pthread_mutex_unlock(&P->mu);
  return k;
}

const plait_transport_t *plait_psets_transport(plait_psets_t *P) {
  pthread_mutex_lock(&P->mu);
  const plait_transport_t *t = P->running ? P->t : NULL;
  pthread_mutex_unlock(&P->mu);
  return t;
}

int plait_psets_dynamic(plait_psets_t *P) {
  pthread_mutex_lock(&P->mu);
  int d = P->running && P->dynamic;
  pthread_mutex_unlock(&P->mu);
  return d;
}

static const plait_pset_t *find_locked(plait_psets_t *P, int32_t id) {
  return id >= 0 && id < P->cap ? P->sets[id] : NULL;
}

static void ranks_text(char *buf, size_t cap, const plait_pset_t *s) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < s->n && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%d", i ? ", " : "", s->ranks[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

plait_result_t plait_psets_check_member(plait_psets_t *P, const char *fn, int32_t id, int *n) {
  pthread_mutex_lock(&P->mu);
  plait_result_t rc = PLAIT_SUCCESS;
  const plait_pset_t *s = find_locked(P, id);
  if (!P->running) {
    rc = plait_error(PLAIT_ERR_NOT_INITIALIZED, "%s: plait is not initialized (call plait_init "
                     "first)", fn);
  } else if (!s) {
    rc = plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: process set %d does not exist (never "
                     "added, or removed)", fn, (int)id);
  } else if (s->index < 0) {
    char who[512];
    ranks_text(who, sizeof who, s);
    rc = plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: rank %d is not a member of process set %d "
                     "(ranks %s)", fn, P->rank, (int)id, who);
  } else if (n) {
    *n = s->n;
  }
  pthread_mutex_unlock(&P->mu);
  return rc;
}

int plait_psets_contains(plait_psets_t *P, int32_t id, int rank) {
  pthread_mutex_lock(&P->mu);
  const plait_pset_t *s = find_locked(P, id);
  int in = s ? 0 : -1;
  for (int i = 0; s && i < s->n && !in; i++) in = s->ranks[i] == rank;
  pthread_mutex_unlock(&P->mu);
  return in;
}

plait_result_t plait_psets_query(plait_psets_t *P, const char *fn, int32_t id, int *n, int *index,
                                 int *ranks, int cap) {
  pthread_mutex_lock(&P->mu);
  plait_result_t rc = PLAIT_SUCCESS;
  const plait_pset_t *s = find_locked(P, id);
  if (!P->running)
    rc = plait_error(PLAIT_ERR_NOT_INITIALIZED, "%s: plait is not initialized (call plait_init "
                     "first)", fn);
  else if (!s)
    rc = plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: process set %d does not exist (never "
                     "added, or removed)", fn, (int)id);
  if (rc == PLAIT_SUCCESS) {
    if (n) *n = s->n;
    if (index) *index = s->index;
    for (int i = 0; ranks && i < s->n && i < cap; i++) ranks[i] = s->ranks[i];
  }
  pthread_mutex_unlock(&P->mu);
  return rc;
}

int32_t plait_psets_find(plait_psets_t *P, const int64_t *ranks, int n) {
  pthread_mutex_lock(&P->mu);
  int32_t found = -1;
  for (int i = 0; i < P->cap && found < 0; i++) {
    const plait_pset_t *s = P->sets[i];
    int same = s && s->n == n;
    for (int k = 0; same && k < n; k++) same = s->ranks[k] == ranks[k];
    if (same) found = i;
  }
  pthread_mutex_unlock(&P->mu);
  return found;
}

void plait_psets_ids(plait_psets_t *P, int32_t *ids, int cap, int *count) {
  pthread_mutex_lock(&P->mu);
  int k = 0;
  for (int i = 0; i < P->cap; i++)
    if (P->sets[i]) {
      if (ids && k < cap) ids[k] = i;
      k++;
    }
  *count = k;
  pthread_mutex_unlock(&P->mu);
}

uint64_t plait_psets_next_barrier(plait_psets_t *P, int32_t id) {
  pthread_mutex_lock(&P->mu);
  plait_pset_t *s = id >= 0 && id < P->cap ? P->sets[id] : NULL;
  uint64_t k = s ? s->barriers++ : 0;
  pthread_mutex_unlock(&P->mu);
  return k;
}

plait_pset_t *plait_psets_get(plait_psets_t *P, int32_t id) {
  return id >= 0 && id < P->cap ? P->sets[id] : NULL; /* the writer's own thread: no lock */
}

/* The lowest free id, growing the table when every slot is taken. */
static int free_id_locked(plait_psets_t *P) {
  for (int i = 1; i < P->cap; i++)
    if (!P->sets[i]) return i;
  plait_pset_t **p = realloc(P->sets, sizeof *p * (size_t)P->cap * 2);
  if (!p) return -1;
  memset(p + P->cap, 0, sizeof *p * (size_t)P->cap);
  P->sets = p;
  P->cap *= 2;
  return P->cap / 2;
}

plait_result_t plait_psets_apply_add(plait_psets_t *P, const int64_t *ranks, int n, int32_t *id) {
  plait_pset_t *s = calloc(1, sizeof *s);
  int *rs = calloc((size_t)(n ? n : 1), sizeof *rs);
  if (!s || !rs) {
    free(s), free(rs);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory adding a process set");
  }
  s->n = n;
  s->ranks = rs;
  s->index = -1;
  for (int i = 0; i < n; i++) {
    rs[i] = (int)ranks[i];
    if (rs[i] == P->rank) s->index = i;
  }
  if (!PLAIT_TRANSPORT_HAS(P->t, subset)) { /* the API refuses first; never reached */
    free_set(P, s);
    return plait_error(PLAIT_ERR_UNSUPPORTED, "transport '%s' has no sub-communicators",
                       P->t->name);
  }
  /* Every rank runs this in the same order: a collective over the job. */
  void *sub = NULL;
  plait_result_t rc = P->t->subset(P->sets[0]->ts, rs, n, &sub);
  if (rc) {
    const char *msg = P->t->last_error(P->sets[0]->ts);
    free_set(P, s);
    return plait_error(rc, "adding a process set of %d ranks failed in transport '%s': %s", n,
                       P->t->name, msg && *msg ? msg : plait_strerror(rc));
  }
  s->ts = sub;
  pthread_mutex_lock(&P->mu);
  int got = free_id_locked(P);
  if (got > 0) {
    s->id = got;
    P->sets[got] = s;
  }
  pthread_mutex_unlock(&P->mu);
  if (got <= 0) {
    free_set(P, s);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory adding a process set");
  }
  *id = got;
  PLAIT_DEBUG("pset", "process set %d added: %d ranks, this rank is %s", got, n,
              s->index >= 0 ? "a member" : "not a member");
  return PLAIT_SUCCESS;
}

plait_result_t plait_psets_apply_remove(plait_psets_t *P, int32_t id) {
  pthread_mutex_lock(&P->mu);
  plait_pset_t *s = id > 0 && id < P->cap ? P->sets[id] : NULL;
  if (s) P->sets[id] = NULL;
  pthread_mutex_unlock(&P->mu);
  if (!s) return plait_error(PLAIT_ERR_PROTOCOL, "rank 0 removed process set %d, which does not "
                             "exist here", (int)id);
  free_set(P, s);
  PLAIT_DEBUG("pset", "process set %d removed", (int)id);
  return PLAIT_SUCCESS;
}
