/*
 * The negotiator differential's harness (ci/differential, docs/differential.md):
 * rank 0's negotiator fed random announcement streams from a seed, printing
 * one line per encoded response list. ci/differential compiles this one
 * source against two trees' engines (each tree's libplait_internal.a, with
 * -I for every folder under its src/engine, so "negotiate.h" is found
 * wherever the tree keeps it) and compares the two outputs line by line.
 *
 * A stream: 1-4 ranks; fusion threshold 0..1M; max tensor size; response
 * cache off or on (announcements by cache id as the coordinator sends them);
 * stall warning/abort; dispatch holding (PLAIT_CYCLE_TIME_MS); 1-8 steps of
 * up to 24 operations of every kind, dtype, op, scale factor, device and
 * shape (mostly float32 sums that fuse); grouped allreduces; per-rank submission order shuffled; mismatches;
 * ranks that skip an operation (stalls); joins; duplicate announcements and
 * unknown process sets (errors); ticks (rarely, sometimes or often between
 * announcements, so operations are released alone or many at once) at a virtual clock (plait_now is
 * wrapped: -Wl,--wrap=plait_now), then a shutdown that fails what remains.
 *
 * Output, one line each:
 *   S <stream> ranks=.. threshold=.. ...   a stream's settings
 *   L <stream> <list> <bytes> <hash>       an encoded response list (FNV-1a 64)
 *   X <hex>                                its bytes (with --hex only)
 *   A <stream> <rank> <name> <rc> <text>   plait_neg_add refused an announcement
 *   P <stream> <rc> <text>                 plait_neg_plan failed
 *   T <streams> <lists> <responses> <fused> <errors>   totals, last line
 *
 * Usage: neg_diff SEED STREAMS [--only N] [--hex]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "negotiate.h"
#include "util/error.h"

/* ------------------------------------------------------------ the clock */

static double vclock = 1000.0;
double __wrap_plait_now(void);
double __wrap_plait_now(void) { return vclock; }

/* ------------------------------------------------------------ randomness */

static uint64_t rs;
static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static int R(int n) { return n <= 1 ? 0 : (int)(rnd() % (uint64_t)n); }
static int chance(int percent) { return R(100) < percent; }

/* ------------------------------------------------------------ totals */

static struct {
  uint64_t streams, lists, responses, fused, errors;
} tot;
static int show_hex;

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static void emit(int stream, plait_negotiator_t *N, plait_response_list_t *l) {
  plait_writer_t w;
  memset(&w, 0, sizeof w);
  plait_result_t rc = plait_responses_encode(&w, l);
  if (rc != PLAIT_SUCCESS) {
    printf("P %d encode %d %s\n", stream, (int)rc, plait_last_error());
    tot.errors++;
  } else {
    printf("L %d %" PRIu64 " %zu %016" PRIx64 "\n", stream, N->lists_sent + 1, w.len,
           fnv(w.data, w.len));
    if (show_hex) {
      printf("X ");
      for (size_t i = 0; i < w.len; i++) printf("%02x", w.data[i]);
      printf("\n");
    }
  }
  tot.lists++;
  for (uint32_t i = 0; i < l->n; i++) {
    tot.responses++;
    if (l->r[i].n > 1) tot.fused++;
  }
  N->lists_sent++;
  plait_wr_free(&w);
}

static void tick(int stream, plait_negotiator_t *N, int *any_out) {
  plait_response_list_t l;
  memset(&l, 0, sizeof l);
  int any = 0;
  plait_result_t rc = plait_neg_plan(N, vclock, &l, &any);
  if (rc != PLAIT_SUCCESS) {
    printf("P %d %d %s\n", stream, (int)rc, plait_last_error());
    tot.errors++;
  } else if (any) {
    emit(stream, N, &l);
  }
  plait_responses_free(&l);
  if (any_out) *any_out = rc == PLAIT_SUCCESS && any;
}

/* ------------------------------------------------------------ workloads */

#define MAX_OPS 24
#define MAX_RANKS 4

typedef struct op {
  char name[48];
  plait_meta_t meta;
  char group[48];
} op_t;

static const int coll_weights[][2] = {
    {PLAIT_COLL_ALLREDUCE, 60}, {PLAIT_COLL_ALLGATHER, 10},    {PLAIT_COLL_BROADCAST, 8},
    {PLAIT_COLL_ALLTOALL, 5},   {PLAIT_COLL_REDUCESCATTER, 7}, {PLAIT_COLL_BARRIER, 4},
};

static int pick_coll(void) {
  int total = 0, n = (int)(sizeof coll_weights / sizeof coll_weights[0]);
  for (int i = 0; i < n; i++) total += coll_weights[i][1];
  int x = R(total);
  for (int i = 0; i < n; i++) {
    if (x < coll_weights[i][1]) return coll_weights[i][0];
    x -= coll_weights[i][1];
  }
  return PLAIT_COLL_ALLREDUCE;
}

static int64_t pick_count(void) {
  switch (R(6)) {
  case 0: return 1 + R(4);
  case 1: return 1 + R(64);
  case 2: return 1 + R(1024);
  case 3: return 1 + R(16384);
  case 4: return 1 + R(300000);
  default: return 16 << R(8);
  }
}

static void make_op(op_t *o, int stream, int i, int size, int nsplits_alloc) {
  memset(o, 0, sizeof *o);
  snprintf(o->name, sizeof o->name, chance(10) ? "model/layer.%d/weight.grad.s%d" : "t%d.s%d", i,
           stream % 7);
  plait_meta_t *m = &o->meta;
  m->coll = (uint8_t)pick_coll();
  /* mostly what fuses (float32 sums on the host, unscaled), some of the rest */
  m->dtype = (uint8_t)(chance(65) ? PLAIT_FLOAT32 : R(11));
  m->op = (uint8_t)(chance(85) ? PLAIT_OP_SUM : R(5));
  m->device = chance(6) ? R(2) : -1;
  m->prescale = chance(90) ? 1.0 : 0.5 * (1 + R(4));
  m->postscale = chance(90) ? 1.0 : 1.0 / (1 + R(8));
  m->ndim = (uint8_t)(1 + R(3));
  m->shape[0] = pick_count();
  for (int d = 1; d < m->ndim; d++) m->shape[d] = 1 + R(8);
  if (m->coll == PLAIT_COLL_BROADCAST) m->root = R(size);
  if (m->coll == PLAIT_COLL_BARRIER) {
    snprintf(o->name, sizeof o->name, "plait:barrier.%d", i);
    m->ndim = 0;
    m->shape[0] = 0;
    m->dtype = 0;
  }
  if (m->coll == PLAIT_COLL_ALLTOALL && nsplits_alloc) {
    m->nsplits = (uint32_t)size;
    m->splits = calloc((size_t)size, sizeof *m->splits);
    int64_t rows = 0;
    for (int r = 0; r < size; r++) rows += (m->splits[r] = R(4));
    m->shape[0] = rows;
  }
  if (m->coll == PLAIT_COLL_REDUCESCATTER && m->shape[0] < size) m->shape[0] = size;
}

/* One rank's copy of op o, possibly altered: a mismatch (one field differs). */
static void rank_meta(const op_t *o, int rank, int size, int mismatch, plait_meta_t *m) {
  *m = o->meta;
  if (m->coll == PLAIT_COLL_ALLGATHER && rank % 2) m->shape[0] += rank; /* allowed to differ */
  if (!mismatch) return;
  switch (R(6)) {
  case 0: m->shape[m->ndim ? m->ndim - 1 : 0] += 1; break;
  case 1: m->dtype = (uint8_t)((m->dtype + 1) % 11); break;
  case 2: m->op = (uint8_t)((m->op + 1) % 5); break;
  case 3: m->root = (m->root + 1) % size; break;
  case 4: m->prescale *= 2; break;
  default: m->coll = (uint8_t)(m->coll == PLAIT_COLL_ALLREDUCE ? PLAIT_COLL_BROADCAST
                                                               : PLAIT_COLL_ALLREDUCE);
  }
}

typedef struct announcement {
  int op;       /* index into ops, -1 join */
  int mismatch;
  int twice;    /* announced twice: a protocol error */
  int bad_pset; /* announced on a process set that does not exist */
} ann_t;

static void announce(int stream, plait_negotiator_t *N, plait_cache_t *C, int rank,
                     const char *name, const plait_meta_t *m) {
  int cid = plait_cache_lookup(C, name, m);
  plait_result_t rc = plait_neg_add(N, rank, name, m, cid, N->lists_sent);
  if (rc != PLAIT_SUCCESS) {
    printf("A %d %d %s %d %s\n", stream, rank, name, (int)rc, plait_last_error());
    tot.errors++;
  }
}

static int tick_pct; /* per stream: how often rank 0 ticks between announcements */

static void advance(void) {
  int x = R(1000);
  vclock += x < 10 ? 40.0 : x < 40 ? 2.0 : 0.0005 * (1 + R(4));
}

static void run_step(int stream, plait_negotiator_t *N, plait_cache_t *C, op_t *ops, int nops,
                     int size, int step, int joins) {
  ann_t q[MAX_RANKS][MAX_OPS + 1];
  int len[MAX_RANKS], at[MAX_RANKS];
  for (int r = 0; r < size; r++) {
    len[r] = at[r] = 0;
    for (int i = 0; i < nops; i++) {
      if (chance(2)) continue; /* this rank never submits it: a stall */
      ann_t a = {i, chance(3), chance(1), chance(1)};
      q[r][len[r]++] = a;
    }
    for (int i = 0; i + 1 < len[r]; i++) /* submission order differs a little per rank */
      if (chance(20)) {
        ann_t t = q[r][i];
        q[r][i] = q[r][i + 1];
        q[r][i + 1] = t;
      }
    if (joins && (r != size - 1 || chance(50))) q[r][len[r]++] = (ann_t){-1, 0, 0, 0};
  }
  for (;;) {
    int left = 0;
    for (int r = 0; r < size; r++) left += len[r] - at[r];
    if (!left) break;
    int pick = R(left), r = 0;
    while (pick >= len[r] - at[r]) pick -= len[r] - at[r], r++;
    ann_t a = q[r][at[r]++];
    plait_meta_t m;
    char name[64];
    if (a.op < 0) {
      memset(&m, 0, sizeof m);
      m.coll = PLAIT_COLL_JOIN;
      m.device = -1;
      m.prescale = m.postscale = 1.0;
      snprintf(name, sizeof name, "plait:join.%d", step);
    } else {
      rank_meta(&ops[a.op], r, size, a.mismatch, &m);
      if (a.bad_pset) m.pset = 7;
      snprintf(name, sizeof name, "%s", ops[a.op].name);
    }
    announce(stream, N, C, r, name, &m);
    if (a.twice) announce(stream, N, C, r, name, &m);
    if (chance(tick_pct)) {
      advance();
      tick(stream, N, NULL);
    }
  }
  for (int i = 0, any = 1; i < 4 && any; i++) {
    vclock += i ? 2.0 : 0.001;
    tick(stream, N, &any);
  }
}

static void run_stream(int stream) {
  plait_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  int size = 1 + R(MAX_RANKS);
  static const uint64_t thresholds[] = {0, 64, 256, 4096, 65536, 1 << 20};
  cfg.fusion_threshold = chance(15) ? (uint64_t)R(1 << 20) : thresholds[R(6)];
  static const uint64_t maxes[] = {0, 0, 0, 128, 8192, 1 << 16};
  cfg.fusion_max_tensor = maxes[R(6)];
  cfg.stall_warn_s = chance(50) ? 5.0 : 0.0;
  cfg.stall_abort_s = chance(40) ? 30.0 : 0.0;
  cfg.cycle_time_ms = chance(30) ? 1000.0 : 0.0;
  static const int caps[] = {0, 4, 64, 1024};
  int cap = caps[R(4)];
  int nops = 1 + R(MAX_OPS), nsteps = 1 + R(8), joins = chance(12);
  static const int tick_pcts[] = {4, 15, 40};
  tick_pct = tick_pcts[R(3)];
  printf("S %d ranks=%d threshold=%" PRIu64 " max_tensor=%" PRIu64
         " warn=%g abort=%g cycle_ms=%g cache=%d ops=%d steps=%d joins=%d ticks=%d%%\n",
         stream, size, cfg.fusion_threshold, cfg.fusion_max_tensor, cfg.stall_warn_s,
         cfg.stall_abort_s, cfg.cycle_time_ms, cap, nops, nsteps, joins, tick_pct);

  op_t ops[MAX_OPS];
  for (int i = 0; i < nops; i++) make_op(&ops[i], stream, i, size, 1);
  for (int i = 0; i < nops; i++) { /* grouped allreduces: runs of them */
    if (ops[i].meta.coll != PLAIT_COLL_ALLREDUCE || !chance(12)) continue;
    int k = 1;
    while (i + k < nops && k < 4 && ops[i + k].meta.coll == PLAIT_COLL_ALLREDUCE) k++;
    for (int j = i; j < i + k; j++) {
      memcpy(ops[j].group, ops[i].name, sizeof ops[j].group);
      ops[j].meta.group = ops[j].group;
      ops[j].meta.group_size = (uint32_t)k;
    }
    i += k - 1;
  }

  plait_cache_t C;
  plait_negotiator_t N;
  if (plait_cache_init(&C, cap) != PLAIT_SUCCESS ||
      plait_neg_init(&N, size, &cfg, &C) != PLAIT_SUCCESS) {
    fprintf(stderr, "neg_diff: init failed: %s\n", plait_last_error());
    exit(2);
  }
  for (int s = 0; s < nsteps; s++) {
    run_step(stream, &N, &C, ops, nops, size, s, joins && s == nsteps - 1);
    if (chance(20)) { /* a new tensor shape in the next step: cache miss */
      int i = R(nops);
      if (ops[i].meta.coll == PLAIT_COLL_ALLREDUCE) ops[i].meta.shape[0] += 1;
    }
  }
  vclock += 40.0; /* whatever is still pending stalls */
  tick(stream, &N, NULL);
  plait_response_list_t l;
  memset(&l, 0, sizeof l);
  plait_result_t rc = plait_neg_fail_all(&N, PLAIT_ERR_SHUTDOWN, "the differential ended", &l);
  if (rc != PLAIT_SUCCESS) {
    printf("P %d fail_all %d %s\n", stream, (int)rc, plait_last_error());
    tot.errors++;
  } else if (l.n) {
    emit(stream, &N, &l);
  }
  plait_responses_free(&l);
  plait_neg_free(&N);
  plait_cache_free(&C);
  for (int i = 0; i < nops; i++) free(ops[i].meta.splits);
  tot.streams++;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SEED STREAMS [--only N] [--hex]\n", argv[0]);
    return 2;
  }
  char *end;
  uint64_t seed = strtoull(argv[1], &end, 0);
  if (*end) return fprintf(stderr, "neg_diff: SEED '%s' is not a number\n", argv[1]), 2;
  long streams = strtol(argv[2], &end, 0);
  if (*end || streams < 1) return fprintf(stderr, "neg_diff: STREAMS '%s'\n", argv[2]), 2;
  long only = -1;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--hex")) show_hex = 1;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = strtol(argv[++i], NULL, 0);
    else return fprintf(stderr, "neg_diff: unknown argument '%s'\n", argv[i]), 2;
  }
  for (long s = 0; s < streams; s++) {
    rs = seed * 0x100000001b3ull + (uint64_t)s; /* each stream on its own: --only repeats it */
    vclock = 1000.0;
    if (only >= 0 && s != only) continue;
    run_stream((int)s);
  }
  printf("T %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", tot.streams,
         tot.lists, tot.responses, tot.fused, tot.errors);
  return 0;
}
