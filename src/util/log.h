/* Internal: leveled logging with subsystems. The level is checked before any
 * formatting happens. */
#ifndef PLAIT_LOG_H
#define PLAIT_LOG_H

#include "plait/transport.h" /* plait_log_level_t */

/* Current threshold; messages below it are dropped. */
int plait_log_level(void);
void plait_log_set_level(int level);
/* Rank shown in each line; -1 until known. */
void plait_log_set_rank(int rank);
/* The rank shown in lines written by the calling thread, over the process's
 * (several engines in one process: each engine's threads show its rank); a
 * negative rank drops the override. */
void plait_log_set_thread_rank(int rank);

/* Also handed to plugins as their plait_log_fn; a NULL subsystem reads "plugin". */
void plait_log_write(int level, const char *subsystem, const char *file, int line,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define PLAIT_LOG(level, subsys, ...)                                          \
  do {                                                                         \
    if ((level) >= plait_log_level())                                          \
      plait_log_write((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);     \
  } while (0)

#define PLAIT_TRACE(subsys, ...) PLAIT_LOG(PLAIT_LOG_TRACE, subsys, __VA_ARGS__)
#define PLAIT_DEBUG(subsys, ...) PLAIT_LOG(PLAIT_LOG_DEBUG, subsys, __VA_ARGS__)
#define PLAIT_INFO(subsys, ...) PLAIT_LOG(PLAIT_LOG_INFO, subsys, __VA_ARGS__)
#define PLAIT_WARN(subsys, ...) PLAIT_LOG(PLAIT_LOG_WARN, subsys, __VA_ARGS__)
#define PLAIT_ERROR(subsys, ...) PLAIT_LOG(PLAIT_LOG_ERROR, subsys, __VA_ARGS__)

#endif
