/* The progress loop's yield window, from how crowded the host is: see crowding.h. */
#include "engine/crowding.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ofi_cpus(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

int ofi_crowded(int local_ranks, int cpus) { return local_ranks > (cpus > 0 ? cpus : 1); }

plait_result_t ofi_yield_window(const char *value, int local_ranks, int cpus, double *yield_s,
                                char *err, size_t err_len) {
  if (value == NULL || strcmp(value, "auto") == 0) {
    *yield_s = ofi_crowded(local_ranks, cpus) ? OFI_YIELD_CROWDED_S : OFI_YIELD_FIT_S;
    return PLAIT_SUCCESS;
  }
  char *end = NULL;
  errno = 0;
  long v = strtol(value, &end, 10);
  if (errno || end == value || *end || v < 0 || v > 1000000) {
    snprintf(err, err_len,
             "PLAIT_OFI_YIELD_US='%s' is not valid: expected 'auto' (2000 where this host's "
             "ranks fit its CPUs, 300 where they outnumber them) or microseconds from 0 to "
             "1000000",
             value);
    return PLAIT_ERR_CONFIG;
  }
  *yield_s = (double)v * 1e-6;
  return PLAIT_SUCCESS;
}
