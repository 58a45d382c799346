/*
 * Internal: the core's element-wise kernels, handed to transport plugins as
 * plait_transport_init_args_t.reduce, .scale, .divide and .reduce_scale
 * (their types are plait_reduce_fn, plait_scale_fn, plait_divide_fn and
 * plait_reduce_scale_fn in plait/transport.h).
 * Not exported from libplait.so.
 *
 * Common to all three:
 *  - Thread-safe, no state, never block, never allocate.
 *  - dst may be the same pointer as any input (in place); buffers must not
 *    otherwise overlap. Pointers must be aligned for the element type.
 *  - An unknown dtype or op is PLAIT_ERR_INVALID_ARGUMENT, checked even when
 *    count is 0. count 0 succeeds with any pointers (NULL included); a NULL
 *    pointer with count > 0 is PLAIT_ERR_INVALID_ARGUMENT.
 *  - On error nothing is written. They return a code only; they do not set
 *    the thread's last-error message (the caller words that).
 */
#ifndef PLAIT_REDUCE_H
#define PLAIT_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "plait/transport.h"

/*
 * dst[i] = a[i] op b[i] for i < count.
 *  - Integers: SUM and PRODUCT wrap modulo 2^bits (two's complement for the
 *    signed types); MIN and MAX are exact.
 *  - bool: SUM and MAX are logical OR, MIN and PRODUCT logical AND; any
 *    nonzero input byte is true and every output byte is 0 or 1.
 *  - Floating types: IEEE arithmetic of the type; float16 and bfloat16 are
 *    computed in float32 and rounded back to nearest even. MIN and MAX return
 *    NaN when either input is NaN (like torch.minimum); between equal inputs
 *    (+0 and -0) they return a[i].
 *  - AVERAGE reduces as SUM (the caller divides at the end); AVERAGE on bool
 *    is PLAIT_ERR_INVALID_ARGUMENT.
 */
plait_result_t plait_reduce(plait_dtype_t dtype, plait_op_t op, void *dst,
                            const void *a, const void *b, size_t count);

/*
 * dst[i] = src[i] * factor.
 *  - float64: x * factor.
 *  - float32: (float)factor * x, a float multiplication (Horovod 0.28's
 *    ScaleBufferCPUImpl, which plait matches bit for bit).
 *  - float16, bfloat16: converted to float32, multiplied as float32, then
 *    rounded to nearest even.
 *  - Integers: (double)x * factor truncated toward zero, saturating at the
 *    type's limits; a NaN product (factor NaN, or 0 * Inf) gives 0. int64
 *    values beyond 2^53 lose precision in the double.
 *  - bool: PLAIT_ERR_INVALID_ARGUMENT.
 */
plait_result_t plait_scale(plait_dtype_t dtype, void *dst, const void *src,
                           size_t count, double factor);

/*
 * dst[i] = src[i] / divisor; how AVERAGE finishes a SUM.
 *  - Integers: exact division truncating toward zero (divisor is positive,
 *    so no value overflows: INT_MIN / 1 is INT_MIN).
 *  - float64: x / (double)divisor; float32: x / (float)divisor; float16 and
 *    bfloat16: in float32, then rounded to nearest even.
 *  - divisor 0 is PLAIT_ERR_INVALID_ARGUMENT for every dtype (floating types
 *    included: an average over zero ranks is a bug, not Inf).
 *  - bool: PLAIT_ERR_INVALID_ARGUMENT.
 */
plait_result_t plait_divide(plait_dtype_t dtype, void *dst, const void *src,
                            size_t count, uint32_t divisor);

/*
 * dst[i] = (a[i] op b[i]) * factor in one pass over memory: plait_reduce
 * then plait_scale, bit for bit (the sum is rounded to the dtype before it
 * is scaled, as two separate calls would), run a cache-sized block at a
 * time. factor 1.0 is plait_reduce alone. dst may be a or b. Errors: those of
 * plait_reduce, and of plait_scale when factor != 1.0 (bool).
 */
plait_result_t plait_reduce_scale(plait_dtype_t dtype, plait_op_t op, void *dst,
                                  const void *a, const void *b, size_t count,
                                  double factor);

#endif /* PLAIT_REDUCE_H */
