/* One logging function: "[plait <time> r<rank> <LEVEL> <subsys>] msg (file:line)". */
#include "util/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int threshold = PLAIT_LOG_WARN;
static atomic_int log_rank = -1;
static _Thread_local int thread_rank = -1; /* -1: the process's */

int plait_log_level(void) { return atomic_load_explicit(&threshold, memory_order_relaxed); }
void plait_log_set_level(int level) { atomic_store(&threshold, level); }
void plait_log_set_rank(int rank) { atomic_store(&log_rank, rank); }
void plait_log_set_thread_rank(int rank) { thread_rank = rank < 0 ? -1 : rank; }

static const char *level_tag(int level) {
  static const char *tags[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"};
  return level >= 0 && level < 5 ? tags[level] : "?";
}

void plait_log_write(int level, const char *subsystem, const char *file, int line,
                     const char *fmt, ...) {
  if (level < plait_log_level()) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%H:%M:%S", &tm);

  char who[16];
  int rank = thread_rank >= 0 ? thread_rank : atomic_load(&log_rank);
  if (rank >= 0)
    snprintf(who, sizeof who, "r%d", rank);
  else
    snprintf(who, sizeof who, "r?");

  if (!subsystem) subsystem = "plugin";
  const char *base = file ? strrchr(file, '/') : NULL;
  base = base ? base + 1 : file;
  /* Info lines are for users; everything else carries where it came from. */
  if (level == PLAIT_LOG_INFO || !base)
    fprintf(stderr, "[plait %s.%03ld %s %s %s] %s\n", when, ts.tv_nsec / 1000000, who,
            level_tag(level), subsystem, msg);
  else
    fprintf(stderr, "[plait %s.%03ld %s %s %s] %s (%s:%d)\n", when, ts.tv_nsec / 1000000, who,
            level_tag(level), subsystem, msg, base, line);
}
