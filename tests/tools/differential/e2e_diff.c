/*
 * The end-to-end differential's workload (ci/differential, docs/differential.md):
 * a random job over the public C API only, from a seed, on RANKS forked
 * ranks of one transport. Each rank writes what it saw to OUTDIR/rank<r>.out:
 * every operation's submit and wait result codes and messages, and a hash and
 * length of its output bytes (and alltoall's received splits). ci/differential
 * builds this one source against two trees (each against its own libplait,
 * run with that tree's plugins through PLAIT_PLUGIN_PATH) and compares the
 * files byte for byte.
 *
 * Phase 1, bursts: batches of 1-12 operations submitted at once (they fuse),
 * then waited in order: allreduce (every dtype and op, prescale/postscale),
 * grouped allreduce, allgather (a first dimension per rank), broadcast (any
 * root), alltoall (random splits), reducescatter, barrier; and deliberate
 * errors: a shape that differs on the last rank (a mismatch every rank
 * reports), AVERAGE on bool, a root outside the job, an empty name, a group
 * that names one tensor twice.
 * Values are small integers (in every dtype), so sums are exact whatever the
 * order in which a transport adds them: a difference is a real one.
 * Phase 3, after the stats: process sets added, used (members) and refused
 * (a rank outside), removed.
 * Phase 2, one at a time: 24 allreduces and broadcasts, each waited before
 * the next, between plait_stats_reset and plait_stats: the negotiation and
 * fusion counters and the control-plane messages and bytes this rank sent
 * are then deterministic and written out too (the control-plane line as long
 * as no heartbeat falls in: ci/differential retries a difference there).
 *
 * Usage: e2e_diff SEED RANKS TRANSPORT OUTDIR [BATCHES]
 * (PLAIT_PLUGIN_PATH must name the folder of the tree's plugins).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plait/plait.h"

#define MAX_BATCH 12

static uint64_t rs;
static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static uint64_t rnd(void) { return mix(rs += 0x9e3779b97f4a7c15ull); }
static int R(int n) { return n <= 1 ? 0 : (int)(rnd() % (uint64_t)n); }
static int chance(int percent) { return R(100) < percent; }

static uint64_t fnv(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* Small integer v as the bits of dtype dt. */
static void put(void *base, size_t i, plait_dtype_t dt, int v) {
  union { float f; uint32_t u; } x = {.f = (float)v};
  switch (dt) {
  case PLAIT_UINT8: ((uint8_t *)base)[i] = (uint8_t)(v < 0 ? -v : v); break;
  case PLAIT_INT8: ((int8_t *)base)[i] = (int8_t)v; break;
  case PLAIT_UINT16: ((uint16_t *)base)[i] = (uint16_t)(v < 0 ? -v : v); break;
  case PLAIT_INT16: ((int16_t *)base)[i] = (int16_t)v; break;
  case PLAIT_INT32: ((int32_t *)base)[i] = v; break;
  case PLAIT_INT64: ((int64_t *)base)[i] = v; break;
  case PLAIT_FLOAT16: { /* exact for small integers */
    uint16_t h = (uint16_t)((x.u >> 16) & 0x8000u);
    if (v) h |= (uint16_t)((((x.u >> 23) & 0xff) - 127 + 15) << 10 | ((x.u >> 13) & 0x3ff));
    ((uint16_t *)base)[i] = h;
    break;
  }
  case PLAIT_BFLOAT16: ((uint16_t *)base)[i] = (uint16_t)(x.u >> 16); break;
  case PLAIT_FLOAT32: ((float *)base)[i] = (float)v; break;
  case PLAIT_FLOAT64: ((double *)base)[i] = v; break;
  default: ((uint8_t *)base)[i] = (uint8_t)(v & 1); break;
  }
}

typedef struct op {
  int kind; /* 0 allreduce 1 grouped 2 allgather 3 broadcast 4 alltoall 5 reducescatter 6 barrier */
  char name[64], name2[64];
  plait_dtype_t dtype;
  plait_op_t rop;
  int64_t rows, cols;
  int root, mismatch, in_flight_twice; /* in_flight_twice: refused names, see submit */
  double pre, post;
  int64_t splits[8];
  void *in, *in2, *out, *out2;
  plait_handle_t *h;
  plait_result_t submit_rc;
} op_t;

static int RANK, SIZE;
static uint64_t SEED;

static void *fill(int opno, int part, plait_dtype_t dt, size_t n) {
  size_t es = plait_dtype_size(dt);
  uint8_t *p = malloc(n * es + 1);
  for (size_t i = 0; i < n; i++) {
    uint64_t h = mix(SEED ^ mix((uint64_t)opno * 131 + (uint64_t)part * 7 + (uint64_t)RANK) ^ i);
    put(p, i, dt, (int)(h % 9) - 4);
  }
  return p;
}

static plait_tensor_t tensor(void *data, plait_dtype_t dt, int64_t rows, int64_t cols) {
  plait_tensor_t t;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.data = data;
  t.dtype = dt;
  t.device = PLAIT_DEVICE_HOST;
  t.ndim = cols > 1 ? 2 : 1;
  t.shape[0] = rows;
  t.shape[1] = cols;
  return t;
}

static void say_rc(const char *what, plait_result_t rc) {
  printf(" %s=%s", what, plait_result_name(rc));
  if (rc != PLAIT_SUCCESS) printf(" [%s]", plait_last_error());
}

static void make(op_t *o, int opno, const char *prefix, int serial) {
  memset(o, 0, sizeof *o);
  static const int kinds[] = {0, 0, 0, 0, 0, 1, 2, 3, 3, 4, 5, 6};
  o->kind = serial ? (opno % 6 < 4 ? 0 : 3) : kinds[R(12)]; /* serial: a name keeps its kind */
  snprintf(o->name, sizeof o->name, "%s.%d", prefix, serial ? opno % 6 : opno % 20);
  snprintf(o->name2, sizeof o->name2, "%s.%d.b", prefix, opno % 20);
  o->dtype = (plait_dtype_t)(serial || chance(50) ? PLAIT_FLOAT32 : R(11));
  o->rop = (plait_op_t)(serial || chance(60) ? PLAIT_OP_SUM : R(5));
  if (o->dtype == PLAIT_BOOL && o->rop == PLAIT_OP_AVERAGE && !chance(30)) o->rop = PLAIT_OP_MAX;
  static const int64_t sizes[] = {1, 3, 17, 100, 1000, 4096, 25000, 70000};
  o->rows = serial ? 16 << (opno % 3) : sizes[R(8)];
  o->cols = chance(20) ? 1 + R(4) : 1;
  o->root = serial ? opno % SIZE : chance(5) ? SIZE : R(SIZE); /* SIZE: outside the job */
  /* a mismatch only where the last rank's own checks pass (else the others wait) */
  o->mismatch = !serial && (o->kind == 0 || o->kind == 3 || o->kind == 5) && chance(6);
  o->in_flight_twice = !serial && chance(3);
  static const double pres[] = {1.0, 1.0, 1.0, 0.5, 2.0}, posts[] = {1.0, 1.0, 1.0, 0.25, 4.0};
  o->pre = o->dtype == PLAIT_BOOL ? 1.0 : pres[R(5)];
  o->post = o->dtype == PLAIT_BOOL ? 1.0 : posts[R(5)];
  int64_t rows = 0;
  for (int r = 0; r < SIZE; r++) rows += (o->splits[r] = R(5));
  if (o->kind == 4) o->rows = rows;
  if (o->kind == 5 && o->rows < SIZE) o->rows = SIZE;
}

static void submit(op_t *o, int opno) {
  plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
  opts.prescale_factor = o->pre;
  opts.postscale_factor = o->post;
  int64_t rows = o->rows + (o->mismatch && RANK == SIZE - 1);
  if (o->kind == 2) rows = o->rows + RANK; /* allgather: first dimensions may differ */
  size_t n = (size_t)(rows * o->cols);
  plait_tensor_t in = tensor(o->in = fill(opno, 0, o->dtype, n), o->dtype, rows, o->cols);
  plait_result_t rc;
  printf("op %d kind=%d name=%s dtype=%s op=%s rows=%" PRId64 " cols=%" PRId64, opno, o->kind,
         o->name, plait_dtype_name(o->dtype), plait_op_name(o->rop), rows, o->cols);
  switch (o->kind) {
  case 0: {
    plait_tensor_t out = tensor(o->out = malloc(n * plait_dtype_size(o->dtype) + 1), o->dtype,
                                rows, o->cols);
    rc = plait_allreduce_async(o->name, &in, &out, o->rop, &opts, &o->h);
    break;
  }
  case 1: {
    plait_tensor_t ins[2] = {in, tensor(o->in2 = fill(opno, 1, o->dtype, n), o->dtype, rows,
                                        o->cols)};
    o->out = o->in, o->out2 = o->in2; /* in place */
    const char *names[2] = {o->name, o->name2};
    rc = plait_grouped_allreduce_async(2, names, ins, ins, o->rop, &opts, &o->h);
    break;
  }
  case 2: rc = plait_allgather_async(o->name, &in, NULL, &o->h); break;
  case 3: o->out = o->in; rc = plait_broadcast_async(o->name, &in, o->root, NULL, &o->h); break;
  case 4: rc = plait_alltoall_async(o->name, &in, o->splits, NULL, &o->h); break;
  case 5: rc = plait_reducescatter_async(o->name, &in, o->rop, &opts, &o->h); break;
  default: rc = plait_barrier_async(NULL, &o->h);
  }
  o->submit_rc = rc;
  say_rc("submit", rc);
  printf("\n");
  if (o->in_flight_twice) { /* refused at once on every rank: an empty name, a name twice */
    plait_handle_t *h2 = NULL;
    plait_tensor_t two[2] = {in, in};
    const char *names[2] = {o->name2, o->name2};
    plait_result_t rc1 = plait_allreduce_async("", &in, &in, o->rop, NULL, &h2);
    printf("op %d empty-name", opno);
    say_rc("submit", rc1);
    if (h2) plait_release(h2), h2 = NULL;
    plait_result_t rc2 = plait_grouped_allreduce_async(2, names, two, two, o->rop, NULL, &h2);
    printf(" name-twice");
    say_rc("submit", rc2);
    printf("\n");
    if (h2) plait_release(h2);
  }
}

static void finish(op_t *o, int opno) {
  if (o->submit_rc == PLAIT_SUCCESS) {
    plait_result_t rc = plait_wait(o->h, 120.0);
    printf("op %d", opno);
    say_rc("wait", rc);
    if (rc == PLAIT_SUCCESS) {
      size_t es = plait_dtype_size(o->dtype);
      size_t n = (size_t)((o->rows + (o->mismatch && RANK == SIZE - 1)) * o->cols);
      if (o->kind == 2 || o->kind == 4 || o->kind == 5) {
        plait_tensor_t out;
        memset(&out, 0, sizeof out);
        out.struct_size = sizeof out;
        plait_result_t orc = plait_handle_output(o->h, &out);
        size_t m = 1;
        for (int d = 0; d < out.ndim; d++) m *= (size_t)out.shape[d];
        if (orc == PLAIT_SUCCESS)
          printf(" out=%zu:%016" PRIx64, m, fnv(out.data, m * es));
        else
          say_rc("output", orc);
        if (o->kind == 4) {
          int64_t got[8] = {0};
          plait_handle_splits(o->h, got, (size_t)SIZE);
          printf(" splits=");
          for (int r = 0; r < SIZE; r++) printf("%s%" PRId64, r ? "," : "", got[r]);
        }
      } else if (o->kind != 6) {
        printf(" out=%zu:%016" PRIx64, n, fnv(o->out, n * es));
        if (o->out2) printf(" out2=%016" PRIx64, fnv(o->out2, n * es));
      }
    }
    printf("\n");
    plait_release(o->h);
  }
  free(o->in);
  free(o->in2);
  if (o->out != o->in) free(o->out);
}

/* Phase 3, process sets (after the stats): every rank adds the set of ranks
 * 0 and SIZE-1 ({1} with 2 ranks, after {0,1} is refused as the global
 * set's ranks) and, with 3 ranks or more, the set 1..SIZE-1; members run
 * allreduces, broadcasts and allgathers on it, a rank outside a set tries
 * one and is refused; then the sets are removed (and the global set refused). */
static void psets(int *opno) {
  int a[2] = {0, SIZE - 1}, na = 2, b[8], nb = 0;
  for (int r = 1; r < SIZE; r++) b[nb++] = r;
  int32_t ids[2] = {-1, -1};
  plait_result_t rc;
  if (SIZE == 2) {
    rc = plait_process_set_add(a, 2, &ids[0]);
    printf("pset add {0,1}");
    say_rc("rc", rc);
    printf("\n");
    a[0] = 1, na = 1;
  }
  rc = plait_process_set_add(a, na, &ids[0]);
  if (na == 1) printf("pset add {%d}", a[0]);
  else printf("pset add {%d,%d}", a[0], a[1]);
  say_rc("rc", rc);
  printf(" id=%d\n", (int)ids[0]);
  if (SIZE >= 3) {
    rc = plait_process_set_add(b, nb, &ids[1]);
    printf("pset add {1..%d}", SIZE - 1);
    say_rc("rc", rc);
    printf(" id=%d\n", (int)ids[1]);
  }
  for (int k = 0; k < 2; k++) {
    if (ids[k] <= 0) continue;
    int member = k == 0 ? (RANK == a[0] || RANK == a[na - 1]) : RANK >= 1;
    int n = 0;
    plait_process_set_size(ids[k], &n);
    printf("pset %d size=%d member=%d\n", (int)ids[k], n, member);
    for (int i = 0; i < 6; i++, (*opno)++) {
      op_t o;
      make(&o, *opno, k ? "p1" : "p0", 0);
      if (o.kind != 0 && o.kind != 2 && o.kind != 3) o.kind = 0;
      o.mismatch = o.in_flight_twice = 0;
      if (o.kind == 3) o.root = k == 0 ? a[i % na] : 1 + i % (SIZE - 1);
      if (!member && i != 2) continue; /* the others only see one refused */
      plait_op_options_t opts = PLAIT_OP_OPTIONS_INIT;
      opts.process_set = ids[k];
      size_t cnt = (size_t)(o.rows * o.cols);
      plait_tensor_t in = tensor(o.in = fill(*opno, 0, o.dtype, cnt), o.dtype, o.rows, o.cols);
      printf("op %d pset=%d kind=%d name=%s dtype=%s", *opno, (int)ids[k], o.kind, o.name,
             plait_dtype_name(o.dtype));
      if (o.kind == 0) {
        o.out = malloc(cnt * plait_dtype_size(o.dtype) + 1);
        plait_tensor_t out = tensor(o.out, o.dtype, o.rows, o.cols);
        rc = plait_allreduce_async(o.name, &in, &out, o.rop, &opts, &o.h);
      } else if (o.kind == 2) {
        rc = plait_allgather_async(o.name, &in, &opts, &o.h);
      } else {
        o.out = o.in;
        rc = plait_broadcast_async(o.name, &in, o.root, &opts, &o.h);
      }
      o.submit_rc = rc;
      say_rc("submit", rc);
      printf("\n");
      finish(&o, *opno);
    }
  }
  for (int k = 1; k >= 0; k--) {
    if (ids[k] <= 0) continue;
    rc = plait_process_set_remove(ids[k]);
    printf("pset remove %d", (int)ids[k]);
    say_rc("rc", rc);
    printf("\n");
  }
  rc = plait_process_set_remove(0);
  printf("pset remove 0");
  say_rc("rc", rc);
  printf("\n");
}

static int workload(int batches) {
  plait_result_t rc = plait_init();
  printf("init=%s\n", plait_result_name(rc));
  if (rc != PLAIT_SUCCESS) {
    printf("  [%s]\n", plait_last_error());
    return 1;
  }
  rs = SEED; /* the same sequence of operations on every rank */
  int opno = 0;
  op_t ops[MAX_BATCH];
  for (int b = 0; b < batches; b++) {
    int k = 1 + R(MAX_BATCH);
    printf("batch %d of %d\n", b, k);
    for (int i = 0; i < k; i++) make(&ops[i], opno + i, "a", 0);
    for (int i = 0; i < k; i++) /* names in one batch: never twice (except on purpose) */
      for (int j = 0; j < i; j++)
        if (!strcmp(ops[i].name, ops[j].name)) snprintf(ops[i].name, sizeof ops[i].name,
                                                        "a.%d.u", opno + i);
    for (int i = 0; i < k; i++) submit(&ops[i], opno + i);
    for (int i = 0; i < k; i++) finish(&ops[i], opno + i);
    opno += k;
  }
  plait_stats_reset();
  for (int i = 0; i < 24; i++, opno++) {
    make(&ops[0], opno, "s", 1);
    submit(&ops[0], opno);
    finish(&ops[0], opno);
  }
  plait_stats_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  rc = plait_stats(&st);
  printf("stats=%s hits=%" PRIu64 " misses=%" PRIu64 " responses=%" PRIu64 " tensors=%" PRIu64
         " bytes=%" PRIu64 " fused=%" PRIu64 "/%" PRIu64 " fusion_bytes=%" PRIu64 "\n",
         plait_result_name(rc), st.cache_hits, st.cache_misses, st.responses, st.tensors,
         st.bytes, st.fused_responses, st.fused_tensors, st.fusion_bytes);
  /* its own line: a loaded machine can add a message (a heartbeat answered
   * while a collective ran long), so ci/differential retries a difference here */
  printf("control messages=%" PRIu64 " bytes=%" PRIu64 "\n", st.control_messages,
         st.control_bytes);
  psets(&opno);
  rc = plait_shutdown();
  printf("shutdown=%s\n", plait_result_name(rc));
  return 0;
}

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &len))
    return -1;
  close(s);
  return ntohs(a.sin_port);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s SEED RANKS TRANSPORT OUTDIR [BATCHES]\n", argv[0]);
    return 2;
  }
  SEED = strtoull(argv[1], NULL, 0);
  SIZE = atoi(argv[2]);
  int batches = argc > 5 ? atoi(argv[5]) : 20;
  if (SIZE < 1 || SIZE > 8 || batches < 0) return fprintf(stderr, "e2e_diff: bad arguments\n"), 2;
  int port = free_port();
  if (port < 0) return perror("e2e_diff: a free port"), 2;
  char rv[64], secret[40], buf[32];
  snprintf(rv, sizeof rv, "127.0.0.1:%d", port);
  snprintf(secret, sizeof secret, "%016" PRIx64 "%08x", mix((uint64_t)time(NULL)), (unsigned)getpid());
  pid_t pids[8];
  for (int r = 0; r < SIZE; r++) {
    if ((pids[r] = fork()) == 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/rank%d.out", argv[4], r);
      if (!freopen(path, "w", stdout)) _exit(3);
      snprintf(buf, sizeof buf, "%d", r);
      setenv("PLAIT_RANK", buf, 1);
      setenv("PLAIT_LOCAL_RANK", buf, 1);
      snprintf(buf, sizeof buf, "%d", SIZE);
      setenv("PLAIT_SIZE", buf, 1);
      setenv("PLAIT_LOCAL_SIZE", buf, 1);
      setenv("PLAIT_RENDEZVOUS", rv, 1);
      setenv("PLAIT_SECRET", secret, 1);
      setenv("PLAIT_TRANSPORT", argv[3], 1);
      setenv("PLAIT_TIMEOUT_S", "600", 1); /* heartbeats every 150 s: none in a run */
      setenv("PLAIT_DYNAMIC_PROCESS_SETS", "1", 1);
      RANK = r;
      int rc = workload(batches);
      fflush(stdout);
      _exit(rc);
    }
  }
  int fails = 0;
  time_t start = time(NULL);
  for (int left = SIZE; left > 0;) {
    for (int r = 0; r < SIZE; r++) {
      int st;
      if (pids[r] > 0 && waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        if (!WIFEXITED(st) || WEXITSTATUS(st)) fails++, fprintf(stderr, "e2e_diff: rank %d failed (status %d)\n", r, st);
        pids[r] = 0;
        left--;
      }
    }
    if (left && time(NULL) - start > 240) {
      for (int r = 0; r < SIZE; r++)
        if (pids[r] > 0) kill(pids[r], SIGKILL), waitpid(pids[r], NULL, 0), fails++;
      fprintf(stderr, "e2e_diff: ranks still running after 240 s: killed\n");
      break;
    }
    usleep(20000);
  }
  return fails ? 1 : 0;
}
