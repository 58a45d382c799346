"""plait.torch collective operations: Horovod's horovod.torch API on plait.

Every operation is submitted to plait's coordinator thread and completes
asynchronously; the *_async functions return an integer handle for poll() and
synchronize(), exactly as in Horovod. Tensors are matched across ranks by
name; without a name, each kind of operation numbers its calls, so every rank
must then issue them in the same order.

CPU tensors of every dtype torch has are accepted: reductions need a dtype
plait can reduce (complex tensors reduce as pairs of reals for Sum and
Average); allgather, broadcast and alltoall move any dtype as bytes.
Non-contiguous tensors are copied to contiguous memory (and back, for the
in-place operations).
"""

import ctypes

import torch

from plait import _core
from plait.torch._handles import _Pending, _auto_name, _register, synchronize
from plait.torch._tensors import (
    _COMPLEX, _check_rows, _check_tensor, _describe, _from_output, _movable, _options,
    _reducible, _resolve_op,
)
from plait.torch.basics import Average, Max, Min, Product, Sum, _check_process_set, rank, size
from plait.torch.compression import Compression


# --------------------------------------------------------------------------
# allreduce
# --------------------------------------------------------------------------

def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, what):
    """Submits an allreduce of tensor into output (output is tensor for in
    place); returns a handle whose result is output."""
    _check_tensor(tensor, what)
    src = tensor.contiguous()
    in_place = output is tensor
    rsrc, code = _reducible(src, op, what)
    name = _auto_name("allreduce", name)
    opts = _options(prescale_factor, postscale_factor)
    tin = _describe(rsrc, code)
    if in_place:  # the hot path (DistributedOptimizer): one description serves both
        dst, tout = src, tin
    else:
        dst = torch.empty_like(src, memory_format=torch.contiguous_format)
        tout = _describe(_reducible(dst, op, what)[0], code)
    h = _core.submit(_core.lib.plait_allreduce_async, name, (src, dst, tin, tout, opts),
                     _core.encode_name(name), ctypes.byref(tin), ctypes.byref(tout), op, opts)

    def finish(_h):
        if in_place:
            if src.data_ptr() != tensor.data_ptr():
                tensor.copy_(src)
            return tensor
        return dst
    return _register(_Pending(h, finish))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    """Starts reducing tensor over all ranks into a new tensor; returns a handle.
    op: Average (default), Sum, Min, Max or Product."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "allreduce_async")
    return _allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                            "allreduce_async")


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    """In-place allreduce_async: tensor holds the result after synchronize()."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "allreduce_async_")
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor,
                            "allreduce_async_")


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    """In-place allreduce; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _others_product(x, name):
    """For each element, the product of every other rank's value (for the
    gradient of Product), exact with zeros."""
    zero = (x == 0)
    nonzero = torch.where(zero, torch.ones_like(x), x)
    prod_nz = synchronize(_allreduce_async(nonzero, None, name + ".grad.prod", Product,
                                           1.0, 1.0, "allreduce"))
    zeros = synchronize(_allreduce_async(zero.to(torch.int32), None, name + ".grad.zeros",
                                         Sum, 1.0, 1.0, "allreduce"))
    others = prod_nz / nonzero
    return torch.where(zeros - zero.to(torch.int32) > 0, torch.zeros_like(x), others)


class _Allreduce(torch.autograd.Function):
    """Gradient of the sum over ranks of each rank's loss."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.scale = prescale_factor * postscale_factor
        ctx.name = name
        out = synchronize(_allreduce_async(tensor, None, name, op, prescale_factor,
                                           postscale_factor, "allreduce"))
        if op in (Min, Max, Product):
            ctx.save_for_backward(tensor, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        gname = None if ctx.name is None else ctx.name + ".grad"
        if ctx.op in (Sum, Average):
            g = synchronize(_allreduce_async(grad, None, gname, ctx.op, 1.0, 1.0, "allreduce"))
            return g * ctx.scale, None, None, None, None
        x, out = ctx.saved_tensors
        total = synchronize(_allreduce_async(grad, None, gname, Sum, 1.0, 1.0, "allreduce"))
        if ctx.op == Product:
            base = gname or _auto_name("allreduce", None)
            return total * _others_product(x, base) * ctx.scale, None, None, None, None
        # Min/Max: the ranks holding the extreme share the gradient equally.
        hit = (x * ctx.scale == out).to(grad.dtype)
        hits = synchronize(_allreduce_async(hit, None, None if gname is None else gname + ".ties",
                                            Sum, 1.0, 1.0, "allreduce"))
        return total * hit / hits.clamp(min=1) * ctx.scale, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Reduces tensor over all ranks; returns a new tensor (tensor is not
    modified). Differentiable. op: Average (default), Sum, Min, Max, Product."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "allreduce")
    _check_tensor(tensor, "allreduce")
    compressed, cctx = compression.compress(tensor)
    out = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(out, cctx)


# --------------------------------------------------------------------------
# grouped allreduce
# --------------------------------------------------------------------------

def _grouped_allreduce_async(tensors, in_place, name, op, prescale_factor, postscale_factor,
                             what):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("plait.torch.%s: the group is empty" % what)
    base = _auto_name("grouped_allreduce", name)
    n = len(tensors)
    names = [("%s.%d" % (base, i)).encode("utf-8") for i in range(n)]
    ins = (_core.Tensor * n)()
    outs = (_core.Tensor * n)()
    srcs, dsts = [], []
    for i, t in enumerate(tensors):
        _check_tensor(t, what)
        src = t.contiguous()
        dst = src if in_place else torch.empty_like(src, memory_format=torch.contiguous_format)
        rsrc, code = _reducible(src, op, what)
        rdst, _ = _reducible(dst, op, what)
        ins[i] = _describe(rsrc, code)
        outs[i] = _describe(rdst, code)
        srcs.append(src)
        dsts.append(dst)
    cnames = (ctypes.c_char_p * n)(*names)
    opts = _options(prescale_factor, postscale_factor)
    h = _core.submit(_core.lib.plait_grouped_allreduce_async, base,
                     (srcs, dsts, ins, outs, cnames, opts), n, cnames, ins, outs, op, opts)

    def finish(_h):
        if not in_place:
            return dsts
        for t, s in zip(tensors, srcs):
            if s.data_ptr() != t.data_ptr():
                t.copy_(s)
        return tensors
    return _register(_Pending(h, finish))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    """Starts an allreduce of a list of tensors negotiated and run as one
    unit; synchronize() returns the list of new tensors."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "grouped_allreduce_async")
    return _grouped_allreduce_async(tensors, False, name, op, prescale_factor,
                                    postscale_factor, "grouped_allreduce_async")


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    _check_process_set(process_set)
    op = _resolve_op(op, average, "grouped_allreduce_async_")
    return _grouped_allreduce_async(tensors, True, name, op, prescale_factor,
                                    postscale_factor, "grouped_allreduce_async_")


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, *tensors):
        ctx.op = op
        ctx.scale = prescale_factor * postscale_factor
        ctx.name = name
        return tuple(synchronize(_grouped_allreduce_async(
            tensors, False, name, op, prescale_factor, postscale_factor, "grouped_allreduce")))

    @staticmethod
    def backward(ctx, *grads):
        if ctx.op not in (Sum, Average):
            raise NotImplementedError("plait.torch.grouped_allreduce: gradients are "
                                      "defined for Sum and Average only")
        gname = None if ctx.name is None else ctx.name + ".grad"
        out = synchronize(_grouped_allreduce_async(
            [g.contiguous() for g in grads], False, gname, ctx.op, 1.0, 1.0,
            "grouped_allreduce"))
        return (None, None, None, None) + tuple(g * ctx.scale for g in out)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Reduces a list of tensors as one unit; returns a list of new tensors.
    Differentiable for Sum and Average."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "grouped_allreduce")
    tensors = list(tensors)
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor,
                                   *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


# --------------------------------------------------------------------------
# allgather
# --------------------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating tensor from every rank along the first dimension
    (which may differ between ranks); synchronize() returns the result."""
    _check_process_set(process_set)
    _check_tensor(tensor, "allgather_async")
    _check_rows(tensor, "allgather_async")
    src = tensor.contiguous()
    view, code, back = _movable(src)
    name = _auto_name("allgather", name)
    tin = _describe(view, code)
    h = _core.submit(_core.lib.plait_allgather_async, name, (src, view, tin),
                     _core.encode_name(name), ctypes.byref(tin), None)

    def finish(hh):
        out = _from_output(hh.output())
        return back(out) if back is not None else out
    return _register(_Pending(h, finish))


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = tensor.shape[0]
        ctx.name = name
        return synchronize(allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad):
        gname = None if ctx.name is None else ctx.name + ".grad"
        total = synchronize(_allreduce_async(grad, None, gname, Sum, 1.0, 1.0, "allgather"))
        rows = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64),
                                           None if gname is None else gname + ".rows"))
        offset = int(rows[:rank()].sum())
        return total.narrow(0, offset, ctx.rows), None


def allgather(tensor, name=None, process_set=None):
    """Concatenates tensor from every rank along the first dimension.
    Differentiable: the gradient is the sum over ranks of the gradient of the
    output, sliced to this rank's rows."""
    _check_process_set(process_set)
    _check_tensor(tensor, "allgather")
    _check_rows(tensor, "allgather")
    return _Allgather.apply(tensor, name)


# --------------------------------------------------------------------------
# broadcast
# --------------------------------------------------------------------------

def _broadcast_async(tensor, in_place, root_rank, name, what):
    _check_tensor(tensor, what)
    if not isinstance(root_rank, int) or isinstance(root_rank, bool):
        raise TypeError("plait.torch.%s: root_rank must be an int, not %s"
                        % (what, type(root_rank).__name__))
    buf = tensor.clone(memory_format=torch.contiguous_format) if not in_place \
        else tensor.contiguous()
    view, code, back = _movable(buf)
    name = _auto_name("broadcast", name)
    t = _describe(view, code)
    h = _core.submit(_core.lib.plait_broadcast_async, name, (buf, view, t),
                     _core.encode_name(name), ctypes.byref(t), root_rank, None)

    def finish(_h):
        if in_place:
            if buf.data_ptr() != tensor.data_ptr():
                tensor.copy_(buf)
            return tensor
        return buf
    return _register(_Pending(h, finish))


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Starts replacing a copy of tensor with root_rank's; synchronize()
    returns the copy."""
    _check_process_set(process_set)
    return _broadcast_async(tensor, False, root_rank, name, "broadcast_async")


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    _check_process_set(process_set)
    return _broadcast_async(tensor, True, root_rank, name, "broadcast_async_")


def broadcast_(tensor, root_rank, name=None, process_set=None):
    """Replaces tensor with root_rank's, in place; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        ctx.name = name
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad):
        gname = None if ctx.name is None else ctx.name + ".grad"
        total = synchronize(_allreduce_async(grad, None, gname, Sum, 1.0, 1.0, "broadcast"))
        if rank() != ctx.root_rank:
            total = torch.zeros_like(total)
        return total, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    """root_rank's tensor on every rank, as a new tensor. Differentiable: the
    root's gradient is the sum over ranks; the others' is zero."""
    _check_process_set(process_set)
    _check_tensor(tensor, "broadcast")
    return _Broadcast.apply(tensor, root_rank, name)


# --------------------------------------------------------------------------
# alltoall
# --------------------------------------------------------------------------

def _splits_array(splits, n, what):
    if splits is None:
        return None, None
    if isinstance(splits, torch.Tensor):
        values = [int(v) for v in splits.reshape(-1).tolist()]
    else:
        values = [int(v) for v in splits]
    if len(values) != n:
        raise ValueError("plait.torch.%s: splits has %d entries but there are %d ranks"
                         % (what, len(values), n))
    arr = (ctypes.c_int64 * n)(*values)
    return arr, values


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """Starts sending splits[r] first-dimension rows of tensor to rank r (equal
    parts when splits is None); synchronize() returns the received rows in
    rank order, and with splits given, also how many came from each rank."""
    _check_process_set(process_set)
    _check_tensor(tensor, "alltoall_async")
    _check_rows(tensor, "alltoall_async")
    n = size()
    arr, _ = _splits_array(splits, n, "alltoall_async")
    src = tensor.contiguous()
    view, code, back = _movable(src)
    name = _auto_name("alltoall", name)
    tin = _describe(view, code)
    h = _core.submit(_core.lib.plait_alltoall_async, name, (src, view, tin, arr),
                     _core.encode_name(name), ctypes.byref(tin), arr, None)
    want_splits = splits is not None

    def finish(hh):
        out = _from_output(hh.output())
        if back is not None:
            out = back(out)
        if want_splits:
            return out, torch.tensor(hh.splits(n), dtype=torch.int32)
        return out
    return _register(_Pending(h, finish))


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name):
        ctx.name = name
        out, received = synchronize(alltoall_async(
            tensor, splits if splits is not None else [tensor.shape[0] // size()] * size(),
            name))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _grad_splits):
        gname = None if ctx.name is None else ctx.name + ".grad"
        g, _ = synchronize(alltoall_async(grad.contiguous(), ctx.received, gname))
        return g, None, None


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Sends splits[r] rows of tensor to rank r; returns the rows received in
    rank order, and when splits is given also the received splits (an int32
    tensor), as Horovod does. Differentiable."""
    _check_process_set(process_set)
    _check_tensor(tensor, "alltoall")
    _check_rows(tensor, "alltoall")
    if splits is None and tensor.shape[0] % size() != 0:
        raise ValueError("plait.torch.alltoall: without splits the first dimension (%d) "
                         "must divide by the number of ranks (%d)" % (tensor.shape[0], size()))
    out, received = _Alltoall.apply(tensor, splits, name)
    return (out, received) if splits is not None else out


# --------------------------------------------------------------------------
# reducescatter
# --------------------------------------------------------------------------

def reducescatter_async(tensor, name=None, op=Average, process_set=None, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing tensor over all ranks; rank r receives its block of
    first-dimension rows (the first rows % size ranks get one more)."""
    _check_process_set(process_set)
    _check_tensor(tensor, "reducescatter_async")
    _check_rows(tensor, "reducescatter_async")
    op = _resolve_op(op, None, "reducescatter_async")
    src = tensor.contiguous()
    rsrc, code = _reducible(src, op, "reducescatter_async")
    name = _auto_name("reducescatter", name)
    opts = _options(prescale_factor, postscale_factor)
    tin = _describe(rsrc, code)
    h = _core.submit(_core.lib.plait_reducescatter_async, name, (src, rsrc, tin, opts),
                     _core.encode_name(name), ctypes.byref(tin), op, opts)
    is_complex = tensor.dtype in _COMPLEX

    def finish(hh):
        out = _from_output(hh.output())
        return torch.view_as_complex(out) if is_complex else out
    return _register(_Pending(h, finish))


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor):
        if op not in (Sum, Average):
            ctx.op = None
        else:
            ctx.op = op
        ctx.scale = prescale_factor * postscale_factor
        ctx.name = name
        return synchronize(reducescatter_async(tensor, name, op, None, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad):
        if ctx.op is None:
            raise NotImplementedError("plait.torch.reducescatter: gradients are defined "
                                      "for Sum and Average only")
        gname = None if ctx.name is None else ctx.name + ".grad"
        g = synchronize(allgather_async(grad.contiguous(), gname))
        if ctx.op == Average:
            g = g / size()
        return g * ctx.scale, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces tensor over all ranks and returns this rank's block of rows.
    op: Average (Horovod's default) or Sum, Min, Max, Product. Differentiable
    for Sum and Average."""
    _check_process_set(process_set)
    op = _resolve_op(op, None, "reducescatter")
    _check_tensor(tensor, "reducescatter")
    _check_rows(tensor, "reducescatter")
    compressed, cctx = compression.compress(tensor)
    out = _Reducescatter.apply(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(out, cctx)


# --------------------------------------------------------------------------
# join, barrier
# --------------------------------------------------------------------------

def join(device=-1):
    """This rank has no more batches: it takes part in the other ranks'
    allreduces (with the op's identity) and allgathers (with no rows) until
    every rank has joined. Returns the last rank to join."""
    h = _core.submit(_core.lib.plait_join_async, "join", None, None)
    try:
        h.wait()
        return h.join_rank()
    finally:
        h.release()


def barrier(process_set=None):
    """Returns when every rank has reached the barrier."""
    _check_process_set(process_set)
    h = _core.submit(_core.lib.plait_barrier_async, "barrier", None, None)
    try:
        h.wait()
    finally:
        h.release()
