/*
 * Several engines in one process (tests/harness/engines.h), without Criterion
 * (which cannot start under ThreadSanitizer): ci/test runs it in the TSan
 * build, where state two engines shared without a lock would show as a data
 * race. 3 ranks, each its own engine on its own thread, run 100 allreduces
 * (25 in flight at a time, so some are fused) and a barrier, results checked;
 * over gloo, then over ofi when its plugin was built. Prints
 * "N passed, M failed" last.
 */
#include <stdio.h>
#include <string.h>

#include "engines.h"
#include "plait/plait.h"

enum { RANKS = 3, ROUNDS = 4, INFLIGHT = 25, N = 64 };

static int body(int rank, int n, void *arg) {
  (void)arg;
  float x[INFLIGHT][N];
  for (int round = 0; round < ROUNDS; round++) {
    plait_handle_t *h[INFLIGHT];
    for (int k = 0; k < INFLIGHT; k++) {
      char name[32];
      snprintf(name, sizeof name, "r%d.t%d", round, k);
      for (int i = 0; i < N; i++) x[k][i] = (float)(rank + i + k);
      plait_tensor_t t;
      plait_tensor_1d(&t, x[k], N, PLAIT_FLOAT32);
      if (plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[k])) {
        fprintf(stderr, "rank %d: %s\n", rank, plait_last_error());
        return 1;
      }
    }
    for (int k = 0; k < INFLIGHT; k++) {
      if (plait_wait(h[k], 60)) {
        fprintf(stderr, "rank %d: %s\n", rank, plait_last_error());
        return 1;
      }
      plait_release(h[k]);
      for (int i = 0; i < N; i++)
        if (x[k][i] != (float)(n * (n - 1) / 2 + n * (i + k))) {
          fprintf(stderr, "rank %d: r%d.t%d[%d] = %g\n", rank, round, k, i, x[k][i]);
          return 1;
        }
    }
  }
  plait_handle_t *b;
  if (plait_barrier_async(NULL, &b) || plait_wait(b, 60)) return 1;
  plait_release(b);
  return 0;
}

static int plugin_built(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/libplait-transport-%s.so", PLAIT_TEST_LIB_DIR, name);
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

int main(void) {
  const char *transports[] = {"gloo", "ofi"};
  int passed = 0, failed = 0;
  for (int i = 0; i < 2; i++) {
    if (!plugin_built(transports[i])) {
      printf("stress_inproc: %s skipped: its plugin was not built here\n", transports[i]);
      continue;
    }
    plait_test_engines_t job = {.nranks = RANKS, .transport = transports[i]};
    int rc = plait_test_run_engines(&job, body, NULL);
    printf("stress_inproc: %d engines in one process over %s: %s in %.0f ms\n", RANKS,
           transports[i], rc ? "FAILED" : "ok", job.elapsed_s * 1e3);
    if (rc) failed++; else passed++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
