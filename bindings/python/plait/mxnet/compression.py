"""Gradient compression for DistributedTrainer (horovod.mxnet.compression)."""


class Compressor(object):
    """Interface: compress(tensor) -> (tensor, ctx); decompress(tensor, ctx)."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends gradients as they are (the default)."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point gradients as float16, cast back after."""

    @staticmethod
    def compress(tensor):
        if "float" in str(tensor.dtype):
            return tensor.astype("float16", copy=False), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if "float" in str(ctx):
            return tensor.astype(ctx, copy=False)
        return tensor


class Compression(object):
    """Compression.none (default) and Compression.fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor
