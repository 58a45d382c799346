/* Reading the public ABI's size-prefixed structs: see struct_size.h. */
#include "api/struct_size.h"

#include <string.h>

#include "util/error.h"

plait_result_t plait_struct_read(const char *fn, const char *what, const char *type,
                                 const void *in, size_t v1, size_t known, void *out) {
  size_t given;
  memcpy(&given, in, sizeof given);
  if (given < v1)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: %s->struct_size is %zu, less than %zu, "
                       "the size of the first layout of %s (set it to sizeof(%s))", fn, what,
                       given, v1, type, type);
  if (given > PLAIT_STRUCT_SIZE_MAX)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: %s->struct_size is %zu, more than any "
                       "%s can be (%d): is it set? (set it to sizeof(%s))", fn, what, given,
                       type, PLAIT_STRUCT_SIZE_MAX, type);
  const unsigned char *bytes = in;
  for (size_t i = known; i < given; i++)
    if (bytes[i])
      return plait_error(PLAIT_ERR_UNSUPPORTED, "%s: %s->struct_size is %zu but this plait "
                         "(%s) knows %zu bytes of %s, and byte %zu is not zero: the program "
                         "sets a field of a newer plait.h that this library does not have "
                         "(use a newer libplait, or leave that field at its default)", fn, what,
                         given, PLAIT_VERSION_STRING, known, type, i);
  memcpy(out, in, given < known ? given : known);
  memcpy(out, &known, sizeof known);
  return PLAIT_SUCCESS;
}

plait_result_t plait_op_options_read(const char *fn, const plait_op_options_t *opts,
                                     plait_op_options_t *out) {
  plait_op_options_t defaults = PLAIT_OP_OPTIONS_INIT;
  if (opts)
    PLAIT_CHECK(plait_struct_read(fn, "opts", "plait_op_options_t", opts,
                                  PLAIT_OP_OPTIONS_SIZE_V1, sizeof defaults, &defaults));
  *out = defaults;
  return PLAIT_SUCCESS;
}

plait_result_t plait_tensor_read(const char *fn, const char *what, const plait_tensor_t *t,
                                 plait_tensor_t *out) {
  plait_tensor_t defaults;
  memset(&defaults, 0, sizeof defaults);
  defaults.device = PLAIT_DEVICE_HOST;
  PLAIT_CHECK(plait_struct_read(fn, what, "plait_tensor_t", t, PLAIT_TENSOR_SIZE_V1,
                                sizeof defaults, &defaults));
  *out = defaults;
  return PLAIT_SUCCESS;
}

plait_result_t plait_tensor_member_check(const char *fn, const char *what,
                                         const plait_tensor_t *array, size_t i) {
  size_t stride = array->struct_size;
  if (stride % _Alignof(plait_tensor_t))
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: %s->struct_size is %zu, not a multiple "
                       "of %zu, so it cannot be the stride of an array of plait_tensor_t (set it "
                       "to sizeof(plait_tensor_t))", fn, what, stride,
                       (size_t)_Alignof(plait_tensor_t));
  size_t mine = plait_tensor_at(array, i)->struct_size;
  if (mine != stride)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: %s->struct_size is %zu but member 0's is "
                       "%zu: the members share one struct_size, the array's stride (set each to "
                       "sizeof(plait_tensor_t))", fn, what, mine, stride);
  return PLAIT_SUCCESS;
}

const plait_tensor_t *plait_tensor_at(const plait_tensor_t *array, size_t i) {
  return (const plait_tensor_t *)(const void *)((const char *)array + i * array->struct_size);
}
