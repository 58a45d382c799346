/*
 * chaos_worker: one rank of a ci/chaos trial, in C.
 *
 * Started by hand by tests/faults/chaos/chaos.py (PLAIT_RANK, PLAIT_SIZE,
 * PLAIT_RENDEZVOUS, PLAIT_SECRET set as plaitrun would), so that when the
 * harness kills or stops one rank the survivors decide for themselves.
 *
 * The workload is a seeded sequence (CHAOS_SEED; the same on every rank) of
 * small allreduce bursts (fused), 16 MiB allreduces, broadcasts from a
 * random root and allgathers, each result checked. It runs until an
 * operation fails (the expected end: a peer was lost) or CHAOS_MAX_S.
 *
 * Output on stdout, one line each:
 *   ready <CLOCK_MONOTONIC seconds>            after plait_init
 *   {"rank":..,"result":..,"error":..,"t_err":..,"iters":..}   the failure
 *   shutdown <result name> <seconds>            after plait_shutdown
 * Exit status: 0 an operation failed and the failure was reported; 1
 * plait_init failed; 2 a result was wrong; 3 no failure within CHAOS_MAX_S.
 */
#define _GNU_SOURCE
#include <plait/plait.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BIG (4 * 1024 * 1024) /* float32 elements: 16 MiB */
#define SMALL_MAX 256
#define BURST_MAX 4
#define WAIT_S 600.0 /* plait must fail first; the harness judges hangs */

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: the same sequence as worker.py's */
static uint64_t next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

typedef struct {
  int rank, size;
  float *big;
  float small[BURST_MAX][SMALL_MAX];
  int32_t gathered[64];
  long iters;
  int wrong;
} worker_t;

/* One step of the workload; returns the first failure. */
static plait_result_t step(worker_t *w, uint64_t *seed) {
  uint64_t pick = next(seed) % 100;
  plait_tensor_t t;
  plait_handle_t *h[BURST_MAX] = {0};
  plait_result_t rc = PLAIT_SUCCESS;
  float sum = (float)w->size * (float)(w->size + 1) / 2;
  if (pick < 70) { /* a burst of small allreduces, fused */
    int n = 1 + (int)(next(seed) % BURST_MAX);
    for (int k = 0; k < n && rc == PLAIT_SUCCESS; k++) {
      size_t count = 1 + next(seed) % SMALL_MAX;
      char name[32];
      snprintf(name, sizeof name, "small.%d.%zu", k, count % 8);
      for (size_t i = 0; i < count; i++) w->small[k][i] = (float)(w->rank + 1);
      plait_tensor_1d(&t, w->small[k], count, PLAIT_FLOAT32);
      rc = plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[k]);
    }
    for (int k = 0; k < n; k++) {
      if (!h[k]) continue;
      plait_result_t r = plait_wait(h[k], WAIT_S);
      if (rc == PLAIT_SUCCESS) rc = r;
      if (r == PLAIT_SUCCESS && w->small[k][0] != sum) w->wrong = 1;
      plait_release(h[k]);
    }
  } else if (pick < 85) { /* a large allreduce */
    w->big[0] = w->big[BIG - 1] = (float)(w->rank + 1);
    plait_tensor_1d(&t, w->big, BIG, PLAIT_FLOAT32);
    rc = plait_allreduce_async("big", &t, &t, PLAIT_OP_SUM, NULL, &h[0]);
    if (rc == PLAIT_SUCCESS) rc = plait_wait(h[0], WAIT_S);
    if (rc == PLAIT_SUCCESS && (w->big[0] != sum || w->big[BIG - 1] != sum)) w->wrong = 1;
  } else if (pick < 95) { /* a broadcast from a random root */
    int root = (int)(next(seed) % (uint64_t)w->size);
    for (int i = 0; i < 64; i++) w->small[0][i] = (float)(w->rank == root ? root + 7 : -1);
    plait_tensor_1d(&t, w->small[0], 64, PLAIT_FLOAT32);
    rc = plait_broadcast_async("bcast", &t, root, NULL, &h[0]);
    if (rc == PLAIT_SUCCESS) rc = plait_wait(h[0], WAIT_S);
    if (rc == PLAIT_SUCCESS && w->small[0][63] != (float)(root + 7)) w->wrong = 1;
  } else { /* an allgather of one row per rank */
    int32_t mine = w->rank;
    plait_tensor_1d(&t, &mine, 1, PLAIT_INT32);
    rc = plait_allgather_async("gather", &t, NULL, &h[0]);
    if (rc == PLAIT_SUCCESS) rc = plait_wait(h[0], WAIT_S);
    plait_tensor_t out;
    if (rc == PLAIT_SUCCESS && plait_handle_output(h[0], &out) == PLAIT_SUCCESS) {
      const int32_t *rows = out.data;
      for (int r = 0; r < w->size && r < 64; r++)
        if (out.shape[0] != w->size || rows[r] != r) w->wrong = 1;
    }
  }
  if (pick >= 70 && h[0]) plait_release(h[0]);
  return rc;
}

int main(void) {
  const char *s = getenv("CHAOS_SEED"), *m = getenv("CHAOS_MAX_S");
  uint64_t seed = s ? strtoull(s, NULL, 10) : 1;
  double max_s = m ? atof(m) : 120;
  static worker_t w;
  if (!(w.big = calloc(BIG, sizeof *w.big))) return 1;
  plait_result_t rc = plait_init();
  if (rc != PLAIT_SUCCESS) {
    printf("init-failed %s ", plait_result_name(rc));
    json_string(plait_last_error());
    printf("\n");
    return 1;
  }
  plait_rank(&w.rank);
  plait_size(&w.size);
  printf("ready %.6f\n", mono());
  fflush(stdout);
  double end = mono() + max_s;
  while (rc == PLAIT_SUCCESS && !w.wrong && mono() < end) {
    rc = step(&w, &seed);
    w.iters++;
  }
  double t_err = mono();
  printf("{\"rank\":%d,\"result\":\"%s\",\"error\":", w.rank, plait_result_name(rc));
  json_string(rc ? plait_last_error() : "");
  printf(",\"t_err\":%.6f,\"iters\":%ld,\"wrong\":%d}\n", t_err, w.iters, w.wrong);
  fflush(stdout);
  double t0 = mono();
  plait_result_t sd = plait_shutdown();
  printf("shutdown %s %.3f\n", plait_result_name(sd), mono() - t0);
  fflush(stdout);
  free(w.big);
  return w.wrong ? 2 : rc == PLAIT_SUCCESS ? 3 : 0;
}
