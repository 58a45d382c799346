/*
 * scale_rank: one light rank of the control-plane scale benchmark
 * (bench/scale/scale.py starts 16 to 256 of them on one machine).
 *
 * Waits for the driver's go (EOF on the inherited file descriptor
 * SCALE_GO_FD), so that the time to init does not count how long the driver
 * took to start every process; then plait_init, SCALE_WARMUP tiny
 * allreduces (one float32: the response cache fills), plait_stats_reset,
 * SCALE_ITERS timed tiny allreduces, one at a time, and prints one JSON line
 * with its own figures (the driver reads them from a shared file):
 *
 *   {"rank":r,"size":n,"init_s":..,"op_s":..,"cpu_s":..,"negotiate_s":..,
 *    "negotiate_cpu_s":..,"control_bytes":..,"control_messages":..,
 *    "cycles":..,"busy_cycles":..,"iters":..}
 *
 * op_s (wall), cpu_s (this process's CPU, all threads, user + system),
 * negotiate_s (wall time in negotiation) and negotiate_cpu_s (the
 * coordinator thread's CPU in those same intervals) are per operation
 * (seconds), control_* totals over the timed operations. Exit status 0, or
 * 1 with the failure on stderr.
 *
 * SCALE_SLOW_RANK=r and SCALE_SLOW_MS=t: rank r sleeps t ms before each
 * timed allreduce (every other rank then waits that long per operation:
 * what a descheduled rank does to the rest, at any N).
 */
#define _GNU_SOURCE
#include <plait/plait.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

static int fail(const char *what, plait_result_t rc) {
  fprintf(stderr, "scale_rank: %s: %s: %s\n", what, plait_result_name(rc), plait_last_error());
  return 1;
}

/* CPU seconds of this process (every thread), user and system */
static double cpu_now(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 +
         (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
}

static plait_result_t tiny_allreduce(float *x) {
  plait_tensor_t t;
  plait_handle_t *h = NULL;
  plait_tensor_1d(&t, x, 1, PLAIT_FLOAT32);
  plait_result_t rc = plait_allreduce_async("tiny", &t, &t, PLAIT_OP_SUM, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, -1);
  plait_release(h);
  return rc;
}

int main(void) {
  int go = env_int("SCALE_GO_FD", -1), warmup = env_int("SCALE_WARMUP", 20);
  int iters = env_int("SCALE_ITERS", 100);
  int slow_rank = env_int("SCALE_SLOW_RANK", -1), slow_ms = env_int("SCALE_SLOW_MS", 0);
  if (go >= 0) { /* the driver closes its end once every rank is started */
    char c;
    while (read(go, &c, 1) > 0) {
    }
    close(go);
  }
  double t0 = mono();
  plait_result_t rc = plait_init();
  double init_s = mono() - t0;
  if (rc != PLAIT_SUCCESS) return fail("plait_init", rc);
  int rank = 0, size = 1;
  plait_rank(&rank);
  plait_size(&size);
  float x = 1;
  for (int i = 0; i < warmup; i++)
    if ((rc = tiny_allreduce(&x)) != PLAIT_SUCCESS) return fail("warm-up allreduce", rc);
  plait_stats_reset();
  double t1 = mono(), c1 = cpu_now();
  for (int i = 0; i < iters; i++) {
    x = 1;
    if (rank == slow_rank && slow_ms > 0) usleep((useconds_t)slow_ms * 1000);
    if ((rc = tiny_allreduce(&x)) != PLAIT_SUCCESS) return fail("allreduce", rc);
    if (x != (float)size) {
      fprintf(stderr, "scale_rank: rank %d: allreduce gave %g, not %d\n", rank, x, size);
      return 1;
    }
  }
  double op_s = (mono() - t1) / (iters ? iters : 1);
  double cpu_s = (cpu_now() - c1) / (iters ? iters : 1);
  plait_stats_t st = {.struct_size = sizeof st};
  plait_stats(&st);
  char line[512];
  int len = snprintf(line, sizeof line,
                     "{\"rank\":%d,\"size\":%d,\"init_s\":%.6f,\"op_s\":%.6g,\"cpu_s\":%.6g,"
                     "\"negotiate_s\":%.6g,\"negotiate_cpu_s\":%.6g,"
                     "\"control_bytes\":%llu,\"control_messages\":%llu,\"cycles\":%llu,"
                     "\"busy_cycles\":%llu,\"iters\":%d}\n",
                     rank, size, init_s, op_s, cpu_s, st.negotiate_s / (iters ? iters : 1),
                     st.negotiate_cpu_s / (iters ? iters : 1),
                     (unsigned long long)st.control_bytes, (unsigned long long)st.control_messages,
                     (unsigned long long)st.cycles, (unsigned long long)st.busy_cycles, iters);
  /* one write: lines of many ranks appended to one file do not interleave */
  if (write(STDOUT_FILENO, line, (size_t)len) != len) return 1;
  rc = plait_shutdown();
  return rc == PLAIT_SUCCESS ? 0 : fail("plait_shutdown", rc);
}
