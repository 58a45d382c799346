/* Versions and the names and sizes of dtypes and ops. */
#include "plait/dtypes.h"
#include "plait/plait.h"

PLAIT_API unsigned plait_version(void) { return PLAIT_VERSION; }
PLAIT_API const char *plait_version_string(void) { return PLAIT_VERSION_STRING; }
PLAIT_API unsigned plait_abi_version(void) { return PLAIT_ABI_VERSION; }

PLAIT_API const char *plait_dtype_name(plait_dtype_t dtype) {
  return plait_dtype_name_inline(dtype);
}

PLAIT_API size_t plait_dtype_size(plait_dtype_t dtype) { return plait_dtype_size_inline(dtype); }

PLAIT_API const char *plait_op_name(plait_op_t op) { return plait_op_name_inline(op); }
