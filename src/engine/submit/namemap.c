/* A chained hash map from strings to pointers (FNV-1a), growing at load 1. */
#include "engine/submit/namemap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

int plait_namemap_init(plait_namemap_t *m) {
  m->nbuckets = 64;
  m->count = 0;
  m->buckets = calloc(m->nbuckets, sizeof *m->buckets);
  return m->buckets ? 0 : -1;
}

void plait_namemap_free(plait_namemap_t *m) {
  if (!m->buckets) return;
  for (size_t i = 0; i < m->nbuckets; i++) {
    plait_namemap_node_t *n = m->buckets[i];
    while (n) {
      plait_namemap_node_t *next = n->next;
      free(n); /* the key lives in the node's own block */
      n = next;
    }
  }
  free(m->buckets);
  m->buckets = NULL;
  m->count = 0;
}

static plait_namemap_node_t **slot(const plait_namemap_t *m, const char *key) {
  plait_namemap_node_t **p = &m->buckets[hash(key) & (m->nbuckets - 1)];
  while (*p && strcmp((*p)->key, key)) p = &(*p)->next;
  return p;
}

void *plait_namemap_get(const plait_namemap_t *m, const char *key) {
  plait_namemap_node_t *n = *slot(m, key);
  return n ? n->value : NULL;
}

static void grow(plait_namemap_t *m) {
  size_t nb = m->nbuckets * 2;
  plait_namemap_node_t **b = calloc(nb, sizeof *b);
  if (!b) return; /* stay at a higher load; still correct */
  for (size_t i = 0; i < m->nbuckets; i++) {
    plait_namemap_node_t *n = m->buckets[i];
    while (n) {
      plait_namemap_node_t *next = n->next;
      size_t j = hash(n->key) & (nb - 1);
      n->next = b[j];
      b[j] = n;
      n = next;
    }
  }
  free(m->buckets);
  m->buckets = b;
  m->nbuckets = nb;
}

int plait_namemap_put(plait_namemap_t *m, const char *key, void *value) {
  plait_namemap_node_t **p = slot(m, key);
  if (*p) {
    (*p)->value = value;
    return 0;
  }
  /* one allocation per name: the node with its key behind it (a 200-tensor
   * burst puts each name in two or three maps on every rank) */
  size_t len = strlen(key) + 1;
  plait_namemap_node_t *n = malloc(sizeof *n + len);
  if (!n) return -1;
  n->key = memcpy((char *)(n + 1), key, len);
  n->value = value;
  n->next = NULL;
  *p = n;
  if (++m->count > m->nbuckets) grow(m);
  return 0;
}

void *plait_namemap_remove(plait_namemap_t *m, const char *key) {
  plait_namemap_node_t **p = slot(m, key);
  plait_namemap_node_t *n = *p;
  if (!n) return NULL;
  void *v = n->value;
  *p = n->next;
  free(n);
  m->count--;
  return v;
}

void plait_namemap_each(const plait_namemap_t *m, void (*fn)(const char *, void *, void *),
                        void *arg) {
  for (size_t i = 0; i < m->nbuckets; i++)
    for (plait_namemap_node_t *n = m->buckets[i]; n; n = n->next) fn(n->key, n->value, arg);
}
