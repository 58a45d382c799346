"""Gradient compression for allreduce, as in horovod.torch.Compression."""

import torch


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
    """Sends floating-point tensors as float16 (half the bytes); other dtypes
    as they are. The result comes back in the original dtype."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor.to(ctx) if ctx is not None else tensor


class Compression:
    """Horovod's names: Compression.none and Compression.fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor
