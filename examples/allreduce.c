/*
 * allreduce: a C user's first plait program.
 *
 *   plaitrun -np 2 build/bin/allreduce
 *
 * Every rank fills a vector with its rank number and sums it over all ranks,
 * first blocking (submit, wait), then four tensors in flight at once, which
 * the coordinator fuses into one collective.
 */
#include <plait/plait.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS) {                                                \
      fprintf(stderr, "allreduce: %s failed: %s: %s\n", #call,                 \
              plait_result_name(rc_), plait_last_error());                     \
      return 1;                                                                \
    }                                                                          \
  } while (0)

enum { N = 1000 };

int main(void) {
  CHECK(plait_init());
  int rank, size;
  CHECK(plait_rank(&rank));
  CHECK(plait_size(&size));

  /* One tensor: submit, then wait for it. */
  float *x = malloc(N * sizeof *x);
  for (int i = 0; i < N; i++) x[i] = (float)rank;
  plait_tensor_t t;
  CHECK(plait_tensor_1d(&t, x, N, PLAIT_FLOAT32));
  plait_handle_t *h;
  CHECK(plait_allreduce_async("x", &t, &t, PLAIT_OP_SUM, NULL, &h)); /* in place */
  CHECK(plait_wait(h, -1));
  plait_release(h);
  float want = (float)size * (float)(size - 1) / 2;
  printf("rank %d: x[0] = %g (expected %g)\n", rank, x[0], want);

  /* Four tensors in flight at once: averaged, fused into one collective. */
  double *g[4];
  plait_handle_t *hs[4];
  const char *names[4] = {"grad/a", "grad/b", "grad/c", "grad/d"};
  for (int k = 0; k < 4; k++) {
    g[k] = malloc(N * sizeof *g[k]);
    for (int i = 0; i < N; i++) g[k][i] = rank + k;
    CHECK(plait_tensor_1d(&t, g[k], N, PLAIT_FLOAT64));
    CHECK(plait_allreduce_async(names[k], &t, &t, PLAIT_OP_AVERAGE, NULL, &hs[k]));
  }
  for (int k = 0; k < 4; k++) {
    CHECK(plait_wait(hs[k], -1));
    plait_release(hs[k]);
  }
  printf("rank %d: grad/d[0] = %g (expected %g)\n", rank, g[3][0], (size - 1) / 2.0 + 3);

  plait_stats_t st = {.struct_size = sizeof st};
  CHECK(plait_stats(&st));
  printf("rank %d: %llu tensors in %llu collectives (%llu fused)\n", rank,
         (unsigned long long)st.tensors, (unsigned long long)st.responses,
         (unsigned long long)st.fused_responses);
  for (int k = 0; k < 4; k++) free(g[k]);
  free(x);
  CHECK(plait_shutdown());
  return 0;
}
