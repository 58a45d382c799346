/*
 * util/thread_slice: the calling thread gets a short EEVDF slice, keeps its
 * nice value, and a thread of another policy is left alone.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/thread_slice.h"

typedef struct {
  uint32_t size, sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
  uint32_t sched_util_min, sched_util_max;
} attr_t;

static int get_attr(attr_t *a) {
  memset(a, 0, sizeof *a);
  return (int)syscall(SYS_sched_getattr, 0, a, (unsigned)sizeof *a, 0);
}

Test(thread_slice, a_normal_thread_gets_the_slice_and_keeps_its_nice_value) {
  attr_t a;
  if (get_attr(&a) != 0) cr_skip_test("sched_getattr is unavailable here: %s", strerror(errno));
  cr_assert_eq(a.sched_policy, SCHED_OTHER, "a test process runs SCHED_OTHER");
  pid_t tid = (pid_t)syscall(SYS_gettid);
  cr_assert_eq(setpriority(PRIO_PROCESS, (id_t)tid, 5), 0, "nice 5: %s", strerror(errno));
  uint64_t before = a.sched_runtime;
  cr_assert_eq(plait_thread_short_slice(200 * 1000), 0, "refused: %s", strerror(errno));
  cr_assert_eq(get_attr(&a), 0);
  cr_assert_eq(a.sched_policy, SCHED_OTHER);
  cr_assert_eq(a.sched_nice, 5, "the nice value is kept (got %d)", a.sched_nice);
  if (a.sched_runtime == 0 && before == 0)
    cr_skip_test("this kernel does not report a custom slice (Linux < 6.12): nothing to check");
  cr_assert_eq(a.sched_runtime, 200 * 1000, "the slice is 200 us (got %llu ns)",
               (unsigned long long)a.sched_runtime);
}

Test(thread_slice, a_thread_of_another_policy_is_left_alone) {
  struct sched_param p = {0};
  if (sched_setscheduler(0, SCHED_BATCH, &p) != 0)
    cr_skip_test("cannot make this thread SCHED_BATCH: %s", strerror(errno));
  cr_assert_eq(plait_thread_short_slice(200 * 1000), 1, "left alone");
  attr_t a;
  cr_assert_eq(get_attr(&a), 0);
  cr_assert_eq(a.sched_policy, SCHED_BATCH, "still SCHED_BATCH");
}
