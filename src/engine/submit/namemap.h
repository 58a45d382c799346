/* Internal: a map from strings (tensor names) to pointers. Not thread-safe. */
#ifndef PLAIT_NAMEMAP_H
#define PLAIT_NAMEMAP_H

#include <stddef.h>

typedef struct plait_namemap_node {
  char *key;
  void *value;
  struct plait_namemap_node *next;
} plait_namemap_node_t;

typedef struct plait_namemap {
  plait_namemap_node_t **buckets;
  size_t nbuckets, count;
} plait_namemap_t;

/* 0 on success, -1 out of memory. */
int plait_namemap_init(plait_namemap_t *m);
void plait_namemap_free(plait_namemap_t *m);
void *plait_namemap_get(const plait_namemap_t *m, const char *key);
/* Inserts or replaces; the key is copied. 0 ok, -1 out of memory. */
int plait_namemap_put(plait_namemap_t *m, const char *key, void *value);
/* Removes and returns the value (NULL if absent). */
void *plait_namemap_remove(plait_namemap_t *m, const char *key);
/* Calls fn for every entry (the map must not change meanwhile). */
void plait_namemap_each(const plait_namemap_t *m, void (*fn)(const char *key, void *value, void *arg),
                        void *arg);

#endif
