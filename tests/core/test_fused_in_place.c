/*
 * A fused allreduce reduced where its tensors are (the transport's
 * allreduce_spans, execute.c): through the whole stack over ofi (shm and
 * tcp) and gloo (which has no allreduce_spans: the fusion buffer), a group
 * of 64 KiB gradients, in and out of place, AVERAGE with postscale; the
 * results exact on every rank, and over ofi no copy into or out of the
 * fusion buffer (plait_stats). Then what must still go through the buffer:
 * the same tensor twice in one group, a prescale factor; and a group of
 * tiny tensors, which the plugin packs itself. A transport that cannot start
 * here is skipped with the reason.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_util.h"

#define N 24
#define COUNT 16384 /* 64 KiB of float32 */

typedef struct {
  const char *transport;
} arg_t;

/* One group of n tensors; twice: every input is also the output of the
 * tensor after it (the same memory twice in one response). */
static int group(int rank, int nranks, size_t n, size_t count, int twice, double pre,
                 double post, unsigned salt, plait_stats_t *st) {
  float *in[N], *out[N];
  plait_tensor_t ti[N], to[N];
  char names[N][32];
  const char *nm[N];
  for (size_t i = 0; i < n; i++) {
    in[i] = malloc(count * sizeof(float));
    out[i] = i % 3 == 1 ? malloc(count * sizeof(float)) : in[i]; /* some out of place */
    CHECK(in[i] && out[i], "out of memory");
    ops_fill(PLAIT_FLOAT32, PLAIT_OP_AVERAGE, rank, in[i], count, salt + (unsigned)i);
    if (out[i] != in[i]) memset(out[i], 0x7f, count * sizeof(float));
    snprintf(names[i], sizeof names[i], "g%u.%zu", salt, i);
    nm[i] = names[i];
    OK(plait_tensor_1d(&ti[i], in[i], count, PLAIT_FLOAT32));
    OK(plait_tensor_1d(&to[i], out[i], count, PLAIT_FLOAT32));
  }
  if (twice) /* tensor 0 is read again as tensor 1's input, out of place */
    ti[1] = ti[0], ops_fill(PLAIT_FLOAT32, PLAIT_OP_AVERAGE, rank, in[1], count, salt);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.prescale_factor = pre;
  o.postscale_factor = post;
  plait_handle_t *h = NULL;
  OK(plait_stats_reset());
  OK(plait_grouped_allreduce_async(n, nm, ti, to, PLAIT_OP_AVERAGE, &o, &h));
  OK(plait_wait(h, -1));
  plait_release(h);
  OK(ops_stats(st));
  int bad = 0;
  for (size_t i = 0; i < n && !bad; i++) {
    unsigned s = salt + (unsigned)(twice && i == 1 ? 0 : i);
    double got, want;
    long at = ops_check(PLAIT_FLOAT32, PLAIT_OP_AVERAGE, nranks, out[i], count, s, pre, post,
                        &got, &want);
    if (at >= 0) {
      ops_say_at(rank, __FILE__, __LINE__, "tensor %zu of %zu (%zu elements%s%s): element %ld "
                 "is %g, expected %g", i, n, count, out[i] == in[i] ? ", in place" : "",
                 twice ? ", tensor 0 twice" : "", at, got, want);
      bad = 1;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (out[i] != in[i]) free(out[i]);
    free(in[i]);
  }
  return bad;
}

static int body(int rank, int nranks, void *p) {
  const arg_t *a = p;
  int spans = strcmp(a->transport, "ofi") == 0; /* gloo has no allreduce_spans */
  plait_stats_t s;
  for (unsigned round = 0; round < 3; round++) {
    if (group(rank, nranks, N, COUNT, 0, 1.0, round ? 0.5 : 1.0, 10 * round, &s)) return 1;
    CHECK(s.fused_responses == 1 && s.fused_tensors == N, "round %u: %llu fused responses of "
          "%llu tensors, expected 1 of %d", round, (unsigned long long)s.fused_responses,
          (unsigned long long)s.fused_tensors, N);
    if (spans)
      CHECK(s.copy_in_s == 0 && s.copy_out_s == 0, "round %u over %s: %g s copying in and %g s "
            "out: the group went through the fusion buffer", round, a->transport, s.copy_in_s,
            s.copy_out_s);
    else
      CHECK(s.copy_in_s > 0 && s.copy_out_s > 0, "over %s: no copies (%g, %g)", a->transport,
            s.copy_in_s, s.copy_out_s);
  }
  /* the same memory twice: through the buffer, still exact */
  if (group(rank, nranks, N, COUNT, 1, 1.0, 1.0, 100, &s)) return 1;
  CHECK(s.copy_in_s > 0, "a group reading one tensor twice was not copied through the buffer");
  /* prescale: through the buffer (the copy scales) */
  if (group(rank, nranks, N, COUNT, 0, 2.0, 1.0, 200, &s)) return 1;
  CHECK(s.copy_in_s > 0, "a prescaled group was not copied through the buffer");
  /* tiny tensors: the plugin packs them; exact */
  return group(rank, nranks, N, 5, 0, 1.0, 0.25, 300, &s);
}

static void run(const char *transport, const char *prov, int nranks) {
  char lib[512], t[64], fi[64];
  snprintf(lib, sizeof lib, PLAIT_TEST_LIB_DIR "/libplait-transport-%s.so", transport);
  FILE *f = fopen(lib, "rb");
  if (!f) cr_skip_test("the %s transport plugin was not built: no %s", transport, lib);
  fclose(f);
  snprintf(t, sizeof t, "PLAIT_TRANSPORT=%s", transport);
  snprintf(fi, sizeof fi, "FI_PROVIDER=%s", prov ? prov : "");
  const char *env[] = {t, prov ? fi : NULL, NULL};
  arg_t a = {transport};
  cr_assert_eq(ops_run(nranks, env, 60, body, &a), 0, "%s%s%s, %d ranks: a rank failed (see "
               "above)", transport, prov ? " " : "", prov ? prov : "", nranks);
}

Test(fused_in_place, ofi_shm_2ranks, .timeout = 90) { run("ofi", "shm", 2); }
Test(fused_in_place, ofi_shm_3ranks, .timeout = 90) { run("ofi", "shm", 3); }
Test(fused_in_place, ofi_tcp_3ranks, .timeout = 90) { run("ofi", "tcp", 3); }
Test(fused_in_place, gloo_2ranks, .timeout = 90) { run("gloo", NULL, 2); }
