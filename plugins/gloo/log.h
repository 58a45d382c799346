// Logging through the core's logger (subsystem "gloo"); the level is checked
// before anything is formatted.
#pragma once

#include "plait/transport.h"

#define PLAIT_GLOO_LOG(log_fn, threshold, level, ...)                  \
  do {                                                                 \
    if ((log_fn) != nullptr && (int)(level) >= (threshold))            \
      (log_fn)((int)(level), "gloo", __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define PLAIT_GLOO_DEBUG(state, ...) \
  PLAIT_GLOO_LOG((state).log, (state).log_level, PLAIT_LOG_DEBUG, __VA_ARGS__)
#define PLAIT_GLOO_WARN(state, ...) \
  PLAIT_GLOO_LOG((state).log, (state).log_level, PLAIT_LOG_WARN, __VA_ARGS__)
