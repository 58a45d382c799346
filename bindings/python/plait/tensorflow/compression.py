"""Gradient compression for allreduce, as horovod.tensorflow.Compression: the
compressors of plait.common.ops over TensorFlow's dtypes."""

import tensorflow as tf

from plait.common import ops as _ops
from plait.common.ops import Compressor, NoneCompressor  # noqa: F401


class FP16Compressor(_ops.FP16Compressor):
    """Sends floating-point tensors as float16 (others as they are)."""
    float16 = tf.float16

    @staticmethod
    def is_float(dtype):
        return dtype.is_floating

    @staticmethod
    def cast(tensor, dtype):
        return tf.cast(tensor, dtype=dtype)


class Compression(_ops.Compression):
    """The compressors: Compression.none and Compression.fp16."""
    fp16 = FP16Compressor
