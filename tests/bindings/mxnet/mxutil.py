"""Helpers of the plait.mxnet tests: NDArrays of every dtype from exact bit
patterns, and the reference results the C library must give."""

import ctypes

import mxnet as mx
import numpy as np

BF16 = np.dtype([("bfloat16", np.uint16)])
DTYPES = ["float32", "float64", "float16", "bfloat16", "uint8", "int8", "int32", "int64", "bool"]


def np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def f32_to_bf16_bits(x):
    """float32 values -> bfloat16 bits, rounded to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def nd(values, dtype):
    """An NDArray of dtype holding values (floats for bfloat16 are rounded)."""
    values = np.asarray(values)
    if dtype == "bfloat16":
        bits = np.ascontiguousarray(f32_to_bf16_bits(values.astype(np.float32)))
        out = mx.nd.empty(values.shape, dtype=BF16)
        mx.base.check_call(mx.base._LIB.MXNDArraySyncCopyFromCPU(
            out.handle, bits.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(bits.size)))
        return out
    return mx.nd.array(values.astype(np_dtype(dtype)), dtype=np_dtype(dtype))


def values(arr):
    """NDArray -> numpy (bfloat16 as float32)."""
    a = arr.asnumpy()
    if a.dtype == BF16:
        return bf16_bits_to_f32(a.view(np.uint16))
    return a


def scale(x, factor, dtype):
    """Horovod's (and plait's) CPU scaling of values x of dtype by factor:
    integers in double truncated toward zero; float32/16/bf16 in float32 by
    the factor rounded to float, 16-bit types rounded back; float64 in double."""
    if dtype in ("float64",):
        return np.asarray(x, dtype=np.float64) * factor
    if dtype in ("float32", "float16", "bfloat16"):
        y = np.asarray(x, dtype=np.float32) * np.float32(factor)
        if dtype == "float16":
            return y.astype(np.float16).astype(np.float32)
        if dtype == "bfloat16":
            return bf16_bits_to_f32(f32_to_bf16_bits(y))
        return y
    return np.trunc(np.asarray(x, dtype=np.float64) * factor).astype(np.int64)


def rank_values(rank, shape, dtype):
    """Small exact inputs of rank r: products and sums stay exact in every
    dtype for 3 ranks."""
    n = int(np.prod(shape)) if shape else 1
    base = (np.arange(n) % 3 + 1 + rank).reshape(shape)
    if dtype == "bool":
        return ((np.arange(n) + rank) % 3 == 0).reshape(shape)
    if dtype == "int8":
        return base - 2  # negatives too
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        return base * 0.5 - 1.0
    return base
