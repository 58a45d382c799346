/*
 * Tests of the name map (src/engine/submit/namemap.c), the string -> pointer map
 * behind the negotiator's records, groups and tombstones, the cache's index,
 * the table's in-flight set and each rank's pending entries.
 *
 * The map is chained: a removal unlinks its node (no tombstone slots), so
 * what matters is that removals in the middle of long chains, across growth,
 * never lose or resurrect an entry. A random churn of puts, replaces and
 * removes (fixed seed, printed on failure) is checked against a plain array
 * after every step. (The negotiator's own tombstones, records of failed
 * operations, are tested in test_negotiate.c.)
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/submit/namemap.h"

#define SEED 0xA11CEu

static plait_namemap_t M;

static void start(void) { cr_assert_eq(plait_namemap_init(&M), 0); }
static void stop(void) { plait_namemap_free(&M); }

#define V(i) ((void *)(intptr_t)(i))

Test(namemap, put_get_replace_remove) {
  start();
  cr_assert_null(plait_namemap_get(&M, "a"));
  cr_assert_null(plait_namemap_remove(&M, "a"), "removing what is absent is harmless");
  cr_assert_eq(plait_namemap_put(&M, "a", V(1)), 0);
  cr_assert_eq(plait_namemap_put(&M, "", V(2)), 0);
  cr_assert_eq(M.count, 2);
  cr_assert_eq(plait_namemap_get(&M, "a"), V(1));
  cr_assert_eq(plait_namemap_get(&M, ""), V(2), "the empty name is a name");
  cr_assert_eq(plait_namemap_put(&M, "a", V(3)), 0);
  cr_assert_eq(M.count, 2, "a replace does not add");
  cr_assert_eq(plait_namemap_get(&M, "a"), V(3));
  cr_assert_eq(plait_namemap_remove(&M, "a"), V(3));
  cr_assert_null(plait_namemap_get(&M, "a"));
  cr_assert_eq(M.count, 1);
  cr_assert_null(plait_namemap_get(&M, "A"), "names are case-sensitive");
  stop();
}

Test(namemap, keys_are_copied) {
  start();
  char key[8] = "layer1";
  plait_namemap_put(&M, key, V(7));
  strcpy(key, "layer2");
  cr_assert_eq(plait_namemap_get(&M, "layer1"), V(7));
  cr_assert_null(plait_namemap_get(&M, "layer2"));
  stop();
}

typedef struct {
  int n, bad, cap;
  int *seen;
} visit_t;

static void visit(const char *key, void *value, void *arg) {
  visit_t *v = arg;
  int i = -1;
  if (sscanf(key, "t%d", &i) != 1 || i < 0 || i >= v->cap || (intptr_t)value != i + 1 ||
      v->seen[i]++)
    v->bad++;
  v->n++;
}

Test(namemap, grows_and_keeps_everything) {
  start();
  enum { K = 20000 };
  char key[32];
  for (int i = 0; i < K; i++) {
    snprintf(key, sizeof key, "t%d", i);
    cr_assert_eq(plait_namemap_put(&M, key, V(i + 1)), 0);
  }
  cr_assert_eq(M.count, K);
  cr_assert_geq(M.nbuckets, K, "grown to load <= 1: %zu buckets", M.nbuckets);
  for (int i = 0; i < K; i += 2) {
    snprintf(key, sizeof key, "t%d", i);
    cr_assert_eq(plait_namemap_remove(&M, key), V(i + 1));
  }
  for (int i = 0; i < K; i++) {
    snprintf(key, sizeof key, "t%d", i);
    cr_assert_eq(plait_namemap_get(&M, key), i % 2 ? V(i + 1) : NULL, "key %s", key);
  }
  visit_t v = {0, 0, K, calloc(K, sizeof(int))};
  plait_namemap_each(&M, visit, &v);
  cr_assert_eq(v.n, K / 2, "each visits every entry once: %d", v.n);
  cr_assert_eq(v.bad, 0);
  free(v.seen);
  stop();
}

static uint64_t rng;
static uint32_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

/* Random puts, replaces and removes on few keys (long chains before each
 * growth), checked against an array after every step. */
Test(namemap, random_churn_matches_a_reference) {
  enum { KEYS = 300, STEPS = 60000 };
  static intptr_t ref[KEYS]; /* 0: absent */
  memset(ref, 0, sizeof ref);
  rng = SEED;
  start();
  char key[32];
  size_t count = 0;
  for (int step = 0; step < STEPS; step++) {
    int k = (int)(next() % KEYS);
    snprintf(key, sizeof key, "grad/%d/w", k);
    if (next() % 3) {
      intptr_t v = 1 + next() % 1000;
      cr_assert_eq(plait_namemap_put(&M, key, V(v)), 0);
      count += !ref[k];
      ref[k] = v;
    } else {
      void *got = plait_namemap_remove(&M, key);
      cr_assert_eq(got, V(ref[k]), "seed %#x step %d: remove %s gave %p, want %p", SEED, step,
                   key, got, V(ref[k]));
      count -= !!ref[k];
      ref[k] = 0;
    }
    cr_assert_eq(M.count, count, "seed %#x step %d: count %zu, want %zu", SEED, step, M.count,
                 count);
    int probe = (int)(next() % KEYS);
    snprintf(key, sizeof key, "grad/%d/w", probe);
    cr_assert_eq(plait_namemap_get(&M, key), V(ref[probe]), "seed %#x step %d: get %s", SEED,
                 step, key);
  }
  for (int k = 0; k < KEYS; k++) {
    snprintf(key, sizeof key, "grad/%d/w", k);
    cr_assert_eq(plait_namemap_get(&M, key), V(ref[k]), "seed %#x: final get %s", SEED, key);
  }
  stop();
}

Test(namemap, free_is_harmless_twice_and_init_starts_empty) {
  start();
  plait_namemap_put(&M, "x", V(1));
  stop();
  stop();
  start();
  cr_assert_eq(M.count, 0);
  cr_assert_null(plait_namemap_get(&M, "x"));
  stop();
}
