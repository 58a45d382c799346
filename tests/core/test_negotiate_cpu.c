/*
 * plait_stats' negotiate_cpu_s: the coordinator thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) over the same intervals as negotiate_s, which
 * is wall time. On 3 ranks, after cached allreduces, every rank has spent
 * some CPU negotiating, never more than the wall time of the same intervals
 * (one thread cannot use more CPU than time passes), and plait_stats_reset
 * zeroes it. bench/scale reads it at rank 0 beside the wall figure: with
 * 256 processes on 2 cores the wall time is mostly waiting for a CPU.
 */
#include <criterion/criterion.h>

#include "ops_util.h"

#define STEPS 40

static int cached_steps(int rank, int n, void *arg) {
  (void)arg;
  float x = 1;
  plait_tensor_t t;
  OK(plait_tensor_1d(&t, &x, 1, PLAIT_FLOAT32));
  for (int s = 0; s < STEPS; s++) {
    plait_handle_t *h = NULL;
    x = 1;
    OK(plait_allreduce_async("cpu.tiny", &t, &t, PLAIT_OP_SUM, NULL, &h));
    OK(plait_wait(h, 30));
    plait_release(h);
    CHECK(x == (float)n, "step %d: %g, want %d", s, x, n);
  }
  plait_stats_t st = {.struct_size = sizeof st};
  OK(plait_stats(&st));
  CHECK(st.negotiate_s > 0, "negotiate_s %g", st.negotiate_s);
  CHECK(st.negotiate_cpu_s > 0, "negotiate_cpu_s %g after %d allreduces (negotiate_s %g)",
        st.negotiate_cpu_s, STEPS, st.negotiate_s);
  /* 1 ms of slack: the two clocks are read one after the other */
  CHECK(st.negotiate_cpu_s <= st.negotiate_s + 1e-3, "negotiate_cpu_s %g > negotiate_s %g",
        st.negotiate_cpu_s, st.negotiate_s);
  OK(plait_stats_reset());
  plait_stats_t z = {.struct_size = sizeof z};
  OK(plait_stats(&z));
  CHECK(z.negotiate_cpu_s == 0, "negotiate_cpu_s %g after plait_stats_reset", z.negotiate_cpu_s);
  return 0;
}

Test(negotiate_cpu, counted_and_below_the_wall_time, .timeout = 120) {
  OPS_REQUIRE_GLOO();
  static const char *const env[] = {NULL};
  cr_assert_eq(ops_run(3, env, 90, cached_steps, NULL), 0, "a rank failed (see above)");
}
