/* Reading the public ABI's size-prefixed structs (plait.h, "Size-prefixed
 * structs"): any struct_size from the first published layout up; fields the
 * caller's struct does not hold take their defaults; bytes beyond what this
 * library knows must be zero. Pure functions, any thread. */
#ifndef PLAIT_API_STRUCT_SIZE_H
#define PLAIT_API_STRUCT_SIZE_H

#include <stddef.h>

#include "plait/plait.h"

/* Largest struct_size accepted: anything above is taken for an unset field. */
#define PLAIT_STRUCT_SIZE_MAX 4096

/*
 * Reads the struct at in (its struct_size is its first size_t) over out,
 * which the caller has filled with the defaults of every field and which is
 * `known` bytes long (sizeof the struct in this library). v1 is the size of
 * the struct's first published layout; fn, what and type name the call, the
 * argument and the struct in messages ("plait_allreduce_async", "opts",
 * "plait_op_options_t"). On success out->struct_size is `known`.
 * Errors: PLAIT_ERR_INVALID_ARGUMENT (struct_size below v1 or over
 * PLAIT_STRUCT_SIZE_MAX), PLAIT_ERR_UNSUPPORTED (a non-zero byte the library
 * does not know). out is unchanged on error.
 */
plait_result_t plait_struct_read(const char *fn, const char *what, const char *type,
                                 const void *in, size_t v1, size_t known, void *out);

/* plait_struct_read for plait_op_options_t: *out gets opts over the defaults
 * (PLAIT_OP_OPTIONS_INIT), or the defaults alone when opts is NULL. */
plait_result_t plait_op_options_read(const char *fn, const plait_op_options_t *opts,
                                     plait_op_options_t *out);

/* plait_struct_read for plait_tensor_t (t not NULL). */
plait_result_t plait_tensor_read(const char *fn, const char *what, const plait_tensor_t *t,
                                 plait_tensor_t *out);

/* Checks member i of an array of tensors laid out with member 0's
 * struct_size as stride, after member 0 was read by plait_tensor_read: that
 * stride is a multiple of the struct's alignment, and member i has the same
 * struct_size. PLAIT_ERR_INVALID_ARGUMENT otherwise; what names the array's
 * tensor ("input"). */
plait_result_t plait_tensor_member_check(const char *fn, const char *what,
                                         const plait_tensor_t *array, size_t i);

/* Member i of such an array (stride: member 0's struct_size). */
const plait_tensor_t *plait_tensor_at(const plait_tensor_t *array, size_t i);

#endif
