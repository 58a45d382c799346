/* The public calls that name result codes and read the thread's last error
 * (util/error.c keeps it; this file is not in plait_base, see src/CMakeLists.txt). */
#include "plait/dtypes.h"
#include "util/error.h"

PLAIT_API const char *plait_strerror(plait_result_t result) {
  return plait_strerror_inline(result);
}

PLAIT_API const char *plait_result_name(plait_result_t result) {
  return plait_result_name_inline(result);
}

PLAIT_API const char *plait_last_error(void) { return plait_error_message(); }
