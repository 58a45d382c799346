/*
 * plait: the names and sizes of dtypes, ops and result codes as static inline
 * functions, expanded once here from plait.h's X-macro lists.
 *
 * For code that cannot call libplait (transport plugins do not link against
 * it) or that wants the answer without a call. Each function gives exactly
 * what the library function of the same name without "_inline" gives. Pure,
 * no lock, any thread; compiles as C99, C11 and C++.
 */
#ifndef PLAIT_DTYPES_H
#define PLAIT_DTYPES_H

#include <stddef.h>

#include "plait/plait.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Masks of every dtype and every op, one bit per value (bit = 1 << value),
 * as transport.h's PLAIT_DTYPE_BIT / PLAIT_OP_BIT set them. Constant
 * expressions, for a plugin table's dtypes and ops. */
#define PLAIT_DTYPE_MASK_ENTRY_(name, value, text, bytes) | (1u << (unsigned)(name))
#define PLAIT_DTYPE_MASK_ALL (0u PLAIT_DTYPE_LIST(PLAIT_DTYPE_MASK_ENTRY_))
#define PLAIT_OP_MASK_ENTRY_(name, value, text) | (1u << (unsigned)(name))
#define PLAIT_OP_MASK_ALL (0u PLAIT_OP_LIST(PLAIT_OP_MASK_ENTRY_))

/* 1 when dtype / op is a value of its enum, else 0. */
static inline int plait_dtype_valid_inline(plait_dtype_t dtype) {
  return (unsigned)dtype < (unsigned)PLAIT_DTYPE_COUNT_;
}
static inline int plait_op_valid_inline(plait_op_t op) {
  return (unsigned)op < (unsigned)PLAIT_OP_COUNT_;
}

/* Bytes per element of dtype; 0 for a value outside the enum. */
static inline size_t plait_dtype_size_inline(plait_dtype_t dtype) {
  switch (dtype) {
#define PLAIT_DTYPE_SIZE_CASE_(name, value, text, bytes) \
  case name:                                             \
    return bytes;
    PLAIT_DTYPE_LIST(PLAIT_DTYPE_SIZE_CASE_)
#undef PLAIT_DTYPE_SIZE_CASE_
    default:
      return 0;
  }
}

/* "float32"; NULL for a value outside the enum. */
static inline const char *plait_dtype_name_inline(plait_dtype_t dtype) {
  switch (dtype) {
#define PLAIT_DTYPE_NAME_CASE_(name, value, text, bytes) \
  case name:                                             \
    return text;
    PLAIT_DTYPE_LIST(PLAIT_DTYPE_NAME_CASE_)
#undef PLAIT_DTYPE_NAME_CASE_
    default:
      return NULL;
  }
}

/* "sum"; NULL for a value outside the enum. */
static inline const char *plait_op_name_inline(plait_op_t op) {
  switch (op) {
#define PLAIT_OP_NAME_CASE_(name, value, text) \
  case name:                                   \
    return text;
    PLAIT_OP_LIST(PLAIT_OP_NAME_CASE_)
#undef PLAIT_OP_NAME_CASE_
    default:
      return NULL;
  }
}

/* "PLAIT_ERR_PEER_LOST"; "PLAIT_RESULT_UNKNOWN" for an unknown code. */
static inline const char *plait_result_name_inline(plait_result_t result) {
  switch (result) {
#define PLAIT_RESULT_NAME_CASE_(name, value, message) \
  case name:                                          \
    return #name;
    PLAIT_RESULT_LIST(PLAIT_RESULT_NAME_CASE_)
#undef PLAIT_RESULT_NAME_CASE_
    default:
      return "PLAIT_RESULT_UNKNOWN";
  }
}

/* "a peer rank was lost"; "unknown result code" for an unknown code. */
static inline const char *plait_strerror_inline(plait_result_t result) {
  switch (result) {
#define PLAIT_STRERROR_CASE_(name, value, message) \
  case name:                                       \
    return message;
    PLAIT_RESULT_LIST(PLAIT_STRERROR_CASE_)
#undef PLAIT_STRERROR_CASE_
    default:
      return "unknown result code";
  }
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PLAIT_DTYPES_H */
