/* PLAIT_THREAD_AFFINITY, and starting a named thread on a CPU (affinity.h). */
#include "util/affinity.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define VAR "PLAIT_THREAD_AFFINITY"

/* "0-3,8" for the CPUs of set (at most cap bytes, "..." when cut). */
static void describe_set(const cpu_set_t *set, char *out, size_t cap) {
  size_t o = 0;
  out[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set)) last++;
    int n = last > c ? snprintf(out + o, cap - o, "%s%d-%d", o ? "," : "", c, last)
                     : snprintf(out + o, cap - o, "%s%d", o ? "," : "", c);
    if (n < 0 || (size_t)n >= cap - o) {
      snprintf(out + (cap > 4 ? cap - 4 : 0), cap > 4 ? 4 : cap, "...");
      return;
    }
    o += (size_t)n;
    c = last;
  }
}

plait_result_t plait_affinity_cpu(const char *list, int local_rank, int local_size,
                                  const cpu_set_t *allowed, int *cpu) {
  *cpu = -1;
  const char *p = list ? list : "";
  while (isspace((unsigned char)*p)) p++;
  if (!*p) return PLAIT_SUCCESS;
  if (local_rank < 0 || local_size < 1 || local_rank >= local_size)
    return plait_error(PLAIT_ERR_CONFIG, VAR "='%s': the local rank is not known (%d of %d)",
                       list, local_rank, local_size);
  int count = 0;
  long mine = -1;
  p = list;
  for (;;) { /* one entry per pass: blanks, digits, blanks, then ',' or the end */
    const char *start = p;
    while (isspace((unsigned char)*p)) p++;
    char *end;
    errno = 0;
    long v = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
    if (v >= 0) {
      p = end;
      while (isspace((unsigned char)*p)) p++;
    }
    if (v < 0 || errno || (*p && *p != ',')) {
      size_t len = strcspn(start, ",");
      return plait_error(PLAIT_ERR_CONFIG, VAR "='%s': '%.*s' is not a CPU id (expected "
                         "comma-separated integers >= 0, one per local rank, as "
                         "HOROVOD_THREAD_AFFINITY)", list, (int)len, start);
    }
    if (count == local_rank) mine = v;
    count++;
    if (!*p) break;
    p++; /* the ',' */
  }
  if (count < local_size)
    return plait_error(PLAIT_ERR_CONFIG, VAR "='%s': %d CPU id%s for %d ranks on this host (the "
                       "local size); give one per local rank", list, count,
                       count == 1 ? "" : "s", local_size);
  if (mine >= CPU_SETSIZE || (allowed && !CPU_ISSET((int)mine, allowed))) {
    char set[256];
    if (allowed) describe_set(allowed, set, sizeof set);
    else snprintf(set, sizeof set, "0-%d", CPU_SETSIZE - 1);
    return plait_error(PLAIT_ERR_CONFIG, VAR "='%s': CPU %ld (local rank %d's) is not one this "
                       "process may run on (allowed: %s)", list, mine, local_rank, set);
  }
  *cpu = (int)mine;
  return PLAIT_SUCCESS;
}

plait_result_t plait_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name,
                                  int cpu) {
  pthread_attr_t attr;
  int err = pthread_attr_init(&attr);
  if (err) return plait_error(PLAIT_ERR_SYSTEM, "cannot start the %s thread: %s", name,
                              strerror(err));
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    err = pthread_attr_setaffinity_np(&attr, sizeof set, &set);
  }
  if (!err) err = pthread_create(t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (err && cpu >= 0)
    return plait_error(PLAIT_ERR_SYSTEM, "cannot start the %s thread on CPU %d (" VAR "): %s",
                       name, cpu, strerror(err));
  if (err) return plait_error(PLAIT_ERR_SYSTEM, "cannot start the %s thread: %s", name,
                              strerror(err));
  pthread_setname_np(*t, name);
  return PLAIT_SUCCESS;
}
