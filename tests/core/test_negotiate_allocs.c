/*
 * Allocations rank 0's negotiation makes per record in a steady-state burst
 * (issue 37, goal 2): 200 cached allreduces announced by every rank, one
 * tick, the response list freed. Counted with the linker's --wrap on
 * malloc, calloc, realloc and strdup (tests/CMakeLists.txt), so only calls
 * made by plait's own objects count, as they would in the library.
 *
 * Per record: its node in the records map (key inside the node), the record
 * (with its per-rank metadata, presence and membership in one block) and its
 * name (handed to the response); the tick's own allocations are per burst.
 * Until 2026-12-06 a record took seven (node and key apart, the record, its
 * metadata, presence and membership arrays, its name): plait-bench's 200 x
 * 64 KiB step made 14.1 allocations per tensor on rank 0 then, 8.1 after.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "meta_util.h"
#include "util/clock.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);

static int counting;
static long allocs;

void *__wrap_malloc(size_t n) {
  allocs += counting;
  return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t s) {
  allocs += counting;
  return __real_calloc(n, s);
}
void *__wrap_realloc(void *p, size_t n) {
  allocs += counting;
  return __real_realloc(p, n);
}
char *__wrap_strdup(const char *s) {
  allocs += counting;
  return __real_strdup(s);
}

#define BURST 200

/* Every rank announces the burst (by cache id once known); one tick. */
static int burst(plait_negotiator_t *n, const int *ids) {
  plait_meta_t m = f32(16384);
  char name[32];
  for (int r = 0; r < n->size; r++)
    for (int i = 0; i < BURST; i++) {
      snprintf(name, sizeof name, "grad.%d", i);
      cr_assert_eq(plait_neg_add(n, r, name, &m, ids ? ids[i] : -1, n->lists_sent),
                   PLAIT_SUCCESS, "%s", plait_last_error());
    }
  plait_response_list_t l;
  int any = 0;
  cr_assert_eq(plait_neg_plan(n, plait_now(), &l, &any), PLAIT_SUCCESS, "%s",
               plait_last_error());
  n->lists_sent++;
  int tensors = 0;
  for (uint32_t i = 0; i < l.n; i++) tensors += (int)l.r[i].n;
  plait_responses_free(&l);
  return tensors;
}

static void per_record(int size, double most) {
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.fusion_threshold = 64 << 20;
  plait_cache_t cache;
  plait_negotiator_t n;
  cr_assert_eq(plait_cache_init(&cache, 1024), PLAIT_SUCCESS);
  cr_assert_eq(plait_neg_init(&n, size, &cfg, &cache), PLAIT_SUCCESS);
  cr_assert_eq(burst(&n, NULL), BURST, "the first burst goes by name");
  int ids[BURST];
  plait_meta_t m = f32(16384);
  char name[32];
  for (int i = 0; i < BURST; i++) {
    snprintf(name, sizeof name, "grad.%d", i);
    ids[i] = plait_cache_lookup(&cache, name, &m);
    cr_assert_geq(ids[i], 0, "'%s' was given a cache id", name);
  }
  burst(&n, ids); /* the records map has grown to the burst */
  allocs = 0;
  counting = 1;
  int tensors = burst(&n, ids);
  counting = 0;
  cr_assert_eq(tensors, BURST);
  double each = (double)allocs / BURST;
  cr_assert_leq(each, most, "%d ranks: %.2f allocations per record (%ld for %d), at most %g",
                size, each, allocs, BURST, most);
  plait_neg_free(&n);
  plait_cache_free(&cache);
}

Test(negotiate_allocs, three_per_record_at_2_ranks) { per_record(2, 3.1); }
Test(negotiate_allocs, three_per_record_at_64_ranks) { per_record(64, 3.1); }
