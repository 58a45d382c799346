#include "workload.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plait/plait.h"

#define BURST 16              /* tensors fused in one response */
#define BIG (256 * 1024)      /* floats: 1 MiB, a ring or direct reads */
#define BCAST (16 * 1024)     /* floats */
#define DOOM_LOOPS 5000       /* the failure loop's bound */
#define LOCKED (4 * 1024 * 1024) /* floats: 16 MiB, sent in pieces over shm (spin locks) */
#define WAIT_S 60.0

typedef struct ctx {
  int rank, size;
  char *why;
  size_t len;
} ctx_t;

static int fail(ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(ctx_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(c->why, c->len, "rank %d: ", c->rank);
  if (n > 0 && (size_t)n < c->len) vsnprintf(c->why + n, c->len - (size_t)n, fmt, ap);
  va_end(ap);
  return 1;
}

#define CALL(c, what, expr)                                                    \
  do {                                                                         \
    plait_result_t rc_ = (expr);                                               \
    if (rc_ != PLAIT_SUCCESS)                                                  \
      return fail((c), "%s: %s: %s", (what), plait_result_name(rc_), plait_last_error()); \
  } while (0)

static plait_result_t allreduce(const char *name, float *x, size_t n, plait_handle_t **h) {
  plait_tensor_t t;
  plait_tensor_1d(&t, x, n, PLAIT_FLOAT32);
  return plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, h);
}

static plait_result_t finish(plait_handle_t *h) {
  plait_result_t rc = plait_wait(h, WAIT_S);
  plait_release(h);
  return rc;
}

/* Every rank adds rank + 1: each element ends as size * (size + 1) / 2. */
static int check_sum(ctx_t *c, const char *name, const float *x, size_t n) {
  float want = (float)(c->size * (c->size + 1) / 2);
  for (size_t i = 0; i < n; i++)
    if (x[i] != want) return fail(c, "%s[%zu] = %g, want %g", name, i, x[i], want);
  return 0;
}

/* BURST small allreduces submitted together (fused), then one of 1 MiB. */
static int reduce_step(ctx_t *c) {
  float burst[BURST][256];
  plait_handle_t *h[BURST];
  for (int t = 0; t < BURST; t++) {
    size_t n = 64 + 12 * (size_t)t;
    for (size_t i = 0; i < n; i++) burst[t][i] = (float)(c->rank + 1);
    char name[32];
    snprintf(name, sizeof name, "burst.%d", t);
    CALL(c, name, allreduce(name, burst[t], n, &h[t]));
  }
  for (int t = 0; t < BURST; t++) CALL(c, "burst wait", finish(h[t]));
  for (int t = 0; t < BURST; t++)
    if (check_sum(c, "burst", burst[t], 64 + 12 * (size_t)t)) return 1;
  float *big = malloc(BIG * sizeof *big);
  if (!big) return fail(c, "out of memory");
  for (size_t i = 0; i < BIG; i++) big[i] = (float)(c->rank + 1);
  plait_handle_t *b = NULL;
  plait_result_t rc = allreduce("big", big, BIG, &b);
  if (rc == PLAIT_SUCCESS) rc = finish(b);
  int bad = rc ? fail(c, "big: %s: %s", plait_result_name(rc), plait_last_error())
               : check_sum(c, "big", big, BIG);
  free(big);
  return bad;
}

/* Rank r gives r + 1 rows of 4 floats, each r. */
static int gather_step(ctx_t *c) {
  float rows[4 * 16];
  int64_t mine = c->rank + 1;
  for (int i = 0; i < 4 * mine; i++) rows[i] = (float)c->rank;
  plait_tensor_t t;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.data = rows;
  t.dtype = PLAIT_FLOAT32;
  t.device = PLAIT_DEVICE_HOST;
  t.ndim = 2;
  t.shape[0] = mine;
  t.shape[1] = 4;
  plait_handle_t *h = NULL;
  CALL(c, "allgather", plait_allgather_async("gather", &t, NULL, &h));
  plait_result_t rc = plait_wait(h, WAIT_S);
  plait_tensor_t out;
  int bad = 0;
  if (rc == PLAIT_SUCCESS) rc = plait_handle_output(h, &out);
  if (rc != PLAIT_SUCCESS) {
    bad = fail(c, "allgather: %s: %s", plait_result_name(rc), plait_last_error());
  } else {
    const float *o = out.data;
    int64_t want_rows = (int64_t)c->size * (c->size + 1) / 2, row = 0;
    if (out.shape[0] != want_rows) bad = fail(c, "allgather: %lld rows, want %lld",
                                              (long long)out.shape[0], (long long)want_rows);
    for (int r = 0; r < c->size && !bad; r++)
      for (int k = 0; k <= r && !bad; k++, row++)
        if (o[row * 4] != (float)r) bad = fail(c, "allgather: row %lld is %g, want %d",
                                               (long long)row, o[row * 4], r);
  }
  plait_release(h);
  return bad;
}

static int broadcast_step(ctx_t *c, int root) {
  static float x[BCAST];
  for (int i = 0; i < BCAST; i++) x[i] = c->rank == root ? (float)(i % 97) : -1.0f;
  plait_tensor_t t;
  plait_tensor_1d(&t, x, BCAST, PLAIT_FLOAT32);
  plait_handle_t *h = NULL;
  CALL(c, "broadcast", plait_broadcast_async("bcast", &t, root, NULL, &h));
  CALL(c, "broadcast wait", finish(h));
  for (int i = 0; i < BCAST; i++)
    if (x[i] != (float)(i % 97)) return fail(c, "broadcast[%d] = %g, want %d", i, x[i], i % 97);
  return 0;
}

static volatile int die_after = -1; /* spin locks still to take before dying; -1: never */

/* The executable's own pthread_spin_lock (linked with ENABLE_EXPORTS), which
 * libfabric's shm provider calls: the victim can die holding one, as in
 * tests/plugins/ofi/test_ofi_lock_holder.c. */
int pthread_spin_lock(pthread_spinlock_t *lock) {
  static int (*real)(pthread_spinlock_t *);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_spin_lock");
  int rc = real(lock);
  if (die_after >= 0 && die_after-- == 0) raise(SIGKILL); /* holding it */
  return rc;
}

int workload_rescues;

static void spin_us(int us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

/* 1 MiB allreduces (16 MiB to die in a lock) until one fails; the victim
 * dies inside one. The others must fail with PLAIT_ERR_PEER_LOST naming it. */
static int doom_step(ctx_t *c, const cycle_plan_t *p) {
  size_t n = p->in_lock ? LOCKED : BIG;
  float *x = calloc(n, sizeof *x);
  if (!x) return fail(c, "out of memory");
  plait_result_t rc = PLAIT_SUCCESS;
  int i;
  for (i = 0; i < DOOM_LOOPS && rc == PLAIT_SUCCESS; i++) {
    plait_handle_t *h = NULL;
    rc = allreduce("doom", x, n, &h);
    if (rc != PLAIT_SUCCESS) break;
    int dies = c->rank == p->victim && i == p->kill_at;
    if (dies && p->in_lock) die_after = 5 + p->kill_us % 16;
    if (dies && !p->in_lock) {
      spin_us(p->kill_us);
      raise(p->stop ? SIGSTOP : SIGKILL); /* stopped: killed later, never continued */
    }
    rc = finish(h);
    if (dies) raise(SIGKILL); /* took too few locks (another provider) */
  }
  free(x);
  char named[32];
  snprintf(named, sizeof named, "rank %d", p->victim);
  if (rc == PLAIT_SUCCESS) return fail(c, "%d allreduces and no failure", i);
  const char *msg = plait_last_error();
  if (strstr(msg, "stuck inside libfabric")) workload_rescues++;
  if (rc != PLAIT_ERR_PEER_LOST || !strstr(msg, named))
    return fail(c, "want PLAIT_ERR_PEER_LOST naming %s, got %s: %s", named,
                plait_result_name(rc), msg);
  return 0;
}

int workload_run(const cycle_plan_t *plan, char *why, size_t len) {
  ctx_t c = {0, 0, why, len};
  why[0] = '\0';
  CALL(&c, "plait_init", plait_init());
  plait_rank(&c.rank);
  plait_size(&c.size);
  int bad = reduce_step(&c) || gather_step(&c) || broadcast_step(&c, plan->root);
  if (!bad && plan->victim >= 0) bad = doom_step(&c, plan);
  plait_result_t rc = plait_shutdown();
  if (!bad && plan->victim < 0 && rc != PLAIT_SUCCESS)
    bad = fail(&c, "plait_shutdown: %s: %s", plait_result_name(rc), plait_last_error());
  return bad;
}
