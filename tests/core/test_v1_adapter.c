/*
 * The core's v1 adapter (src/engine/plugin_v1.c) with real collectives: the
 * ofi plugin (ABI v2) and the same plugin behind frozen version-1 tables
 * (tests/plugins/fixtures/older: ofi_v1s with allreduce, allreduce_scaled and
 * allreduce_spans; ofi_v1 with allreduce only) run one workload through the
 * whole stack, on 2 ranks over shm: fused groups reduced where they are
 * (spans) or through the fusion buffer, lone tensors in and out of place,
 * AVERAGE, prescale and postscale, float32, float64, int32, float16. Every
 * rank's outputs must be the same bytes over all three tables (2 ranks: a
 * sum does not depend on the order the reduction takes), and exact against
 * the oracle.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops_util.h"

#define NT 20

typedef struct {
  const char *transport;
  char dir[128];
} arg_t;

/* One group (n tensors of count[i] elements of d), written to f in order. */
static int group(int rank, int nranks, FILE *f, plait_dtype_t d, plait_op_t op, size_t n,
                 const size_t *count, double pre, double post, unsigned salt) {
  size_t es = plait_dtype_size(d);
  void *in[NT], *out[NT];
  plait_tensor_t ti[NT], to[NT];
  char names[NT][32];
  const char *nm[NT];
  for (size_t i = 0; i < n; i++) {
    in[i] = malloc(count[i] * es + 1);
    out[i] = i % 3 == 1 ? malloc(count[i] * es + 1) : in[i]; /* some out of place */
    CHECK(in[i] && out[i], "out of memory");
    ops_fill(d, op, rank, in[i], count[i], salt + (unsigned)i);
    snprintf(names[i], sizeof names[i], "v1.%u.%zu", salt, i);
    nm[i] = names[i];
    OK(plait_tensor_1d(&ti[i], in[i], count[i], d));
    OK(plait_tensor_1d(&to[i], out[i], count[i], d));
  }
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.prescale_factor = pre;
  o.postscale_factor = post;
  plait_handle_t *h = NULL;
  if (n == 1)
    OK(plait_allreduce_async(nm[0], &ti[0], &to[0], op, &o, &h));
  else
    OK(plait_grouped_allreduce_async(n, nm, ti, to, op, &o, &h));
  OK(plait_wait(h, -1));
  plait_release(h);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    double got, want;
    long at = ops_check(d, op, nranks, out[i], count[i], salt + (unsigned)i, pre, post, &got,
                        &want);
    if (at >= 0 && !bad) {
      ops_say_at(rank, __FILE__, __LINE__, "%s: group %u tensor %zu: element %ld is %g, "
                 "expected %g", plait_dtype_name(d), salt, i, at, got, want);
      bad = 1;
    }
    if (fwrite(out[i], es, count[i], f) != count[i]) bad = 1;
    if (out[i] != in[i]) free(out[i]);
    free(in[i]);
  }
  return bad;
}

static int body(int rank, int nranks, void *p) {
  const arg_t *a = p;
  char file[256];
  snprintf(file, sizeof file, "%s/%s.%d", a->dir, a->transport, rank);
  FILE *f = fopen(file, "wb");
  CHECK(f != NULL, "cannot write %s", file);
  size_t mixed[NT], tiny[NT], one[1] = {70001};
  for (size_t i = 0; i < NT; i++) mixed[i] = 1000 + 3001 * i, tiny[i] = 1 + i % 7;
  int bad = 0;
  unsigned salt = 0;
  const plait_dtype_t ds[] = {PLAIT_FLOAT32, PLAIT_FLOAT64, PLAIT_INT32, PLAIT_FLOAT16};
  for (size_t k = 0; k < sizeof ds / sizeof ds[0] && !bad; k++) {
    plait_dtype_t d = ds[k];
    int fl = d != PLAIT_INT32;
    bad |= group(rank, nranks, f, d, PLAIT_OP_SUM, NT, mixed, 1.0, 1.0, salt += 100);
    bad |= group(rank, nranks, f, d, fl ? PLAIT_OP_AVERAGE : PLAIT_OP_SUM, NT, mixed, 1.0,
                 fl ? 0.5 : 1.0, salt += 100);
    bad |= group(rank, nranks, f, d, PLAIT_OP_SUM, NT, tiny, 1.0, fl ? 0.25 : 1.0, salt += 100);
    bad |= group(rank, nranks, f, d, PLAIT_OP_SUM, NT, mixed, 2.0, 1.0, salt += 100);
    bad |= group(rank, nranks, f, d, PLAIT_OP_MAX, NT, mixed, 1.0, 1.0, salt += 100);
    bad |= group(rank, nranks, f, d, PLAIT_OP_SUM, 1, one, 1.0, 1.0, salt += 100);
    bad |= group(rank, nranks, f, d, PLAIT_OP_SUM, 1, one, fl ? 2.0 : 1.0, fl ? 1.0 / 3 : 1.0,
                 salt += 100);
  }
  fclose(f);
  return bad;
}

static int same_files(const char *a, const char *b, char *why, size_t len) {
  FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
  int same = x && y;
  long at = 0;
  for (int cx = 0, cy = 0; same && cx != EOF; at++) {
    cx = fgetc(x), cy = fgetc(y);
    same = cx == cy;
  }
  if (!same) snprintf(why, len, "%s and %s differ at byte %ld", a, b, at - 1);
  if (x) fclose(x);
  if (y) fclose(y);
  return same;
}

Test(v1_adapter, results_identical_to_the_v2_plugin, .timeout = 300) {
  const char *need[] = {PLAIT_TEST_LIB_DIR "/libplait-transport-ofi.so",
                        PLAIT_TEST_PLUGIN_DIR "/libplait-transport-ofi_v1s.so",
                        PLAIT_TEST_PLUGIN_DIR "/libplait-transport-ofi_v1.so"};
  for (int i = 0; i < 3; i++)
    if (access(need[i], R_OK))
      cr_skip_test("the ofi transport plugin was not built (is libfabric-dev installed?): no %s",
                   need[i]);
  char dir[] = "/tmp/plait-v1-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  const char *ts[] = {"ofi", "ofi_v1s", "ofi_v1"};
  for (int t = 0; t < 3; t++) {
    char tr[64];
    snprintf(tr, sizeof tr, "PLAIT_TRANSPORT=%s", ts[t]);
    const char *env[] = {tr, "FI_PROVIDER=shm", NULL};
    arg_t a = {ts[t], ""};
    snprintf(a.dir, sizeof a.dir, "%s", dir);
    cr_assert_eq(ops_run(2, env, 120, body, &a), 0, "%s: a rank failed (see above)", ts[t]);
  }
  for (int r = 0; r < 2; r++)
    for (int t = 1; t < 3; t++) {
      char base[256], other[256], why[600];
      snprintf(base, sizeof base, "%s/ofi.%d", dir, r);
      snprintf(other, sizeof other, "%s/%s.%d", dir, ts[t], r);
      cr_expect(same_files(base, other, why, sizeof why), "rank %d: %s", r, why);
      unlink(other);
    }
  for (int r = 0; r < 2; r++) {
    char base[256];
    snprintf(base, sizeof base, "%s/ofi.%d", dir, r);
    unlink(base);
  }
  rmdir(dir);
}
