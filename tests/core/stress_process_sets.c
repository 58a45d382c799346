/*
 * Process sets added and removed while other threads run operations and
 * query the sets, without Criterion (which cannot start under
 * ThreadSanitizer): ci/test can run it in the TSan build, where the table of
 * sets written by the coordinator thread while API threads read it would be
 * reported as a data race.
 *
 * 3 ranks, PLAIT_DYNAMIC_PROCESS_SETS=1. The main thread of every rank adds
 * the set {1, 2}, lets the members run allreduces on it from two threads,
 * then removes it, ROUNDS times; meanwhile one thread per rank runs global
 * allreduces and one keeps querying the sets (ids, size, rank, ranks).
 * Results are checked. Prints "N passed, M failed" last.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "plait/plait.h"
#include "ranks.h"

enum { RANKS = 3, ROUNDS = 15, PER_ROUND = 20, GLOBAL_OPS = 60 };

static atomic_int stop;
static atomic_int current_set; /* the id in use this round, 0 between rounds */

typedef struct {
  int rank, thread, errors;
} worker_t;

static int reduce(const char *name, int32_t set, int rank, float want_sum_of_ranks) {
  float v[3] = {(float)rank, (float)rank, (float)rank};
  plait_tensor_t t;
  plait_tensor_1d(&t, v, 3, PLAIT_FLOAT32);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.process_set = set;
  plait_handle_t *h;
  plait_result_t rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, &o, &h);
  if (rc == PLAIT_SUCCESS) {
    rc = plait_wait(h, 120);
    plait_release(h);
  }
  if (rc) {
    fprintf(stderr, "rank %d: %s on set %d: %s: %s\n", rank, name, (int)set,
            plait_result_name(rc), plait_last_error());
    return 1;
  }
  if (v[2] != want_sum_of_ranks) {
    fprintf(stderr, "rank %d: %s on set %d: %g, expected %g\n", rank, name, (int)set, v[2],
            want_sum_of_ranks);
    return 1;
  }
  return 0;
}

/* Global allreduces, as many on every rank, interleaved with the rounds. */
static void *global_work(void *arg) {
  worker_t *w = arg;
  for (int i = 0; i < GLOBAL_OPS && !w->errors; i++) {
    char name[64];
    snprintf(name, sizeof name, "g.%d", i);
    w->errors += reduce(name, 0, w->rank, 0 + 1 + 2);
  }
  return NULL;
}

/* Queries of every kind, racing the coordinator's adds and removes. */
static void *query(void *arg) {
  worker_t *w = arg;
  while (!atomic_load(&stop)) {
    int32_t ids[8];
    int n = 0, size = 0, me = 0, ranks[4];
    plait_result_t rc = plait_process_set_ids(ids, 8, &n);
    if (rc || n < 1 || ids[0] != 0) w->errors++;
    int32_t id = atomic_load(&current_set);
    if (id) { /* may be removed meanwhile: then INVALID_ARGUMENT, never a crash */
      plait_result_t a = plait_process_set_size(id, &size);
      plait_result_t b = plait_process_set_rank(id, &me);
      plait_result_t c = plait_process_set_ranks(id, ranks, 4, &n);
      if ((a && a != PLAIT_ERR_INVALID_ARGUMENT) || (b && b != PLAIT_ERR_INVALID_ARGUMENT) ||
          (c && c != PLAIT_ERR_INVALID_ARGUMENT) || (!a && size != 2))
        w->errors++;
    }
  }
  return NULL;
}

typedef struct {
  int rank, base, errors;
  int32_t set;
} member_t;

static void *member_work(void *arg) {
  member_t *m = arg;
  for (int i = 0; i < PER_ROUND && !m->errors; i++) {
    char name[64];
    snprintf(name, sizeof name, "s.%d.%d", m->base, i);
    m->errors += reduce(name, m->set, m->rank, 1 + 2);
  }
  return NULL;
}

static int rounds(int rank) {
  int errors = 0, set_ranks[2] = {1, 2};
  for (int r = 0; r < ROUNDS && !errors; r++) {
    int32_t id = -1;
    plait_result_t rc = plait_process_set_add(set_ranks, 2, &id);
    if (rc) {
      fprintf(stderr, "rank %d: add: %s\n", rank, plait_last_error());
      return 1;
    }
    atomic_store(&current_set, id);
    if (rank != 0) {
      pthread_t th[2];
      member_t m[2] = {{rank, 2 * r, 0, id}, {rank, 2 * r + 1, 0, id}};
      for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, member_work, &m[i]);
      for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        errors += m[i].errors;
      }
    }
    /* the members' operations are all done before either removes */
    plait_handle_t *h;
    plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
    if (plait_barrier_async(&o, &h) || plait_wait(h, 120)) errors++;
    plait_release(h);
    atomic_store(&current_set, 0);
    if (plait_process_set_remove(id)) {
      fprintf(stderr, "rank %d: remove: %s\n", rank, plait_last_error());
      errors++;
    }
  }
  return errors;
}

static int rank_main(int rank, int size, void *arg) {
  (void)arg, (void)size;
  if (plait_init() != PLAIT_SUCCESS) {
    fprintf(stderr, "rank %d: init: %s\n", rank, plait_last_error());
    return 1;
  }
  pthread_t g, q;
  worker_t gw = {rank, 0, 0}, qw = {rank, 1, 0};
  pthread_create(&q, NULL, query, &qw);
  pthread_create(&g, NULL, global_work, &gw);
  int errors = rounds(rank);
  pthread_join(g, NULL);
  atomic_store(&stop, 1);
  pthread_join(q, NULL);
  errors += gw.errors + qw.errors;
  if (plait_shutdown() != PLAIT_SUCCESS) errors++;
  return errors ? 1 : 0;
}

int main(void) {
  const char *env[] = {"PLAIT_DYNAMIC_PROCESS_SETS=1", NULL};
  plait_test_job_t job = {.nranks = RANKS, .timeout_s = 300, .env = env};
  int failed = plait_test_run_ranks(&job, rank_main, NULL);
  int passed = 0;
  for (int r = 0; r < RANKS; r++) passed += job.exit_code[r] == 0;
  printf("stress_process_sets: %d ranks, %d rounds of add / use from 2 threads / remove, with "
         "global operations and queries meanwhile\n", RANKS, ROUNDS);
  printf("%d passed, %d failed\n", passed, RANKS - passed);
  return failed;
}
