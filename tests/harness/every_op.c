/*
 * Every operation of the C ABI, a few rounds, results checked: allreduce
 * (average with prescale and postscale), grouped allreduce, allgather with a
 * variable first dimension, broadcast, alltoall with splits, reducescatter,
 * barrier, a mismatch that fails on every rank, and join. Part of
 * stress_threads, so the leak check with no suppression (ASan build) and the
 * race check (TSan build) see every operation's paths, not only allreduce's.
 */
#include "every_op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait/plait.h"

#define ROUNDS 3

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "rank %d: every_op: ", rank);                            \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, " (%s)\n", plait_last_error());                          \
      return 1;                                                                \
    }                                                                          \
  } while (0)

static plait_tensor_t rows(float *data, int64_t nrows, int64_t width) {
  plait_tensor_t t;
  plait_tensor_1d(&t, data, (size_t)(nrows * width), PLAIT_FLOAT32);
  t.ndim = 2;
  t.shape[0] = nrows;
  t.shape[1] = width;
  return t;
}

static int wait_ok(int rank, plait_handle_t *h, const char *what) {
  plait_result_t rc = plait_wait(h, 120);
  CHECK(rc == PLAIT_SUCCESS, "%s: %s", what, plait_result_name(rc));
  return 0;
}

static int allreduce_scaled(int rank, int size, int k) {
  float x[33];
  for (int i = 0; i < 33; i++) x[i] = (float)(rank + 1);
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 33, PLAIT_FLOAT32);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.prescale_factor = 2.0;
  o.postscale_factor = 0.5;
  char name[32];
  snprintf(name, sizeof name, "eo.avg.%d", k);
  plait_handle_t *h = NULL;
  CHECK(plait_allreduce_async(name, &t, &t, PLAIT_OP_AVERAGE, &o, &h) == PLAIT_SUCCESS, "%s", name);
  int bad = wait_ok(rank, h, name);
  plait_release(h);
  if (bad) return 1;
  float want = (float)(size + 1) / 2.0f;
  for (int i = 0; i < 33; i++) CHECK(x[i] == want, "%s[%d] = %g, expected %g", name, i, x[i], want);
  return 0;
}

static int grouped(int rank, int size, int k) {
  static const int counts[3] = {5, 7, 9};
  float a[5], b[7], c[9];
  float *bufs[3] = {a, b, c};
  plait_tensor_t ts[3];
  char names[3][32];
  const char *np[3];
  for (int j = 0; j < 3; j++) {
    for (int i = 0; i < counts[j]; i++) bufs[j][i] = (float)rank;
    plait_tensor_1d(&ts[j], bufs[j], (size_t)counts[j], PLAIT_FLOAT32);
    snprintf(names[j], sizeof names[j], "eo.group%d.%d", j, k);
    np[j] = names[j];
  }
  plait_handle_t *h = NULL;
  CHECK(plait_grouped_allreduce_async(3, np, ts, ts, PLAIT_OP_SUM, NULL, &h) == PLAIT_SUCCESS,
        "grouped allreduce");
  int bad = wait_ok(rank, h, "grouped allreduce");
  plait_release(h);
  if (bad) return 1;
  float want = (float)(size * (size - 1) / 2);
  for (int j = 0; j < 3; j++)
    for (int i = 0; i < counts[j]; i++)
      CHECK(bufs[j][i] == want, "group member %d[%d] = %g, expected %g", j, i, bufs[j][i], want);
  return 0;
}

/* rank r gives r + 1 rows of 2, valued r */
static int allgather(int rank, int size, int k) {
  float x[2 * 16];
  for (int i = 0; i < 2 * (rank + 1); i++) x[i] = (float)rank;
  plait_tensor_t t = rows(x, rank + 1, 2);
  char name[32];
  snprintf(name, sizeof name, "eo.gather.%d", k);
  plait_handle_t *h = NULL;
  CHECK(plait_allgather_async(name, &t, NULL, &h) == PLAIT_SUCCESS, "%s", name);
  if (wait_ok(rank, h, name)) return plait_release(h), 1;
  plait_tensor_t out;
  plait_result_t rc = plait_handle_output(h, &out);
  int bad = rc != PLAIT_SUCCESS || out.shape[0] != size * (size + 1) / 2 || out.shape[1] != 2;
  for (int r = 0, row = 0; !bad && r < size; r++)
    for (int i = 0; i <= r; i++, row++)
      bad |= ((float *)out.data)[2 * row] != (float)r || ((float *)out.data)[2 * row + 1] != (float)r;
  plait_release(h);
  CHECK(!bad, "%s: wrong output", name);
  return 0;
}

static int broadcast(int rank, int size, int k) {
  float x[17];
  for (int i = 0; i < 17; i++) x[i] = (float)rank;
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 17, PLAIT_FLOAT32);
  char name[32];
  snprintf(name, sizeof name, "eo.bcast.%d", k);
  plait_handle_t *h = NULL;
  CHECK(plait_broadcast_async(name, &t, size - 1, NULL, &h) == PLAIT_SUCCESS, "%s", name);
  int bad = wait_ok(rank, h, name);
  plait_release(h);
  if (bad) return 1;
  for (int i = 0; i < 17; i++) CHECK(x[i] == (float)(size - 1), "%s[%d] = %g", name, i, x[i]);
  return 0;
}

/* rank r sends j + 1 rows valued 100 r + j to rank j */
static int alltoall(int rank, int size, int k) {
  int64_t splits[16];
  float x[16 * 17 / 2];
  int n = 0;
  for (int j = 0; j < size; j++) {
    splits[j] = j + 1;
    for (int i = 0; i <= j; i++) x[n++] = (float)(100 * rank + j);
  }
  plait_tensor_t t = rows(x, n, 1);
  char name[32];
  snprintf(name, sizeof name, "eo.a2a.%d", k);
  plait_handle_t *h = NULL;
  CHECK(plait_alltoall_async(name, &t, splits, NULL, &h) == PLAIT_SUCCESS, "%s", name);
  if (wait_ok(rank, h, name)) return plait_release(h), 1;
  plait_tensor_t out;
  int bad = plait_handle_output(h, &out) != PLAIT_SUCCESS || out.shape[0] != size * (rank + 1);
  for (int i = 0, row = 0; !bad && i < size; i++)
    for (int j = 0; j <= rank; j++, row++) bad |= ((float *)out.data)[row] != (float)(100 * i + rank);
  plait_release(h);
  CHECK(!bad, "%s: wrong output", name);
  return 0;
}

/* 2 size rows of 1: each rank gets 2 rows valued size */
static int reducescatter(int rank, int size, int k) {
  float x[32];
  for (int i = 0; i < 2 * size; i++) x[i] = 1;
  plait_tensor_t t = rows(x, 2 * size, 1);
  char name[32];
  snprintf(name, sizeof name, "eo.rs.%d", k);
  plait_handle_t *h = NULL;
  CHECK(plait_reducescatter_async(name, &t, PLAIT_OP_SUM, NULL, &h) == PLAIT_SUCCESS, "%s", name);
  if (wait_ok(rank, h, name)) return plait_release(h), 1;
  plait_tensor_t out;
  int bad = plait_handle_output(h, &out) != PLAIT_SUCCESS || out.shape[0] != 2 ||
            ((float *)out.data)[0] != (float)size || ((float *)out.data)[1] != (float)size;
  plait_release(h);
  CHECK(!bad, "%s: wrong output", name);
  return 0;
}

/* shapes differ by rank: fails on every rank, naming the tensor */
static int mismatch(int rank, int k) {
  float x[8] = {0};
  plait_tensor_t t;
  plait_tensor_1d(&t, x, (size_t)(rank + 1), PLAIT_FLOAT32);
  char name[32];
  snprintf(name, sizeof name, "eo.mismatch.%d", k);
  plait_handle_t *h = NULL;
  CHECK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h) == PLAIT_SUCCESS, "%s", name);
  plait_result_t rc = plait_wait(h, 120);
  plait_release(h);
  CHECK(rc == PLAIT_ERR_MISMATCH && strstr(plait_last_error(), name), "%s gave %s", name,
        plait_result_name(rc));
  return 0;
}

int every_op(int rank, int size) {
  if (size > 16) return 0;
  for (int k = 0; k < ROUNDS; k++) {
    if (allreduce_scaled(rank, size, k) || grouped(rank, size, k) || allgather(rank, size, k) ||
        broadcast(rank, size, k) || alltoall(rank, size, k) || reducescatter(rank, size, k) ||
        mismatch(rank, k))
      return 1;
    plait_handle_t *h = NULL;
    CHECK(plait_barrier_async(NULL, &h) == PLAIT_SUCCESS, "barrier");
    int bad = wait_ok(rank, h, "barrier");
    plait_release(h);
    if (bad) return 1;
  }
  plait_handle_t *h = NULL;
  CHECK(plait_join_async(NULL, &h) == PLAIT_SUCCESS, "join");
  int bad = wait_ok(rank, h, "join");
  plait_release(h);
  return bad;
}
