/*
 * The hierarchical allreduce (src/engine/transport/hier_plan.h) against the
 * flat one, on forked ranks whose hosts are faked with PLAIT_HOSTNAME: the
 * same job runs with PLAIT_HIERARCHICAL_ALLREDUCE=off, on and auto; every
 * rank writes each result to a file; integer results must be the same bit
 * for bit as flat, floating-point ones within a relative tolerance, and
 * every rank of a job must hold the same bytes. Layouts: 2 hosts x 2 ranks
 * (contiguous and interleaved ranks), 3 hosts x 2 ranks, and 2 hosts of
 * unequal counts (runs flat: no hierarchical allreduce is logged); auto
 * runs it on the interleaved layout, and on 2 x 2 contiguous where the
 * steps within the host run on shm (hier_plan.h: the gain), per response:
 * a 28-byte allreduce flat, a 4 MB one hierarchical. Each job
 * logs at debug level to a file per rank, where the test looks for the
 * hierarchical allreduce having run (or not) and for what its steps within
 * the host ran on: libfabric's shm through a second ofi instance where the
 * ofi plugin is built (hier_local.h), the job's gloo when
 * PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=job.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops_util.h"

typedef struct {
  plait_dtype_t dt;
  plait_op_t op;
  size_t count;
  int in_place;
  double pre, post;
} case_t;

/* counts: below the ranks per host (flat even when on), uneven shards, above
 * the 1 MiB auto threshold; ops and scale factors through the shards */
static const case_t CASES[] = {
    {PLAIT_INT32, PLAIT_OP_SUM, 1, 1, 1, 1},
    {PLAIT_INT32, PLAIT_OP_SUM, 7, 0, 1, 1},
    {PLAIT_INT64, PLAIT_OP_SUM, 300001, 1, 1, 1},
    {PLAIT_INT32, PLAIT_OP_SUM, 1000003, 0, 1, 1},
    {PLAIT_INT32, PLAIT_OP_MAX, 262147, 1, 1, 1},
    {PLAIT_FLOAT32, PLAIT_OP_SUM, 500009, 1, 1, 1},
    {PLAIT_FLOAT32, PLAIT_OP_AVERAGE, 400003, 0, 1, 1},
    {PLAIT_FLOAT64, PLAIT_OP_SUM, 200003, 1, 0.5, 3.0},
    {PLAIT_FLOAT16, PLAIT_OP_SUM, 700001, 1, 1, 1},
};
#define NCASES (sizeof CASES / sizeof CASES[0])
#define NFUSED 6 /* submitted together: one fused response of 6 x 80,000 floats */
#define FUSED_COUNT 80000

static char dir[256];
static const char *mode_now;
static int layout_now; /* 0: 2 x 2 contiguous, 1: 2 x 2 interleaved, 2: 3 x 2, 3: 3 + 1 */

static const char *host_of(int rank) {
  static const char *names[] = {"hostA", "hostB", "hostC"};
  switch (layout_now) {
  case 0: return names[rank / 2];
  case 1: return names[rank % 2];
  case 2: return names[rank / 2];
  default: return names[rank < 3 ? 0 : 1];
  }
}

#define NO_SHM_ANY (-2) /* no_shm_rank: every rank's FI_PROVIDER=tcp */
static int no_shm_rank = -1; /* this rank's FI_PROVIDER=tcp leaves libfabric's shm out */

static int before(int rank) {
  setenv("PLAIT_HOSTNAME", host_of(rank), 1);
  if (rank == no_shm_rank || no_shm_rank == NO_SHM_ANY) setenv("FI_PROVIDER", "tcp", 1);
  unsetenv("PLAIT_LOCAL_RANK"); /* the layout from the hosts */
  unsetenv("PLAIT_LOCAL_SIZE");
  char log[320];
  snprintf(log, sizeof log, "%s/%s.rank%d.log", dir, mode_now, rank);
  return freopen(log, "w", stderr) ? 0 : 1;
}

static void fill(plait_dtype_t dt, void *p, size_t n, int rank, size_t k) {
  for (size_t i = 0; i < n; i++) {
    long long v = (long long)((i * 2654435761u + k * 97 + (size_t)rank * 7919) % 2001) - 1000;
    switch (dt) {
    case PLAIT_INT32: ((int32_t *)p)[i] = (int32_t)(v * 1048583); break; /* wraps */
    case PLAIT_INT64: ((int64_t *)p)[i] = v * 4611686018427387LL; break;
    case PLAIT_FLOAT32: ((float *)p)[i] = (float)v / 7.0f; break;
    case PLAIT_FLOAT64: ((double *)p)[i] = (double)v / 3.0; break;
    case PLAIT_FLOAT16: ((uint16_t *)p)[i] = (uint16_t)(0x3C00 + (v & 0x1FF)); break;
    default: break;
    }
  }
}

static plait_tensor_t tensor(void *data, plait_dtype_t dt, size_t n) {
  plait_tensor_t t = {sizeof t, data, dt, PLAIT_DEVICE_HOST, 1, {(int64_t)n}};
  return t;
}

static int save(int rank, const char *what, const void *p, size_t bytes) {
  char path[320];
  snprintf(path, sizeof path, "%s/%s.rank%d.%s", dir, mode_now, rank, what);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(p, 1, bytes, f) == bytes;
  if (f) fclose(f);
  return ok ? 0 : 1;
}

static int body(int rank, int nranks, void *arg) {
  (void)nranks, (void)arg;
  for (size_t k = 0; k < NCASES; k++) {
    const case_t *c = &CASES[k];
    size_t bytes = c->count * plait_dtype_size(c->dt);
    void *in = malloc(bytes), *out = c->in_place ? in : malloc(bytes);
    CHECK(in && out, "out of memory");
    fill(c->dt, in, c->count, rank, k);
    plait_tensor_t ti = tensor(in, c->dt, c->count), to = tensor(out, c->dt, c->count);
    plait_op_options_t o = {sizeof o, c->pre, c->post, NULL, NULL, 0, NULL};
    char name[32];
    snprintf(name, sizeof name, "case%zu", k);
    plait_handle_t *h = NULL;
    CHECK(plait_allreduce_async(name, &ti, &to, c->op, &o, &h) == PLAIT_SUCCESS, "%s: %s", name,
          plait_last_error());
    CHECK(plait_wait(h, 60) == PLAIT_SUCCESS, "%s: %s", name, plait_last_error());
    plait_release(h);
    snprintf(name, sizeof name, "case%zu", k);
    CHECK(save(rank, name, out, bytes) == 0, "cannot write %s", name);
    if (out != in) free(out);
    free(in);
  }
  float *f[NFUSED];
  plait_handle_t *hs[NFUSED];
  for (int i = 0; i < NFUSED; i++) {
    f[i] = malloc(FUSED_COUNT * sizeof(float));
    CHECK(f[i], "out of memory");
    fill(PLAIT_FLOAT32, f[i], FUSED_COUNT, rank, 100 + (size_t)i);
    plait_tensor_t t = tensor(f[i], PLAIT_FLOAT32, FUSED_COUNT);
    char name[32];
    snprintf(name, sizeof name, "fused%d", i);
    CHECK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &hs[i]) == PLAIT_SUCCESS, "%s",
          plait_last_error());
  }
  for (int i = 0; i < NFUSED; i++) {
    CHECK(plait_wait(hs[i], 60) == PLAIT_SUCCESS, "%s", plait_last_error());
    plait_release(hs[i]);
    char name[32];
    snprintf(name, sizeof name, "fused%d", i);
    CHECK(save(rank, name, f[i], FUSED_COUNT * sizeof(float)) == 0, "cannot write");
    free(f[i]);
  }
  return 0;
}

static const char *local_env; /* PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=..., or NULL */

static int run_job(int nranks, const char *mode) {
  char setting[64];
  snprintf(setting, sizeof setting, "PLAIT_HIERARCHICAL_ALLREDUCE=%s", mode);
  const char *env[] = {"PLAIT_LOG_LEVEL=debug", local_env, NULL};
  mode_now = mode;
  return ops_run_hooked(nranks, setting, env, 120, body, NULL, before, NULL);
}

static void *slurp(const char *mode, int rank, const char *what, size_t *len) {
  char path[320];
  snprintf(path, sizeof path, "%s/%s.rank%d.%s", dir, mode, rank, what);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  *len = p && fread(p, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
  if (p) p[*len] = '\0';
  fclose(f);
  return p;
}

static double as_double(plait_dtype_t dt, const void *p, size_t i) {
  if (dt == PLAIT_FLOAT32) return ((const float *)p)[i];
  if (dt == PLAIT_FLOAT64) return ((const double *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i]; /* float16 */
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
  return (h & 0x8000) ? -v : v;
}

/* Compares one result of `mode` with flat's (rank 0's) and rank 0's with
 * every other rank's of the same job. */
static void compare(int nranks, const char *mode, const char *what, plait_dtype_t dt) {
  size_t nf = 0, n0 = 0, nr = 0;
  char *flat = slurp("off", 0, what, &nf), *mine = slurp(mode, 0, what, &n0);
  cr_assert(flat && mine && nf == n0 && nf, "%s %s: results missing", mode, what);
  for (int r = 1; r < nranks; r++) {
    char *other = slurp(mode, r, what, &nr);
    cr_assert(other && nr == n0 && !memcmp(other, mine, n0), "%s %s: rank %d differs from rank 0",
              mode, what, r);
    free(other);
  }
  if (dt != PLAIT_FLOAT32 && dt != PLAIT_FLOAT64 && dt != PLAIT_FLOAT16) {
    cr_expect(!memcmp(flat, mine, nf), "%s %s: integers differ from flat", mode, what);
  } else {
    size_t es = plait_dtype_size(dt), bad = 0;
    /* relative to the inputs' magnitude (|v| <= 1000 / 7 in float32, 1000 / 3
     * in float64, <= 2 in float16): a sum that cancels keeps their rounding */
    double tol = dt == PLAIT_FLOAT16 ? 2e-3 : dt == PLAIT_FLOAT32 ? 1e-6 : 1e-13;
    double scale = dt == PLAIT_FLOAT16 ? 8.0 : 1000.0;
    for (size_t i = 0; i < nf / es; i++) {
      double a = as_double(dt, flat, i), b = as_double(dt, mine, i);
      if (fabs(a - b) > tol * fmax(scale, fabs(a))) bad++;
    }
    cr_expect_eq(bad, 0, "%s %s: %zu elements beyond tolerance", mode, what, bad);
  }
  free(flat);
  free(mine);
}

static int logged(const char *mode, int rank, const char *text) {
  size_t n = 0;
  char *log = slurp(mode, rank, "log", &n);
  int found = log && strstr(log, text) != NULL;
  free(log);
  return found;
}
static int logged_hier(const char *mode, int rank) {
  return logged(mode, rank, "hierarchical allreduce of");
}

/* 1 when this build made the ofi plugin: the local set then runs over its
 * shm provider (hier_local.h) unless FI_PROVIDER leaves shm out. */
static int shm_expected(void) {
  FILE *f = fopen(PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so", "rb");
  if (f) fclose(f);
  const char *prov = getenv("FI_PROVIDER");
  return f != NULL && (!prov || strstr(prov, "shm"));
}

/* Where the hierarchical allreduce ran (the "on" job), each step's debug
 * line names what it ran on: within the host over `local`. */
static void check_local_over(int nranks, const char *local) {
  char want[64];
  snprintf(want, sizeof want, "within the host (%s)", local);
  for (int r = 0; r < nranks; r++)
    cr_expect(logged("on", r, want), "rank %d: no step '%s' in its log (logs in %s)", r, want,
              dir);
}

/* Per response under auto: the 7-element case (28 bytes, below the 1 MiB
 * threshold) flat, the 1000003-element one (4 MB) hierarchical where auto
 * runs it at all; under on both hierarchical. */
static void check_per_response(int nranks, int gains) {
  for (int r = 0; r < nranks; r++) {
    cr_expect(logged("on", r, "hierarchical allreduce of 7 elements"), "rank %d: the small "
              "response ran flat while on", r);
    cr_expect(!logged("auto", r, "hierarchical allreduce of 7 elements"), "rank %d: the small "
              "response ran hierarchically under auto (below PLAIT_HIERARCHICAL_THRESHOLD)", r);
    cr_expect_eq(logged("auto", r, "hierarchical allreduce of 1000003 elements"), gains,
                 "rank %d: the 4 MB response %s under auto", r, gains ? "ran flat" : "did not");
  }
}

/* fits: the layout fits (on runs hierarchically); gain: how many times
 * fewer bytes it sends across hosts than the flat ring (hier_plan.h): auto
 * runs it from 2x, from 1.5x where the steps within the host run on shm */
static void check_layout(int layout, int nranks, int fits, double gain) {
  OPS_REQUIRE_GLOO();
  layout_now = layout;
  snprintf(dir, sizeof dir, "/tmp/plait-hier-XXXXXX");
  cr_assert(mkdtemp(dir), "mkdtemp");
  const char *modes[] = {"off", "on", "auto"};
  for (int m = 0; m < 3; m++)
    cr_assert_eq(run_job(nranks, modes[m]), 0, "the %s job failed (logs in %s)", modes[m], dir);
  for (int m = 1; m < 3; m++) {
    for (size_t k = 0; k < NCASES; k++) {
      char what[32];
      snprintf(what, sizeof what, "case%zu", k);
      compare(nranks, modes[m], what, CASES[k].dt);
    }
    for (int i = 0; i < NFUSED; i++) {
      char what[32];
      snprintf(what, sizeof what, "fused%d", i);
      compare(nranks, modes[m], what, PLAIT_FLOAT32);
    }
  }
  int shm = !local_env && no_shm_rank == -1 && shm_expected();
  int gains = fits && gain >= (shm ? 1.5 : 2.0);
  for (int r = 0; r < nranks; r++) {
    cr_expect(!logged_hier("off", r), "rank %d ran a hierarchical allreduce while off", r);
    cr_expect_eq(logged_hier("on", r), fits, "rank %d: hierarchical allreduce %s while on", r,
                 fits ? "never ran" : "ran");
    cr_expect_eq(logged_hier("auto", r), gains, "rank %d: hierarchical allreduce %s under auto",
                 r, gains ? "never ran" : "ran");
  }
  if (fits) check_per_response(nranks, gains);
  if (fits) check_local_over(nranks, shm ? "ofi shm" : "gloo");
  for (int r = 0; fits && no_shm_rank != -1 && r < nranks; r++)
    cr_expect(logged("on", r, "not on shared memory"), "rank %d did not say why the local set "
              "is not on shared memory", r);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (!getenv("HIER_KEEP")) (void)!system(cmd);
}

/* placed by block: gain 1.5, so auto runs it (per response) where the
 * steps within the host run on shm, and not on gloo */
Test(hier_allreduce, two_hosts_of_two_contiguous_ranks, .timeout = 240) {
  check_layout(0, 4, 1, 1.5);
}
Test(hier_allreduce, two_hosts_of_two_interleaved_ranks, .timeout = 240) {
  check_layout(1, 4, 1, 3.0);
}
Test(hier_allreduce, three_hosts_of_two_ranks, .timeout = 300) { check_layout(2, 6, 1, 1.25); }
/* The local set on the job's transport (gloo) when told, results as above. */
Test(hier_allreduce, local_steps_on_the_job_transport_when_told, .timeout = 240) {
  local_env = "PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=job";
  check_layout(0, 4, 1, 1.5);
}
/* One rank cannot open shm: every rank keeps the local set on gloo (all
 * start the shm instance or none), results as above. */
Test(hier_allreduce, local_steps_on_the_job_transport_when_a_rank_lacks_shm, .timeout = 240) {
  no_shm_rank = 3;
  check_layout(0, 4, 1, 1.5);
}
/* No rank can open shm (all agree on none): every rank keeps the local set
 * on gloo; under auto the contiguous layout (gain 1.5) then runs flat. */
Test(hier_allreduce, local_steps_on_the_job_transport_when_no_rank_has_shm, .timeout = 240) {
  no_shm_rank = NO_SHM_ANY;
  check_layout(0, 4, 1, 1.5);
}
Test(hier_allreduce, hosts_of_unequal_counts_run_flat, .timeout = 240) {
  check_layout(3, 4, 0, 0.0);
}
