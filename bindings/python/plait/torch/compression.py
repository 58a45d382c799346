"""Gradient compression for allreduce, as in horovod.torch.Compression: the
compressors of plait.common.ops over torch's dtypes."""

import torch

from plait.common import ops as _ops
from plait.common.ops import Compressor, NoneCompressor  # noqa: F401


class FP16Compressor(_ops.FP16Compressor):
    """Sends floating-point tensors as float16 (half the bytes); other dtypes
    as they are. The result comes back in the original dtype."""
    float16 = torch.float16

    @staticmethod
    def is_float(dtype):
        return dtype.is_floating_point

    @staticmethod
    def cast(tensor, dtype):
        return tensor.to(dtype)


class Compression(_ops.Compression):
    """Horovod's names: Compression.none and Compression.fp16."""
    fp16 = FP16Compressor
