/* Versions and the names and sizes of dtypes and ops. */
#include "plait/plait.h"

PLAIT_API unsigned plait_version(void) { return PLAIT_VERSION; }
PLAIT_API const char *plait_version_string(void) { return PLAIT_VERSION_STRING; }
PLAIT_API unsigned plait_abi_version(void) { return PLAIT_ABI_VERSION; }

PLAIT_API const char *plait_dtype_name(plait_dtype_t dtype) {
  switch (dtype) {
#define X(name, value, text, bytes) \
  case name:                        \
    return text;
    PLAIT_DTYPE_LIST(X)
#undef X
  default:
    return NULL;
  }
}

PLAIT_API size_t plait_dtype_size(plait_dtype_t dtype) {
  switch (dtype) {
#define X(name, value, text, bytes) \
  case name:                        \
    return bytes;
    PLAIT_DTYPE_LIST(X)
#undef X
  default:
    return 0;
  }
}

PLAIT_API const char *plait_op_name(plait_op_t op) {
  switch (op) {
#define X(name, value, text) \
  case name:                 \
    return text;
    PLAIT_OP_LIST(X)
#undef X
  default:
    return NULL;
  }
}
