"""Gradient compression for allreduce, as horovod.tensorflow.Compression."""

import tensorflow as tf


class Compressor:
    """Turns a tensor into what is sent, and back."""

    @staticmethod
    def compress(tensor):
        """Returns (tensor to send, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 (others as they are)."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating:
            return tf.cast(tensor, dtype=tf.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx.is_floating:
            return tf.cast(tensor, dtype=ctx)
        return tensor


class Compression:
    """The compressors: Compression.none and Compression.fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor
