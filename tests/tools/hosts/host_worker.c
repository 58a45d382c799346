/*
 * One rank of a job that spans network namespaces (tests/tools/hosts/run.sh).
 *
 *   host_worker ops    every operation a few rounds, results checked
 *                      (tests/harness/every_op.c), then "every_op ok"
 *   host_worker loop   allreduces until one fails; prints "ready" after the
 *                      first, then on failure "FAILED <unix time> <error>"
 *                      and exits 3 (the harness cuts a link or kills a host)
 *
 * Both first print "layout rank R size S local LR/LS cross CR/CS" so the
 * harness can check what plait derived.
 */
#define _POSIX_C_SOURCE 200809L
#include "every_op.h"

#include <plait/plait.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

static int fail(const char *what, plait_result_t rc) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  printf("FAILED %.3f %s: %s: %s\n", (double)ts.tv_sec + ts.tv_nsec * 1e-9, what,
         plait_result_name(rc), plait_last_error());
  fflush(stdout);
  return 3;
}

static int loop(int rank, int size) {
  enum { N = 4096 };
  static float x[N];
  for (long iter = 0;; iter++) {
    for (int i = 0; i < N; i++) x[i] = (float)rank;
    plait_tensor_t t;
    plait_handle_t *h = NULL;
    plait_result_t rc = plait_tensor_1d(&t, x, N, PLAIT_FLOAT32);
    if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async("loop", &t, &t, PLAIT_OP_SUM, NULL, &h);
    if (rc == PLAIT_SUCCESS) rc = plait_wait(h, -1);
    if (h) plait_release(h);
    if (rc != PLAIT_SUCCESS) return fail("allreduce", rc);
    float want = (float)size * (float)(size - 1) / 2;
    if (x[0] != want || x[N - 1] != want) {
      printf("WRONG allreduce: %g, expected %g\n", (double)x[0], (double)want);
      return 1;
    }
    if (iter == 0) {
      printf("ready\n");
      fflush(stdout);
    }
    struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
  }
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "ops") && strcmp(argv[1], "loop"))) {
    fprintf(stderr, "usage: host_worker ops|loop\n");
    return 2;
  }
  plait_result_t rc = plait_init();
  if (rc != PLAIT_SUCCESS) return fail("init", rc);
  int rank = -1, size = -1, lr = -1, ls = -1, cr = -1, cs = -1;
  plait_rank(&rank);
  plait_size(&size);
  plait_local_rank(&lr);
  plait_local_size(&ls);
  plait_cross_rank(&cr);
  plait_cross_size(&cs);
  printf("layout rank %d size %d local %d/%d cross %d/%d\n", rank, size, lr, ls, cr, cs);
  const char *transport = "?";
  plait_transport_name(&transport);
  printf("transport %s\n", transport);
  fflush(stdout);
  int status;
  if (!strcmp(argv[1], "ops")) {
    status = every_op(rank, size);
    if (status == 0) printf("every_op ok\n");
  } else {
    status = loop(rank, size);
  }
  fflush(stdout);
  rc = plait_shutdown();
  if (status == 0 && rc != PLAIT_SUCCESS) return fail("shutdown", rc);
  return status;
}
