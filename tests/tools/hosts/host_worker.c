/*
 * One rank of a job that spans network namespaces (tests/tools/hosts/run.sh).
 *
 *   host_worker ops    every operation a few rounds, results checked
 *                      (tests/harness/every_op.c), then "every_op ok"
 *   host_worker loop   allreduces until one fails; prints "ready" after the
 *                      first, then on failure "FAILED <unix time> <error>"
 *                      and exits 3 (the harness cuts a link or kills a host)
 *   host_worker run S  allreduces (HOST_WORKER_FLOATS floats, default 4096) for
 *                      S seconds of rank 0's clock (its flag in the last
 *                      element stops every rank at the same step), each result
 *                      checked; "ready" after the first; at the end every
 *                      operation once more (every_op), then "done <steps>"
 *                      and exit 0, or "FAILED ..." and exit 3 (matrix.sh).
 *                      With HOST_WORKER_FAULT=fds|mem, once the file
 *                      HOST_WORKER_TRIGGER exists the rank exhausts its
 *                      descriptors (soft RLIMIT_NOFILE lowered to what is open
 *                      + 4, then /dev/null opened until EMFILE) or its address
 *                      space (RLIMIT_AS lowered to VmSize + 8 MiB, then blocks
 *                      of 1 MiB down to 64 bytes allocated until malloc
 *                      fails), keeps them, and
 *                      goes on; at the next step every rank runs every
 *                      operation once (new names, every peer, new buffers).
 *
 * Both first print "layout rank R size S local LR/LS cross CR/CS" so the
 * harness can check what plait derived.
 */
#define _POSIX_C_SOURCE 200809L
#include "every_op.h"

#include <plait/plait.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n - 3; /* ".", "..", the directory's own descriptor */
}

/* Exhausts this rank's descriptors or address space (see the top). */
static void exhaust(const char *what) {
  long got = 0;
  if (!strcmp(what, "fds")) {
    int open_now = open_fds();
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = (rlim_t)open_now + 4;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) perror("setrlimit(RLIMIT_NOFILE)");
    while (open("/dev/null", O_RDONLY) >= 0) got++;
    printf("fault fds: %d were open, soft limit %ld, %ld more opened until EMFILE\n", open_now,
           (long)rl.rlim_cur, got);
  } else if (!strcmp(what, "mem")) {
    long vm_kib = 0;
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
      if (!strncmp(line, "VmSize:", 7)) vm_kib = strtol(line + 7, NULL, 10);
    if (f) fclose(f);
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = (rlim_t)vm_kib * 1024 + (8u << 20);
    if (setrlimit(RLIMIT_AS, &rl) != 0) perror("setrlimit(RLIMIT_AS)");
    for (size_t block = 1u << 20; block >= 64; block /= 16) /* kept: no memory left */
      while (malloc(block)) got += (long)block;
    printf("fault mem: VmSize %ld KiB, RLIMIT_AS %ld KiB, %ld KiB allocated until malloc of "
           "64 bytes failed\n", vm_kib, (long)(rl.rlim_cur / 1024), got / 1024);
  } else {
    printf("fault %s: unknown (fds|mem)\n", what);
  }
  fflush(stdout);
}

static int run(int rank, int size, double seconds) {
  const char *env = getenv("HOST_WORKER_FLOATS");
  long n = env ? atol(env) : 4096;
  const char *fault = getenv("HOST_WORKER_FAULT"), *trigger = getenv("HOST_WORKER_TRIGGER");
  float *x = n > 0 ? malloc(sizeof(float) * (size_t)(n + 2)) : NULL;
  if (!x) return fail("run: HOST_WORKER_FLOATS", PLAIT_ERR_INVALID_ARGUMENT);
  float want = (float)size * (float)(size - 1) / 2;
  double t0 = now_s();
  for (long step = 0;; step++) {
    x[n + 1] = 0.0f; /* 1 on the victim at the step it exhausted something */
    if (fault && trigger && access(trigger, F_OK) == 0) {
      exhaust(fault);
      fault = NULL;
      x[n + 1] = 1.0f;
    }
    for (long i = 0; i < n; i++) x[i] = (float)rank;
    x[n] = rank == 0 && now_s() - t0 >= seconds ? 1.0f : 0.0f;
    plait_tensor_t t;
    plait_handle_t *h = NULL;
    plait_result_t rc = plait_tensor_1d(&t, x, n + 2, PLAIT_FLOAT32);
    if (rc == PLAIT_SUCCESS) rc = plait_allreduce_async("run", &t, &t, PLAIT_OP_SUM, NULL, &h);
    if (rc == PLAIT_SUCCESS) rc = plait_wait(h, -1);
    if (h) plait_release(h);
    if (rc != PLAIT_SUCCESS) return fail("allreduce", rc);
    for (long i = 0; i < n; i++)
      if (x[i] != want) {
        printf("WRONG allreduce: element %ld is %g, expected %g (step %ld)\n", i, (double)x[i],
               (double)want, step);
        return 1;
      }
    if (step == 0) printf("ready\n");
    fflush(stdout);
    if ((x[n + 1] != 0.0f || x[n] != 0.0f) && every_op(rank, size) != 0) {
      struct timespec ts; /* every_op said what on stderr */
      clock_gettime(CLOCK_REALTIME, &ts);
      printf("FAILED %.3f every_op %s: %s\n", (double)ts.tv_sec + ts.tv_nsec * 1e-9,
             x[n] != 0.0f ? "at the end" : "after the fault", plait_last_error());
      return 3;
    }
    if (x[n + 1] != 0.0f) printf("every_op after the fault ok\n");
    if (x[n] != 0.0f) {
      printf("done %ld\n", step + 1);
      return 0;
    }
  }
}

int main(int argc, char **argv) {
  int is_run = argc == 3 && !strcmp(argv[1], "run");
  if (!is_run && (argc != 2 || (strcmp(argv[1], "ops") && strcmp(argv[1], "loop")))) {
    fprintf(stderr, "usage: host_worker ops|loop|run SECONDS\n");
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
  } else if (is_run) {
    status = run(rank, size, atof(argv[2]));
  } else {
    status = loop(rank, size);
  }
  fflush(stdout);
  rc = plait_shutdown();
  if (status == 0 && rc != PLAIT_SUCCESS) return fail("shutdown", rc);
  return status;
}
