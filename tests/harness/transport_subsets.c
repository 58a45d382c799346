/* tm_subsets: the plugin's subset() entry (transport.h), called directly. */
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "transport_matrix.h"

#define SAY_FAIL(c, ...)                                                       \
  do {                                                                         \
    plait_test_say((c)->rank, __VA_ARGS__);                                    \
    return 1;                                                                  \
  } while (0)

/* Makes the subset of ranks[] (collective); *sub is its context on a member
 * (st NULL elsewhere). */
static int make(tm_ctx_t *c, const int *ranks, int n, tm_ctx_t *sub) {
  void *st = (void *)0x1;
  plait_result_t rc = c->t->subset(c->st, ranks, n, &st);
  if (rc) SAY_FAIL(c, "subset of %d ranks: %s: %s", n, plait_result_name(rc),
                   c->t->last_error(c->st));
  memset(sub, 0, sizeof *sub);
  sub->t = c->t;
  sub->st = st;
  sub->rank = -1;
  for (int i = 0; i < n; i++)
    if (ranks[i] == c->rank) sub->rank = i;
  sub->nranks = n;
  if ((sub->rank >= 0) != (st != NULL))
    SAY_FAIL(c, "subset: member %d but state %p", sub->rank >= 0, st);
  return 0;
}

/* Argument errors: nothing communicated, the parent still works. */
static int bad_arguments(tm_ctx_t *c) {
  const int unsorted[] = {1, 0}, outside[] = {0, 99}, twice[] = {0, 0};
  const int *bad[] = {unsorted, outside, twice, NULL};
  const char *what[] = {"unsorted", "outside", "twice", "NULL"};
  for (int i = 0; i < 4; i++) {
    void *st = (void *)0x1;
    plait_result_t rc = c->t->subset(c->st, bad[i], 2, &st);
    if (rc != PLAIT_ERR_INVALID_ARGUMENT)
      SAY_FAIL(c, "subset(%s ranks) returned %s, not PLAIT_ERR_INVALID_ARGUMENT", what[i],
               plait_result_name(rc));
    if (!strstr(c->t->last_error(c->st), "ranks"))
      SAY_FAIL(c, "subset(%s ranks): the message does not name ranks: %s", what[i],
               c->t->last_error(c->st));
  }
  void *st = NULL;
  const int all[] = {0};
  if (c->t->subset(c->st, all, 0, &st) != PLAIT_ERR_INVALID_ARGUMENT)
    SAY_FAIL(c, "subset of 0 ranks was accepted");
  return tm_allreduce_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 1001);
}

/* One round of traffic on the job and on each subset this rank is in, in
 * the same order everywhere: a rank outside a subset goes straight on to
 * the next collective on the job while the members are still busy. */
static int traffic(tm_ctx_t *c, tm_ctx_t *subs, int nsubs, size_t count) {
  if (tm_allreduce_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, count)) return 1;
  for (int i = 0; i < nsubs; i++) {
    tm_ctx_t *s = &subs[i];
    if (!s->st) continue;
    if (tm_allreduce_one(s, PLAIT_INT32, PLAIT_OP_SUM, count)) return 1;
    if (tm_allreduce_one(s, PLAIT_FLOAT64, PLAIT_OP_MAX, count / 2 + 1)) return 1;
    if (tm_barrier(s)) return 1;
  }
  return tm_allreduce_one(c, PLAIT_INT64, PLAIT_OP_MIN, count);
}

int tm_subsets(tm_ctx_t *c) {
  if (!PLAIT_TRANSPORT_HAS(c->t, subset))
    SAY_FAIL(c, "transport '%s' has no subset entry", c->t->name);
  if (bad_arguments(c)) return 1;
  int n = c->nranks, last = n - 1;
  /* overlapping (a, b share rank 1), and disjoint from a (c: the last two) */
  int a[] = {0, 1}, b[16], cc[] = {last - 1, last}, whole[16];
  int nb = 0;
  for (int r = 1; r < n; r++) b[nb++] = r;
  for (int r = 0; r < n; r++) whole[r] = r;
  tm_ctx_t subs[4];
  if (make(c, a, 2, &subs[0]) || make(c, b, nb, &subs[1]) || make(c, cc, 2, &subs[2]) ||
      make(c, whole, n, &subs[3]))
    return 1;
  const size_t counts[] = {1, 1001, 262144};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
    if (traffic(c, subs, 4, counts[k])) return 1;
  for (int i = 0; i < 4; i++)
    if (subs[i].st && (tm_broadcast(&subs[i]) || tm_allgatherv(&subs[i]) ||
                       tm_alltoallv(&subs[i]) || tm_reducescatter(&subs[i])))
      return 1;
  /* a subset of a subset */
  tm_ctx_t inner = {0};
  if (nb >= 2 && subs[1].st) {
    const int first_two[] = {0, 1};
    if (make(&subs[1], first_two, 2, &inner)) return 1;
    if (inner.st && tm_allreduce_one(&inner, PLAIT_FLOAT32, PLAIT_OP_SUM, 4097)) return 1;
    if (inner.st) c->t->finalize(inner.st);
  }
  for (int i = 0; i < 4; i++)
    if (subs[i].st) c->t->finalize(subs[i].st);
  /* the job's own state is untouched by its subsets coming and going */
  return tm_allreduce(c);
}
