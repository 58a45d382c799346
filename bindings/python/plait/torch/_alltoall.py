"""plait.torch's alltoall (Horovod's hvd.alltoall and alltoall_async), with
its gradient; re-exported by plait.torch.mpi_ops, where the other operations
live."""

import ctypes
import math
import numbers

import torch

from plait import _core
from plait.torch import _cuda
from plait.torch._groups import _grad_name, _op_name
from plait.torch._handles import _then, submit, synchronize
from plait.torch._tensors import (
    _check_rows, _check_tensor, _describe, _movable, _op_options, _output, _staged,
)
from plait.torch.basics import _check_process_set, global_process_set, size

def _splits_array(splits, n, what):
    """splits as a C int64 array of n entries (None: equal parts).

    A tensor of splits must hold integers, whatever its values: Horovod
    refuses any other dtype ("alltoall expects splits to contain 32-bit
    integer elements", a ValueError), and truncating floats would make the
    outcome depend on the values (NaN refused on one rank, 0.0 taken on
    another). A list is converted as Horovod's torch.tensor(splits,
    dtype=torch.int32) does: finite numbers truncated."""
    if splits is None:
        return None, None
    if isinstance(splits, torch.Tensor):
        if splits.is_floating_point() or splits.is_complex() or splits.dtype == torch.bool:
            raise _core.invalid(
                "plait.torch.%s: splits must be a tensor of integers, not %s (Horovod: "
                "alltoall expects splits to contain 32-bit integer elements)"
                % (what, splits.dtype))
        values = splits.reshape(-1).tolist()
    else:
        values = list(splits)
    if len(values) != n:
        raise ValueError("plait.torch.%s: splits has %d entries but there are %d ranks"
                         % (what, len(values), n))
    out = []
    for i, v in enumerate(values):
        label = "plait.torch.%s: splits[%d]" % (what, i)
        if not hasattr(v, "__index__") and isinstance(v, numbers.Real):
            if not math.isfinite(v):
                raise _core.invalid("%s is %r, not a number of rows" % (label, v))
            v = int(v)
        out.append(_core.c_integer(v, label, _core.INT64_RANGE))
    arr = (ctypes.c_int64 * n)(*out)
    return arr, out


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts sending splits[r] first-dimension rows of tensor to rank r (equal
    parts when splits is None); synchronize() returns, as Horovod's, the
    tuple (received rows in rank order, how many came from each rank); the
    latter is int32, or splits' dtype when splits is a tensor."""
    ps = _check_process_set(process_set, "alltoall_async")
    _check_tensor(tensor, "alltoall_async")
    _check_rows(tensor, "alltoall_async")
    n = size() if ps == 0 else process_set.size()
    if splits is None and tensor.shape[0] % n != 0:
        raise ValueError("plait.torch.alltoall_async: without splits the first dimension (%d) "
                         "must divide by the number of ranks (%d)" % (tensor.shape[0], n))
    arr, _ = _splits_array(splits, n, "alltoall_async")
    split_dtype = splits.dtype if isinstance(splits, torch.Tensor) else torch.int32
    if _staged(tensor):  # Horovod's CUDA-on-CPU path
        move = _cuda.back_to(tensor.device)
        return _then(alltoall_async(_cuda.to_host(tensor), splits, name, process_set),
                     lambda r: (move(r[0]), r[1]))
    src = tensor.contiguous()
    view, code, back = _movable(src)
    tin = _describe(view, code)
    opts, stream = _op_options(src, pset=ps)

    def finish(hh):
        out = _output(hh)
        if back is not None:
            out = back(out)
        return out, torch.tensor(hh.splits(n), dtype=split_dtype)
    with _op_name("alltoall", name, ps) as name:
        return submit(_core.gil.plait_alltoall_async,
                      (_core.encode_name(name), ctypes.byref(tin), arr, opts),
                      (src, view, tin, arr, opts, stream), name, finish)


class _Alltoall(torch.autograd.Function):
    """Horovod's HorovodAlltoall: gradients go back along the received
    splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        ctx.name = name
        ctx.process_set = process_set
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        if splits is None:
            return out
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, *_unused):
        g, _ = alltoall(grad, splits=ctx.received, name=_grad_name(ctx.name),
                        process_set=ctx.process_set)
        return g, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows of tensor to rank r; returns the rows received in
    rank order, and when splits is given also the received splits (int32,
    or splits' dtype when splits is a tensor), as Horovod does.
    Differentiable."""
    ps = _check_process_set(process_set, "alltoall")
    _check_tensor(tensor, "alltoall")
    _check_rows(tensor, "alltoall")
    n = size() if ps == 0 else process_set.size()
    if splits is None and tensor.shape[0] % n != 0:
        raise ValueError("plait.torch.alltoall: without splits the first dimension (%d) "
                         "must divide by the number of ranks (%d)" % (tensor.shape[0], n))
    return _Alltoall.apply(tensor, splits, name, process_set)
