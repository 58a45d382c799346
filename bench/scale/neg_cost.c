/*
 * Rank 0's negotiation work per cached operation under the control tree,
 * without processes: OPS one-float allreduces, each announced by rank 0 and
 * by one AND item per child of rank 0 in a tree of fan-out K over RANKS
 * ranks (what rank 0 reads with PLAIT_CONTROL_FANOUT=K and the AND), then
 * planned. MODE "cover" records each item once (plait_neg_add_cover, what
 * the coordinator does); "by-rank" records each covered rank with
 * plait_neg_add (what it did before). Run under callgrind twice with two
 * OPS and take the difference per operation (bench/scale/neg_cost.sh): an
 * instruction count, not moved by the machine's load.
 *
 *   neg_cost MODE RANKS OPS [K]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/negotiate/negotiate.h"
#include "util/clock.h"

static int add_subtree(plait_negotiator_t *n, int root, int k, const plait_meta_t *m) {
  for (long lo = root, hi = root; lo < n->size; lo = lo * k + 1, hi = hi * k + k)
    for (long r = lo; r <= hi && r < n->size; r++)
      if (plait_neg_add(n, (int)r, "g", m, 0, n->lists_sent)) return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4 || (strcmp(argv[1], "cover") && strcmp(argv[1], "by-rank"))) {
    fprintf(stderr, "usage: neg_cost cover|by-rank RANKS OPS [K]\n");
    return 2;
  }
  int cover = !strcmp(argv[1], "cover"), size = atoi(argv[2]), ops = atoi(argv[3]);
  int k = argc > 4 ? atoi(argv[4]) : 8;
  if (size < k + 2 || ops < 1 || k < 2) {
    fprintf(stderr, "neg_cost: RANKS must be at least K + 2 (a tree), OPS at least 1\n");
    return 2;
  }
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  plait_cache_t cache;
  plait_negotiator_t n;
  if (plait_cache_init(&cache, 16) || plait_neg_init(&n, size, &cfg, &cache)) return 1;
  plait_meta_t m;
  memset(&m, 0, sizeof m);
  m.coll = PLAIT_COLL_ALLREDUCE;
  m.dtype = PLAIT_FLOAT32;
  m.op = PLAIT_OP_SUM;
  m.device = -1;
  m.prescale = m.postscale = 1.0;
  m.ndim = 1;
  m.shape[0] = 1;
  for (int op = 0; op < ops; op++) {
    int rc = (int)plait_neg_add(&n, 0, "g", &m, 0, n.lists_sent);
    for (int c = 1; c <= k && !rc; c++)
      rc = cover ? (int)plait_neg_add_cover(&n, c, k, "g", &m, 0, n.lists_sent)
                 : add_subtree(&n, c, k, &m);
    plait_response_list_t l;
    int any = 0;
    if (rc || plait_neg_plan(&n, plait_now(), &l, &any) || !any || l.n != 1) {
      fprintf(stderr, "neg_cost: operation %d not released: %s\n", op, plait_last_error());
      return 1;
    }
    n.lists_sent++;
    plait_responses_free(&l);
  }
  printf("%s %d ranks, fan-out %d: %d operations, %llu record lookups\n", argv[1], size, k, ops,
         (unsigned long long)n.lookups);
  plait_neg_free(&n);
  plait_cache_free(&cache);
  return 0;
}
