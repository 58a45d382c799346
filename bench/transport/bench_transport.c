/*
 * bench_transport: transports side by side in one run, interleaved.
 *
 * For each round, for each configuration (by default ofi over FI_PROVIDER=shm,
 * ofi over FI_PROVIDER=tcp, and gloo), it forks N ranks that each load the
 * transport plugin (libplait-transport-<name>.so from PLAIT_PLUGIN_PATH, else
 * the build's lib/ beside this program's folder), start it and call its
 * collective directly, at every size; then it times a single-thread memcpy
 * of each size, the ceiling of any exchange on one machine. After all rounds
 * it prints, per size, the median over rounds of each configuration's time
 * (in each round the median over samples of the slowest rank's time per
 * call, as plait-bench reports the whole stack's)
 * and bus bandwidth, the algorithm the plugin says it runs, and the ratios
 * the issue asks for.
 *
 * It crosses the plugin boundary only through the public plugin ABI
 * (include/plait/transport.h), as a third-party core would: it dlopens the
 * plugin, gives it a bootstrap of its own (shm_bootstrap.c: byte collectives
 * over shared memory between the forked ranks) and the core's own reduction
 * kernels (util/reduce.h, linked from the same objects as libplait's, AVX2
 * clones included, so the plugin alone reduces exactly as in the whole
 * stack); nothing else of libplait's. No coordinator: this measures the
 * transport, not negotiation.
 *
 *   bench_transport [-r ROUNDS] [-n RANKS] [-o OP] [-s MIN:MAX] [-j FILE]
 *                   [LABEL=TRANSPORT[,VAR=value...]]...
 *
 *   -o allreduce (float32 sum; default), broadcast, allgatherv, reducescatter
 *   exit status 1 when a configuration failed (after the table, which says why)
 *   -s 4K:256M   sizes (bytes per rank's buffer), powers of 4 between them
 *   -j FILE      also append the medians as JSON lines (ci/bench): per configuration
 *                and size {"kind":"transport","transport":LABEL,"time_s_median",...},
 *                memcpy as transport "memcpy", and {"kind":"missing","system":
 *                "plugin-LABEL","reason"} for a configuration that failed
 *   e.g. bench_transport 'ring=ofi,FI_PROVIDER=shm,PLAIT_OFI_ALLREDUCE_RING_MIN=0'
 *
 * Bus bandwidth as NCCL's tests define it: bytes / time times 2(n-1)/n for
 * allreduce, (n-1)/n for allgatherv and reducescatter, 1 for broadcast, so
 * the figure compares with the link's (here: memory's) bandwidth.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plait/dtypes.h"
#include "plait/parse_size.h"
#include "plait/transport.h"
#include "shm_bootstrap.h"
#include "util/reduce.h" /* plait_kernels: the core's kernels (src/CMakeLists.txt) */

#define MAX_CONFIGS 8
#define MAX_SIZES 24
#define MAX_ROUNDS 32
#define MAX_ENV 8

typedef struct config {
  char label[64];
  char transport[32];
  char *env[MAX_ENV];
  int nenv;
} config_t;

typedef enum { OP_ALLREDUCE, OP_BROADCAST, OP_ALLGATHERV, OP_REDUCESCATTER } op_t;
static const char *op_names[] = {"allreduce", "broadcast", "allgatherv", "reducescatter"};

#define MAX_RANKS 64
#define MAX_SAMPLES 8

/* Shared with the ranks (mapped before fork): the median over samples of
 * the slowest rank's seconds per call, the algorithm rank 0's plugin names,
 * the first failure of each configuration; each rank's samples of the size
 * being timed. */
typedef struct results {
  double t[MAX_ROUNDS][MAX_CONFIGS][MAX_SIZES];
  double sample[MAX_RANKS][MAX_SAMPLES];
  double memcpy_t[MAX_ROUNDS][MAX_SIZES];
  char algorithm[MAX_CONFIGS][MAX_SIZES][32];
  atomic_int failed[MAX_CONFIGS];
  char error[MAX_CONFIGS][512];
} results_t;

static int nranks = 2, rounds = 3, nsizes = 0, nconfigs = 0;
static op_t op = OP_ALLREDUCE;
static size_t sizes[MAX_SIZES];
static config_t configs[MAX_CONFIGS];
static results_t *res;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void add_config(const char *spec) {
  if (nconfigs == MAX_CONFIGS) {
    fprintf(stderr, "bench_transport: at most %d configurations\n", MAX_CONFIGS);
    exit(2);
  }
  config_t *c = &configs[nconfigs++];
  char *copy = strdup(spec), *eq = strchr(copy, '=');
  if (!eq) {
    fprintf(stderr, "bench_transport: '%s' is not LABEL=TRANSPORT[,VAR=value...]\n", spec);
    exit(2);
  }
  *eq = '\0';
  snprintf(c->label, sizeof c->label, "%s", copy);
  char *save = NULL, *tok = strtok_r(eq + 1, ",", &save);
  snprintf(c->transport, sizeof c->transport, "%s", tok ? tok : "");
  while ((tok = strtok_r(NULL, ",", &save)) && c->nenv < MAX_ENV) c->env[c->nenv++] = strdup(tok);
  free(copy);
}

/* ------------------------------------------------------------------------ */
/* One rank                                                                  */
/* ------------------------------------------------------------------------ */

/* Records the configuration's first failure (any rank) for the report. */
static void fail_config(int ci, int rank, const char *fmt, ...) {
  if (atomic_exchange(&res->failed[ci], 1)) return;
  char msg[448];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(res->error[ci], sizeof res->error[ci], "rank %d: %s", rank, msg);
}

/* The folders plugins are looked up in: PLAIT_PLUGIN_PATH (main sets it to
 * the build's lib/ when unset). */
static const plait_transport_t *load_plugin(const char *name, int ci, int rank) {
  const char *path = getenv("PLAIT_PLUGIN_PATH");
  char tried[1024] = "", file[4096];
  for (const char *dir = path ? path : ""; *dir;) {
    size_t len = strcspn(dir, ":");
    snprintf(file, sizeof file, "%.*s/libplait-transport-%s.so", (int)len, dir, name);
    void *so = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (so) {
      const plait_transport_t *t = dlsym(so, PLAIT_TRANSPORT_SYMBOL);
      if (t && t->abi_version == PLAIT_TRANSPORT_ABI_VERSION &&
          t->struct_size >= PLAIT_TRANSPORT_MIN_SIZE)
        return t;
      fail_config(ci, rank, "%s: no %s of ABI version %d", file, PLAIT_TRANSPORT_SYMBOL,
                  PLAIT_TRANSPORT_ABI_VERSION);
      return NULL;
    }
    size_t used = strlen(tried);
    if (snprintf(tried + used, sizeof tried - used, "%s%s (%s)", used ? ", " : "", file,
                 dlerror()) < 0)
      break;
    dir += len + (dir[len] == ':');
  }
  fail_config(ci, rank, "no transport plugin '%s' in PLAIT_PLUGIN_PATH: tried %s", name,
              tried[0] ? tried : "nothing (PLAIT_PLUGIN_PATH is empty)");
  return NULL;
}

static void log_stderr(int level, const char *subsystem, const char *file, int line,
                       const char *fmt, ...) {
  (void)file, (void)line;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bench_transport: %s [%d]: ", subsystem, level);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static plait_result_t run_op(const plait_transport_t *t, void *st, char *buf, char *out,
                             size_t bytes, size_t *parts) {
  switch (op) {
    case OP_ALLREDUCE: { /* one span in place: what every plugin takes */
      plait_span_t s = {buf, buf, bytes / 4};
      return t->allreduce(st, &s, 1, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0, 1.0);
    }
    case OP_BROADCAST:
      return t->broadcast(st, buf, bytes, 0);
    case OP_ALLGATHERV:
      for (int r = 0; r < nranks; r++) parts[r] = bytes;
      return t->allgatherv(st, buf, parts);
    case OP_REDUCESCATTER:
      for (int r = 0; r < nranks; r++) parts[r] = bytes / 4 / (size_t)nranks;
      return t->reducescatter(st, buf, out, parts, PLAIT_FLOAT32, PLAIT_OP_SUM);
  }
  return PLAIT_ERR_INVALID_ARGUMENT;
}

/* What the plugin says it runs for this size (its whole buffer in bytes). */
static void record_algorithm(const plait_transport_t *t, void *st, int ci, int s) {
  static const uint64_t cap[] = {PLAIT_CAP_ALLREDUCE, PLAIT_CAP_BROADCAST, PLAIT_CAP_ALLGATHERV,
                                 PLAIT_CAP_REDUCESCATTER};
  size_t total = op == OP_ALLGATHERV ? sizes[s] * (size_t)nranks : sizes[s];
  const char *name = PLAIT_TRANSPORT_HAS(t, algorithm) ? t->algorithm(st, cap[op], total) : NULL;
  snprintf(res->algorithm[ci][s], sizeof res->algorithm[ci][s], "%s", name ? name : "-");
}

/* Times every size; 0 when all ran. */
static int time_sizes(const plait_transport_t *t, void *st, int rank, int round, int ci) {
  size_t max = sizes[nsizes - 1], span = op == OP_ALLGATHERV ? max * (size_t)nranks : max;
  void *buf = NULL;
  char *out = malloc(max);
  size_t parts[64];
  if (!out || t->mem_alloc(st, span, &buf)) {
    fail_config(ci, rank, "cannot allocate %zu bytes", span);
    free(out);
    return 1;
  }
  for (size_t i = 0; i < span / 4; i++) ((float *)buf)[i] = 1.0f;
  memset(out, 0, max);
  int fails = 0;
  for (int s = 0; s < nsizes && !fails; s++) {
    size_t bytes = sizes[s];
    /* Enough back-to-back calls per sample that the clock's resolution and a
     * barrier's latency do not matter; at least 5 samples (3 from 64 MiB). */
    int per = (int)(((size_t)8 << 20) / bytes), samples = bytes >= ((size_t)64 << 20) ? 3 : 5;
    if (per < 1) per = 1;
    if (per > 400) per = 400;
    double *v = res->sample[rank];
    if (run_op(t, st, buf, out, bytes, parts)) fails = 1; /* warm-up */
    for (int k = 0; k < samples && !fails; k++) {
      if (t->barrier(st)) fails = 1;
      double t0 = now();
      for (int i = 0; i < per && !fails; i++)
        if (run_op(t, st, buf, out, bytes, parts)) fails = 1;
      v[k] = (now() - t0) / per;
    }
    /* every rank's samples written: the slowest rank's counts, as in
     * plait-bench (the whole stack, which ci/bench compares with this) */
    if (!fails && t->barrier(st)) fails = 1;
    if (fails) fail_config(ci, rank, "%zu bytes: %s", bytes, t->last_error(st));
    else if (rank == 0) {
      double worst[MAX_SAMPLES];
      for (int k = 0; k < samples; k++) {
        worst[k] = 0;
        for (int r = 0; r < nranks; r++)
          if (res->sample[r][k] > worst[k]) worst[k] = res->sample[r][k];
      }
      res->t[round][ci][s] = median(worst, samples);
      record_algorithm(t, st, ci, s);
    }
    /* rank 0 has read them before anyone writes the next size's */
    if (!fails && t->barrier(st)) fails = 1;
  }
  t->mem_free(st, buf);
  free(out);
  return fails;
}

static int rank_main(shm_block_t *block, int rank, int round, int ci) {
  const plait_transport_t *t = load_plugin(configs[ci].transport, ci, rank);
  if (!t) return 1;
  shm_rank_t boot_rank;
  plait_bootstrap_t boot;
  shm_bootstrap_init(&boot_rank, block, rank, nranks, 60.0, &boot);
  plait_transport_init_args_t args;
  memset(&args, 0, sizeof args);
  args.size = sizeof args;
  args.rank = args.local_rank = rank;
  args.nranks = args.local_size = nranks;
  args.cross_rank = 0;
  args.cross_size = 1;
  args.bootstrap = &boot;
  args.log = log_stderr;
  args.log_level = PLAIT_LOG_WARN;
  args.timeout_s = 60.0;
  args.reduce = plait_reduce; /* the very kernels the core hands in (engine.c) */
  args.scale = plait_scale;
  args.divide = plait_divide;
  args.reduce_scale = plait_reduce_scale;
  args.host_address = "127.0.0.1";
  void *st = NULL;
  plait_result_t rc = t->init(&args, &st);
  if (rc) {
    fail_config(ci, rank, "%s init: %s: %s", configs[ci].transport,
                plait_result_name_inline(rc), t->last_error(NULL));
    shm_block_fail(block);
    return 1;
  }
  int fails = time_sizes(t, st, rank, round, ci);
  if (fails) shm_block_fail(block);
  t->finalize(st);
  return fails;
}

/* ------------------------------------------------------------------------ */
/* The job                                                                   */
/* ------------------------------------------------------------------------ */

/* Runs configuration ci once on nranks forked ranks; 0 when all succeeded.
 * A rank that fails or dies fails the bootstrap, so the others stop waiting
 * for it. */
static int run_config(int round, int ci) {
  const config_t *c = &configs[ci];
  shm_block_t *block = shm_block_new(nranks);
  if (!block) {
    fail_config(ci, -1, "mmap of the bootstrap block failed: %s", strerror(errno));
    return 1;
  }
  fflush(stdout);
  pid_t pids[64];
  int started = 0;
  for (int r = 0; r < nranks; r++, started++) {
    pids[r] = fork();
    if (pids[r] < 0) {
      fail_config(ci, r, "fork failed: %s", strerror(errno));
      shm_block_fail(block);
      break;
    }
    if (pids[r] == 0) {
      for (int i = 0; i < c->nenv; i++) putenv(c->env[i]);
      _exit(rank_main(block, r, round, ci));
    }
  }
  int bad = started < nranks;
  for (int left = started; left > 0; left--) {
    int st = 0;
    if (waitpid(-1, &st, 0) < 0) break; /* no signal handlers here: no EINTR */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      bad = 1;
      if (WIFSIGNALED(st)) fail_config(ci, -1, "a rank died of signal %d", WTERMSIG(st));
      shm_block_fail(block);
    }
  }
  shm_block_free(block);
  return bad;
}

static void time_memcpy(int round) {
  size_t max = sizes[nsizes - 1];
  char *a = malloc(max), *b = malloc(max);
  if (!a || !b) exit(1);
  memset(a, 1, max);
  memset(b, 2, max);
  for (int s = 0; s < nsizes; s++) {
    size_t bytes = sizes[s];
    int per = (int)(((size_t)64 << 20) / bytes);
    if (per < 2) per = 2;
    double v[5];
    for (int k = 0; k < 5; k++) {
      double t0 = now();
      for (int i = 0; i < per; i++) memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
      v[k] = (now() - t0) / per;
    }
    res->memcpy_t[round][s] = median(v, 5);
  }
  free(a);
  free(b);
}

/* ------------------------------------------------------------------------ */
/* Report                                                                    */
/* ------------------------------------------------------------------------ */

static double busbw_factor(void) {
  switch (op) {
    case OP_ALLREDUCE: return 2.0 * (nranks - 1) / nranks;
    case OP_ALLGATHERV: return (double)(nranks - 1); /* bytes is one rank's part */
    case OP_REDUCESCATTER: return (double)(nranks - 1) / nranks;
    default: return 1.0;
  }
}

static double med_t(int ci, int s) {
  double v[MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) v[r] = res->t[r][ci][s];
  return median(v, rounds);
}

static void fmt_size(size_t b, char *out, size_t len) {
  if (b >= ((size_t)1 << 20)) snprintf(out, len, "%zu MiB", b >> 20);
  else snprintf(out, len, "%zu KiB", b >> 10);
}

static void report(void) {
  struct utsname u;
  uname(&u);
  printf("\n== %s, float32 sum where it reduces, %d ranks on one host (%s %s, %ld CPUs)\n",
         op_names[op], nranks, u.sysname, u.release, sysconf(_SC_NPROCESSORS_ONLN));
  printf("   median of %d interleaved rounds; time per call in us, bus bandwidth in GB/s "
         "(1 GB = 1e9 B)\n\n",
         rounds);
  printf("| size |");
  for (int c = 0; c < nconfigs; c++)
    printf(" %s algorithm | %s us | %s GB/s |", configs[c].label, configs[c].label,
           configs[c].label);
  printf(" memcpy GB/s |\n|---|");
  for (int c = 0; c < nconfigs; c++) printf("---|---:|---:|");
  printf("---:|\n");
  double f = busbw_factor();
  for (int s = 0; s < nsizes; s++) {
    char sz[32];
    fmt_size(sizes[s], sz, sizeof sz);
    printf("| %s |", sz);
    for (int c = 0; c < nconfigs; c++) {
      double t = med_t(c, s);
      if (res->error[c][0] || t <= 0)
        printf(" %s | failed | - |", res->algorithm[c][s][0] ? res->algorithm[c][s] : "-");
      else
        printf(" %s | %.1f | %.2f |", res->algorithm[c][s], t * 1e6,
               (double)sizes[s] * f / t / 1e9);
    }
    double v[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) v[r] = res->memcpy_t[r][s];
    printf(" %.2f |\n", (double)sizes[s] / median(v, rounds) / 1e9);
  }
  for (int c = 0; c < nconfigs; c++)
    if (res->error[c][0]) printf("\n%s failed: %s\n", configs[c].label, res->error[c]);
  /* The goals, when the default configurations ran. */
  int shm = -1, gloo = -1;
  for (int c = 0; c < nconfigs; c++) {
    if (!strcmp(configs[c].label, "ofi/shm")) shm = c;
    if (!strcmp(configs[c].label, "gloo")) gloo = c;
  }
  for (int s = 0; s < nsizes && shm >= 0 && gloo >= 0; s++) {
    char sz[32];
    fmt_size(sizes[s], sz, sizeof sz);
    double ts = med_t(shm, s), tg = med_t(gloo, s);
    if (s == 0)
      printf("\n%s: ofi/shm takes %.1f us per call, gloo %.1f us (%.2fx)\n", sz, ts * 1e6,
             tg * 1e6, tg / ts);
    if (sizes[s] != ((size_t)64 << 20)) continue;
    double v[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) v[r] = res->memcpy_t[r][s];
    double mc = (double)sizes[s] / median(v, rounds) / 1e9, bw = (double)sizes[s] * f / ts / 1e9;
    printf("%s: ofi/shm %.2f GB/s is %.2fx gloo's %.2f GB/s and %.2fx memcpy's %.2f GB/s\n", sz,
           bw, tg / ts, (double)sizes[s] * f / tg / 1e9, bw / mc, mc);
  }
}

/* -j FILE: the medians as JSON lines. 0, or -1 when FILE cannot be written. */
static int write_json(const char *path) {
  FILE *f = fopen(path, "a");
  if (!f) {
    fprintf(stderr, "bench_transport: -j %s: %s\n", path, strerror(errno));
    return -1;
  }
  double bf = busbw_factor();
  for (int c = 0; c < nconfigs; c++) {
    if (res->error[c][0]) {
      fprintf(f, "{\"kind\":\"missing\",\"system\":\"plugin-%s\",\"ranks\":%d,"
              "\"reason\":\"", configs[c].label, nranks);
      for (const char *e = res->error[c]; *e; e++) /* a JSON string: no quotes or controls */
        fputc(*e == '"' || *e == '\\' || (unsigned char)*e < 0x20 ? ' ' : *e, f);
      fprintf(f, "\"}\n");
      continue;
    }
    for (int s = 0; s < nsizes; s++) {
      double t = med_t(c, s);
      if (t <= 0) continue;
      fprintf(f, "{\"kind\":\"transport\",\"collective\":\"%s\",\"transport\":\"%s\","
              "\"ranks\":%d,\"bytes\":%zu,\"rounds\":%d,\"time_s_median\":%.9g,"
              "\"algbw_GBps\":%.6g,\"busbw_GBps\":%.6g,\"algorithm\":\"%s\"}\n",
              op_names[op], configs[c].label, nranks, sizes[s], rounds, t,
              (double)sizes[s] / t / 1e9, (double)sizes[s] * bf / t / 1e9, res->algorithm[c][s]);
    }
  }
  for (int s = 0; s < nsizes; s++) {
    double v[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) v[r] = res->memcpy_t[r][s];
    double t = median(v, rounds);
    fprintf(f, "{\"kind\":\"transport\",\"collective\":\"memcpy\",\"transport\":\"memcpy\","
            "\"ranks\":%d,\"bytes\":%zu,\"rounds\":%d,\"time_s_median\":%.9g,"
            "\"algbw_GBps\":%.6g}\n", nranks, sizes[s], rounds, t, (double)sizes[s] / t / 1e9);
  }
  return fclose(f) ? -1 : 0;
}

int main(int argc, char **argv) {
  int opt;
  const char *json = NULL;
  size_t lo = 4 << 10, hi = (size_t)256 << 20;
  while ((opt = getopt(argc, argv, "r:n:o:s:j:h")) != -1) {
    switch (opt) {
      case 'r': rounds = atoi(optarg); break;
      case 'n': nranks = atoi(optarg); break;
      case 'j': json = optarg; break;
      case 'o':
        for (op_t o = OP_ALLREDUCE; o <= OP_REDUCESCATTER; o++)
          if (!strcmp(optarg, op_names[o])) op = o;
        if (strcmp(optarg, op_names[op])) {
          fprintf(stderr, "bench_transport: -o %s: expected allreduce, broadcast, "
                          "allgatherv or reducescatter\n", optarg);
          return 2;
        }
        break;
      case 's': {
        char *colon = strchr(optarg, ':');
        uint64_t min = 0, max = 0;
        if (!colon || plait_parse_size_n(optarg, (size_t)(colon - optarg), &min) ||
            plait_parse_size(colon + 1, &max) || min < 64 || max < min || max > SIZE_MAX) {
          fprintf(stderr, "bench_transport: -s %s: expected MIN:MAX such as 4K:256M\n", optarg);
          return 2;
        }
        lo = (size_t)min, hi = (size_t)max;
        break;
      }
      default:
        fprintf(stderr, "usage: %s [-r ROUNDS] [-n RANKS] [-o OP] [-s MIN:MAX] [-j FILE] "
                        "[LABEL=TRANSPORT[,VAR=value...]]...\n", argv[0]);
        return opt == 'h' ? 0 : 2;
    }
  }
  if (rounds < 1 || rounds > MAX_ROUNDS || nranks < 2 || nranks > 64) {
    fprintf(stderr, "bench_transport: -r must be 1..%d and -n 2..64\n", MAX_ROUNDS);
    return 2;
  }
  for (size_t s = lo; s <= hi && nsizes < MAX_SIZES; s *= 4) sizes[nsizes++] = s;
  for (int i = optind; i < argc; i++) add_config(argv[i]);
  if (nconfigs == 0) {
    add_config("ofi/shm=ofi,FI_PROVIDER=shm");
    add_config("ofi/tcp=ofi,FI_PROVIDER=tcp");
    add_config("gloo=gloo");
  }
  /* The plugins sit in ../lib beside this program's folder in the build. */
  if (!getenv("PLAIT_PLUGIN_PATH")) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 16);
    if (n > 0) {
      exe[n] = '\0';
      char *slash = strrchr(exe, '/');
      if (slash) {
        strcpy(slash, "/../lib");
        setenv("PLAIT_PLUGIN_PATH", exe, 1);
      }
    }
  }
  res = mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (res == MAP_FAILED) return 1;
  memset(res, 0, sizeof *res);
  printf("bench_transport: %s at %d ranks,", op_names[op], nranks);
  for (int c = 0; c < nconfigs; c++) printf(" %s", configs[c].label);
  printf(" and memcpy, %d rounds interleaved\n", rounds);
  for (int r = 0; r < rounds; r++) {
    printf("round %d:", r + 1);
    for (int c = 0; c < nconfigs; c++) {
      printf(" %s%s", configs[c].label, run_config(r, c) ? " (failed)" : "");
      fflush(stdout);
    }
    time_memcpy(r);
    printf(" memcpy\n");
  }
  report();
  if (json && write_json(json)) return 2;
  int failed = 0;
  for (int c = 0; c < nconfigs; c++) failed |= res->error[c][0] != '\0';
  return failed; /* 1 when a configuration failed: the table says which and why */
}
