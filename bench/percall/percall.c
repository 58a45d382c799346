/* bench/percall/percall.c: a fixed amount of plait work for instruction
 * counting (bench/percall_instructions.sh runs it under callgrind).
 *
 *   percall lone STEPS     STEPS x one 4 KiB float32 sum allreduce, the same
 *                          name each step (cached), submitted, waited, released
 *   percall burst STEPS    STEPS x 64 allreduces of 64 KiB (fused), submitted
 *                          together, then all waited and released
 *
 * Rank, size and rendezvous come from the environment (PLAIT_RANK, ...).
 * Only the public API (plait.h), so one source builds against any tree. */
#include <plait/plait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BURST 64

static void check(plait_result_t r, const char *what) {
  if (r != PLAIT_SUCCESS) {
    fprintf(stderr, "percall: %s: %s\n", what, plait_last_error());
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "lone") != 0 && strcmp(argv[1], "burst") != 0)) {
    fprintf(stderr, "usage: percall lone|burst STEPS\n");
    return 2;
  }
  int burst = strcmp(argv[1], "burst") == 0;
  long steps = atol(argv[2]);
  int n = burst ? BURST : 1;
  size_t count = burst ? 16384 : 1024; /* 64 KiB or 4 KiB of float32 */
  float *data = calloc((size_t)n * count, sizeof(float));
  plait_tensor_t t[BURST];
  char names[BURST][32];
  plait_handle_t *h[BURST];
  if (data == NULL) return 1;
  check(plait_init(), "plait_init");
  for (int i = 0; i < n; i++) {
    check(plait_tensor_1d(&t[i], data + (size_t)i * count, count, PLAIT_FLOAT32), "tensor");
    snprintf(names[i], sizeof(names[i]), burst ? "burst.%d" : "lone", i);
  }
  for (long s = 0; s < steps; s++) {
    for (int i = 0; i < n; i++)
      check(plait_allreduce_async(names[i], &t[i], &t[i], PLAIT_OP_SUM, NULL, &h[i]),
            "allreduce");
    for (int i = 0; i < n; i++) {
      check(plait_wait(h[i], -1), "wait");
      plait_release(h[i]);
    }
  }
  check(plait_shutdown(), "plait_shutdown");
  free(data);
  return 0;
}
