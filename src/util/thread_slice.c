/* A short EEVDF slice for the calling thread (thread_slice.h). */
#include "util/thread_slice.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct sched_attr (linux/sched/types.h), first version with utilization
 * clamps: what sched_getattr and sched_setattr exchange. */
typedef struct {
  uint32_t size, sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
  uint32_t sched_util_min, sched_util_max;
} sched_attr_v1_t;

#define RESET_ON_FORK 0x01 /* SCHED_FLAG_RESET_ON_FORK */

int plait_thread_short_slice(uint64_t ns) {
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
  sched_attr_v1_t a;
  memset(&a, 0, sizeof a);
  if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0) != 0) return -1;
  if (a.sched_policy != SCHED_OTHER) return 1;
  a.size = sizeof a;
  a.sched_flags &= RESET_ON_FORK; /* kept; no utilization clamps */
  a.sched_runtime = ns;
  return syscall(SYS_sched_setattr, 0, &a, 0) == 0 ? 0 : -1;
#else
  (void)ns;
  return 1;
#endif
}
