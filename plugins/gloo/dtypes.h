// What the plugin knows of plait's dtypes and ops: sizes and names, from the
// X-macro lists in plait.h (the plugin does not link against libplait, so it
// cannot call plait_dtype_size()).
#pragma once

#include <cstddef>

#include "plait/plait.h"

namespace plait_gloo {

inline bool dtype_valid(plait_dtype_t dtype) {
  return (unsigned)dtype < (unsigned)PLAIT_DTYPE_COUNT_;
}

inline bool op_valid(plait_op_t op) {
  return (unsigned)op < (unsigned)PLAIT_OP_COUNT_;
}

// Bytes per element; 0 for a value outside the enum.
inline size_t dtype_size(plait_dtype_t dtype) {
  switch (dtype) {
#define PLAIT_GLOO_DTYPE_SIZE_(name, value, text, bytes) \
  case name:                                             \
    return bytes;
    PLAIT_DTYPE_LIST(PLAIT_GLOO_DTYPE_SIZE_)
#undef PLAIT_GLOO_DTYPE_SIZE_
    default:
      return 0;
  }
}

inline const char *dtype_name(plait_dtype_t dtype) {
  switch (dtype) {
#define PLAIT_GLOO_DTYPE_NAME_(name, value, text, bytes) \
  case name:                                             \
    return text;
    PLAIT_DTYPE_LIST(PLAIT_GLOO_DTYPE_NAME_)
#undef PLAIT_GLOO_DTYPE_NAME_
    default:
      return "unknown";
  }
}

inline const char *op_name(plait_op_t op) {
  switch (op) {
#define PLAIT_GLOO_OP_NAME_(name, value, text) \
  case name:                                   \
    return text;
    PLAIT_OP_LIST(PLAIT_GLOO_OP_NAME_)
#undef PLAIT_GLOO_OP_NAME_
    default:
      return "unknown";
  }
}

}  // namespace plait_gloo
