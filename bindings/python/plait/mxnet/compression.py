"""Gradient compression for DistributedTrainer (horovod.mxnet.compression):
the compressors of plait.common.ops over MXNet's (numpy) dtypes."""

from plait.common import ops as _ops
from plait.common.ops import Compressor, NoneCompressor  # noqa: F401


class FP16Compressor(_ops.FP16Compressor):
    """Sends floating-point gradients as float16, cast back after."""
    float16 = "float16"

    @staticmethod
    def is_float(dtype):
        return "float" in str(dtype)

    @staticmethod
    def cast(tensor, dtype):
        return tensor.astype(dtype, copy=False)


class Compression(_ops.Compression):
    """Compression.none (default) and Compression.fp16."""
    fp16 = FP16Compressor
