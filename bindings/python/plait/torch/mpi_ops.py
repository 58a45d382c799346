"""plait.torch collective operations: Horovod's horovod.torch API on plait.

Every operation is submitted to plait's coordinator thread and completes
asynchronously; the *_async functions return an integer handle for poll() and
synchronize(), exactly as in Horovod. Tensors are matched across ranks by
name, which is Horovod's: name='x' on an allreduce is the operation
'allreduce.x' (so an allreduce and an allgather may share a name), a grouped
operation's tensors are '<kind>.<name>_<i>of<n>'; without a name, each kind
of operation numbers its calls ('allreduce.noname.<n>'), so every rank must
then issue them in the same order.

Gradients are Horovod 0.28.1's, formula for formula (allreduce: the same
allreduce of the gradient; allgather, grouped_allgather and broadcast: the
averaged gradient; reducescatter: the allgathered gradient, times size for
Sum, times the scale factors), except for allreduce's Min, Max and Product,
whose backward in Horovod reduces the gradients with the same op: plait
gives the true gradient there (docs/horovod-comparison.md).

CPU tensors of every dtype torch has are accepted: reductions need a dtype
plait can reduce (complex tensors reduce as pairs of reals for Sum and
Average); allgather, broadcast and alltoall move any dtype as bytes.
Non-contiguous tensors are copied to contiguous memory (and back, for the
in-place operations).
"""

import ctypes

import torch

from plait import _core, _raw
from plait.torch._groups import (
    _check_group, _grad_name, _group_names, _op_name, _submit_parts,
)
from plait.torch import _cuda, _fast
from plait.torch._alltoall import alltoall, alltoall_async  # noqa: F401 (its own module)
from plait.torch._handles import (
    _then, run, submit, synchronize,
)
from plait.torch._tensors import (
    _COMPLEX, _REDUCIBLE, ScalarAllgatherError, _check_rows, _check_tensor, _describe,
    _op_options,
    _output, _movable, _options, _reducible, _resolve_op, _staged,
)
from plait.torch.basics import (
    Average, Max, Min, Product, Sum, _check_process_set, global_process_set, rank, size,
)
from plait.common import ops as _ops
from plait.common.basics import c_op
from plait.common.names import AUTO_NAMES
from plait.torch.compression import Compression


# --------------------------------------------------------------------------
# allreduce
# --------------------------------------------------------------------------

def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, what,
                     pset=0):
    """Submits an allreduce of tensor into output (output is tensor for in
    place); returns a handle whose result is output."""
    _check_tensor(tensor, what)
    in_place = output is tensor
    if _staged(tensor):  # a host-only transport: Horovod's CUDA-on-CPU path
        host = _cuda.to_host(tensor)
        return _then(_allreduce_async(host, host if in_place else None, name, op,
                                      prescale_factor, postscale_factor, what, pset),
                     _cuda.into(tensor) if in_place else _cuda.back_to(tensor.device))
    src = tensor.contiguous()
    rsrc, code = _reducible(src, op, what)
    opts, stream = _op_options(src, prescale_factor, postscale_factor, pset)
    tin = _describe(rsrc, code)
    if in_place and src is tensor and stream is None and opts is None:
        # The hot path (DistributedOptimizer: a contiguous CPU gradient, no
        # factors, the global set). The library copies the description at
        # submission, so only the tensor is kept, and the handle's result is
        # that tensor: two objects live per operation in flight rather than
        # eleven, which kept Python's collector scanning them (~0.5 ms of a
        # 200-tensor step, mostly full collections of torch's objects).
        tin = ctypes.byref(tin)
        with _op_name("allreduce", name, pset) as name:
            return submit(_core.gil.plait_allreduce_async,
                          (_core.encode_name(name), tin, tin, c_op(op), None), tensor, name)
    if in_place:  # one description serves both
        dst, tout = src, tin
    else:
        dst = torch.empty_like(src, memory_format=torch.contiguous_format)
        tout = _describe(_reducible(dst, op, what)[0], code)

    def finish(_h):
        if in_place:
            if src.data_ptr() != tensor.data_ptr():
                tensor.copy_(src)
            return tensor
        return dst
    with _op_name("allreduce", name, pset) as name:
        return submit(_core.gil.plait_allreduce_async,
                      (_core.encode_name(name), ctypes.byref(tin), ctypes.byref(tout), c_op(op),
                       opts), (src, dst, tin, tout, opts, stream), name, finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing tensor over all ranks into a new tensor; returns a handle.
    op: Average (default), Sum, Min, Max or Product."""
    ps = _check_process_set(process_set, "allreduce_async")
    op = _resolve_op(op, average, "allreduce_async")
    return _allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                            "allreduce_async", ps)


# The C op argument of each op the short path takes (None: Average).
_FAST_OPS = {k: _raw.carg_int(c_op(v)) for k, v in
             {None: Average, Average: Average, Sum: Sum, Min: Min, Max: Max,
              Product: Product}.items()}
_Tensor = torch.Tensor
_fast_allreduce = _fast.allreduce_async_


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce_async: tensor holds the result after synchronize()."""
    # The DistributedOptimizer's call, once per gradient per step, takes the
    # short path (plait.torch._fast) when these arguments settle it: what it
    # refuses falls through to the general path, which raises the error.
    if (type(tensor) is _Tensor and average is None and prescale_factor == 1.0
            and postscale_factor == 1.0 and process_set is global_process_set
            and type(name) is str and (op is None or type(op) is int)):
        cop = _FAST_OPS.get(op)
        if cop is not None:
            hid = _fast_allreduce(tensor, name, cop)
            if hid is not None:
                return hid
    ps = _check_process_set(process_set, "allreduce_async_")
    op = _resolve_op(op, average, "allreduce_async_")
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor,
                            "allreduce_async_", ps)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _sum(t, name, pset=0):
    return synchronize(_allreduce_async(t, None, name, Sum, 1.0, 1.0, "allreduce", pset))


def _sub(name, suffix):
    return None if name is None else name + suffix


def _prescaled(x, pre):
    """x * pre rounded as the core's prescale (Horovod's ScaleBuffer): in
    float32 by the factor rounded to float32 for float32, float16 and
    bfloat16; in double for float64."""
    if pre == 1.0:
        return x
    if x.dtype == torch.float64:
        return x * pre
    return (x.float() * torch.tensor(pre, dtype=torch.float32)).to(x.dtype)


def _true_grad(x, total, op, pre, post, name, pset=0):
    """The gradient for Min, Max and Product (plait's, not Horovod's): of
    y = post * op_k(pre * x_k) with respect to this rank's x, given total,
    the sum over ranks of the gradients of y.

    Product: post * pre * the product of the other ranks' pre * x (exact with
    zeros). Min/Max: post * pre on the ranks whose pre * x is the extreme,
    shared equally between tied ranks, zero elsewhere; the extreme is
    found by reducing pre * x itself, so the comparison is exact whatever
    the factors (_prescaled rounds as the core's prescale)."""
    s = _prescaled(x, pre)
    scale = pre * post
    if op == Product:
        zero = (s == 0)
        nonzero = torch.where(zero, torch.ones_like(s), s)
        prod_nz = synchronize(_allreduce_async(nonzero, None, _sub(name, ".prod"), Product,
                                               1.0, 1.0, "allreduce", pset))
        zeros = _sum(zero.to(torch.int32), _sub(name, ".zeros"), pset)
        others = torch.where(zeros - zero.to(torch.int32) > 0, torch.zeros_like(s),
                             prod_nz / nonzero)
        return total * others * scale
    extreme = synchronize(_allreduce_async(s, None, _sub(name, ".extreme"), op, 1.0, 1.0,
                                           "allreduce", pset))
    hit = (s == extreme).to(total.dtype)
    hits = _sum(hit, _sub(name, ".ties"), pset)
    return total * hit / hits.clamp(min=1) * scale


class _Allreduce(torch.autograd.Function):
    """Horovod's HorovodAllreduce; Min, Max and Product: the true gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.pre, ctx.post = prescale_factor, postscale_factor
        ctx.name = name
        ctx.process_set = process_set
        out = synchronize(_allreduce_async(tensor, None, name, op, prescale_factor,
                                           postscale_factor, "allreduce",
                                           _check_process_set(process_set)))
        if op in (Min, Max, Product):
            ctx.save_for_backward(tensor)
        return out

    @staticmethod
    def backward(ctx, grad):
        gname = _grad_name(ctx.name)
        if ctx.op in (Sum, Average):
            # Horovod: the same allreduce (op and factors) of the gradient.
            return (allreduce(grad, name=gname, op=ctx.op, prescale_factor=ctx.pre,
                              postscale_factor=ctx.post, process_set=ctx.process_set),
                    None, None, None, None, None)
        x, = ctx.saved_tensors
        ps = _check_process_set(ctx.process_set)
        total = _sum(grad, gname, ps)
        return (_true_grad(x, total, ctx.op, ctx.pre, ctx.post, gname, ps),
                None, None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces tensor over all ranks; returns a new tensor (tensor is not
    modified). Differentiable. op: Average (default), Sum, Min, Max, Product."""
    _check_process_set(process_set, "allreduce")
    op = _resolve_op(op, average, "allreduce")
    _check_tensor(tensor, "allreduce")
    compressed, cctx = compression.compress(tensor)
    out = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor, process_set)
    return compression.decompress(out, cctx)


# --------------------------------------------------------------------------
# grouped allreduce
# --------------------------------------------------------------------------

def _grouped_allreduce_async(tensors, in_place, name, op, prescale_factor, postscale_factor,
                             what, pset=0):
    tensors = _check_group(tensors, what)
    if any(_staged(t) for t in tensors):  # Horovod's CUDA-on-CPU path
        hosts = [_cuda.to_host(t) if t.is_cuda else t for t in tensors]
        back = [_cuda.into(t) if in_place else _cuda.back_to(t.device) for t in tensors]
        return _then(_grouped_allreduce_async(hosts, in_place, name, op, prescale_factor,
                                              postscale_factor, what, pset),
                     lambda rs: tuple(b(r) for b, r in zip(back, rs)))
    n = len(tensors)
    ins = (_core.Tensor * n)()
    outs = (_core.Tensor * n)()
    srcs, dsts = [], []
    for i, t in enumerate(tensors):
        src = t.contiguous()
        dst = src if in_place else torch.empty_like(src, memory_format=torch.contiguous_format)
        rsrc, code = _reducible(src, op, what)
        rdst, _ = _reducible(dst, op, what)
        ins[i] = _describe(rsrc, code)
        outs[i] = _describe(rdst, code)
        srcs.append(src)
        dsts.append(dst)
    opts, stream = _op_options(srcs[0], prescale_factor, postscale_factor, pset)

    def finish(_h):  # a tuple, as Horovod's synchronize() of a group
        if not in_place:
            return tuple(dsts)
        for t, s in zip(tensors, srcs):
            if s.data_ptr() != t.data_ptr():
                t.copy_(s)
        return tuple(tensors)
    with _op_name("grouped_allreduce", name, pset) as base:
        names = [_core.encode_name(nm) for nm in _group_names(base, n)]
        cnames = (ctypes.c_char_p * n)(*names)
        return submit(_core.gil.plait_grouped_allreduce_async,
                      (n, cnames, ins, outs, c_op(op), opts),
                      (srcs, dsts, ins, outs, cnames, opts, stream), names[0].decode("utf-8"),
                      finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce of a list of tensors negotiated and run as one
    unit; synchronize() returns the list of new tensors."""
    ps = _check_process_set(process_set, "grouped_allreduce_async")
    op = _resolve_op(op, average, "grouped_allreduce_async")
    return _grouped_allreduce_async(tensors, False, name, op, prescale_factor,
                                    postscale_factor, "grouped_allreduce_async", ps)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    ps = _check_process_set(process_set, "grouped_allreduce_async_")
    op = _resolve_op(op, average, "grouped_allreduce_async_")
    return _grouped_allreduce_async(tensors, True, name, op, prescale_factor,
                                    postscale_factor, "grouped_allreduce_async_", ps)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


class _GroupedAllreduce(torch.autograd.Function):
    """Horovod's HorovodGroupedAllreduce; Min, Max and Product: the true
    gradient of each tensor, as for allreduce."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.pre, ctx.post = prescale_factor, postscale_factor
        ctx.name = name
        ctx.process_set = process_set
        if op in (Min, Max, Product):
            ctx.save_for_backward(*tensors)
        return tuple(synchronize(_grouped_allreduce_async(
            tensors, False, name, op, prescale_factor, postscale_factor, "grouped_allreduce",
            _check_process_set(process_set))))

    @staticmethod
    def backward(ctx, *grads):
        gname = _grad_name(ctx.name)
        head = (None, None, None, None, None)
        if ctx.op in (Sum, Average):
            return head + tuple(grouped_allreduce(list(grads), name=gname, op=ctx.op,
                                                  prescale_factor=ctx.pre,
                                                  postscale_factor=ctx.post,
                                                  process_set=ctx.process_set))
        xs = ctx.saved_tensors
        ps = _check_process_set(ctx.process_set)
        totals = synchronize(_grouped_allreduce_async(
            [g.contiguous() for g in grads], False, gname, Sum, 1.0, 1.0, "grouped_allreduce",
            ps))
        return head + tuple(
            _true_grad(x, t, ctx.op, ctx.pre, ctx.post, _sub(gname, ".%d" % i), ps)
            for i, (x, t) in enumerate(zip(xs, totals)))


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one unit; returns a list of new tensors.
    Differentiable."""
    _check_process_set(process_set, "grouped_allreduce")
    op = _resolve_op(op, average, "grouped_allreduce")
    tensors = list(tensors)
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                   *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


# --------------------------------------------------------------------------
# allgather
# --------------------------------------------------------------------------

def _allgather_async(tensor, name, what, kind="allgather", pset=0):
    _check_tensor(tensor, what)
    _check_rows(tensor, what, ScalarAllgatherError)
    if _staged(tensor):  # Horovod's CUDA-on-CPU path
        return _then(_allgather_async(_cuda.to_host(tensor), name, what, kind, pset),
                     _cuda.back_to(tensor.device))
    src = tensor.contiguous()
    view, code, back = _movable(src)
    tin = _describe(view, code)
    opts, stream = _op_options(src, pset=pset)

    def finish(hh):
        out = _output(hh)
        return back(out) if back is not None else out
    with _op_name(kind, name, pset) as name:
        return submit(_core.gil.plait_allgather_async,
                      (_core.encode_name(name), ctypes.byref(tin), opts),
                      (src, view, tin, opts, stream), name, finish)


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating tensor from every rank along the first dimension
    (which may differ between ranks); synchronize() returns the result."""
    ps = _check_process_set(process_set, "allgather_async")
    return _allgather_async(tensor, name, "allgather_async", pset=ps)


def _rank_offsets(rows_list, name, process_set=global_process_set):
    """For each tensor, the first row of this rank's rows in the gathered
    tensor (every rank's row counts are allgathered as int32, as Horovod)."""
    counts = synchronize(grouped_allgather_async(
        [_cuda.placed(torch.tensor([r], dtype=torch.int32)) for r in rows_list], name,
        process_set))
    r = rank() if _check_process_set(process_set) == 0 else process_set.rank()
    return [int(c[:r].sum()) if r else 0 for c in counts]


class _Allgather(torch.autograd.Function):
    """Horovod's HorovodAllgather: the gradient is the allreduced (Average)
    gradient of the output, sliced to this rank's rows."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0]
        ctx.name = name
        ctx.process_set = process_set
        return synchronize(_allgather_async(tensor, name, "allgather",
                                            pset=_check_process_set(process_set)))

    @staticmethod
    def backward(ctx, grad):
        gname = _grad_name(ctx.name)
        reduced = allreduce(grad, name=gname, op=Average, process_set=ctx.process_set)
        offset, = _rank_offsets([ctx.rows], _sub(gname, ".rows"), ctx.process_set)
        return reduced.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates tensor from every rank along the first dimension.
    Differentiable (Horovod's gradient: this rank's rows of the averaged
    gradient of the output)."""
    _check_process_set(process_set, "allgather")
    _check_tensor(tensor, "allgather")
    _check_rows(tensor, "allgather", ScalarAllgatherError)
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts an allgather of each tensor of a list; synchronize() returns
    the tuple of results. Tensors are named as in Horovod
    ('grouped_allgather.<name>_<i>of<n>')."""
    ps = _check_process_set(process_set, "grouped_allgather_async")
    tensors = _check_group(tensors, "grouped_allgather_async")
    for t in tensors:
        _check_rows(t, "grouped_allgather_async", ScalarAllgatherError)
    return _submit_parts(tensors, "grouped_allgather", name, ps, lambda t, nm: _allgather_async(
        t, nm, "grouped_allgather_async", kind=None, pset=ps))


class _GroupedAllgather(torch.autograd.Function):
    """Horovod's HorovodGroupedAllgather: grouped allreduce (Average) of the
    gradients, each sliced to this rank's rows."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] for t in tensors]
        ctx.name = name
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        gname = _grad_name(ctx.name)
        reduced = grouped_allreduce(list(grads), name=gname, op=Average,
                                    process_set=ctx.process_set)
        offsets = _rank_offsets(ctx.rows, _sub(gname, ".rows"), ctx.process_set)
        return (None, None) + tuple(g.narrow(0, o, r)
                               for g, o, r in zip(reduced, offsets, ctx.rows))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of a list; returns the tuple of results (as
    Horovod). Differentiable, as allgather."""
    _check_process_set(process_set, "grouped_allgather")
    tensors = _check_group(tensors, "grouped_allgather")
    for t in tensors:
        _check_rows(t, "grouped_allgather", ScalarAllgatherError)
    return _GroupedAllgather.apply(name, process_set, *tensors)  # a tuple, as Horovod's


# --------------------------------------------------------------------------
# broadcast
# --------------------------------------------------------------------------

def _broadcast_async(tensor, in_place, root_rank, name, what, pset=0):
    _check_tensor(tensor, what)
    _ops.check_root(root_rank, "plait.torch." + what)
    if _staged(tensor):  # Horovod's CUDA-on-CPU path
        host = _cuda.to_host(tensor)
        return _then(_broadcast_async(host, True, root_rank, name, what, pset),
                     _cuda.into(tensor) if in_place else _cuda.back_to(tensor.device))
    buf = tensor.clone(memory_format=torch.contiguous_format) if not in_place \
        else tensor.contiguous()
    view, code, back = _movable(buf)
    t = _describe(view, code)
    opts, stream = _op_options(buf, pset=pset)

    def finish(_h):
        if in_place:
            if buf.data_ptr() != tensor.data_ptr():
                tensor.copy_(buf)
            return tensor
        return buf
    with _op_name("broadcast", name, pset) as name:
        return submit(_core.gil.plait_broadcast_async,
                      (_core.encode_name(name), ctypes.byref(t), root_rank, opts),
                      (buf, view, t, opts, stream), name, finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts replacing a copy of tensor with root_rank's; synchronize()
    returns the copy."""
    ps = _check_process_set(process_set, "broadcast_async")
    return _broadcast_async(tensor, False, root_rank, name, "broadcast_async", ps)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    ps = _check_process_set(process_set, "broadcast_async_")
    return _broadcast_async(tensor, True, root_rank, name, "broadcast_async_", ps)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Replaces tensor with root_rank's, in place; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _Broadcast(torch.autograd.Function):
    """Horovod's HorovodBroadcast: the root gets the averaged gradient, the
    others that times 0."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.name = name
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, name=_grad_name(ctx.name), op=Average,
                            process_set=ctx.process_set)
        if rank() != ctx.root_rank:  # root_rank is a rank of the job, as in Horovod
            reduced = reduced * 0  # as Horovod: NaN and Inf stay NaN
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor on every rank, as a new tensor. Differentiable
    (Horovod's gradient: the root gets the averaged gradient, the others
    zero)."""
    _check_process_set(process_set, "broadcast")
    _check_tensor(tensor, "broadcast")
    return _Broadcast.apply(tensor, root_rank, name, process_set)


# --------------------------------------------------------------------------
# reducescatter
# --------------------------------------------------------------------------

def _reducescatter_async(tensor, name, op, prescale_factor, postscale_factor, what,
                         kind="reducescatter", pset=0):
    _check_tensor(tensor, what)
    _check_rows(tensor, what)
    if _staged(tensor):  # Horovod's CUDA-on-CPU path
        return _then(_reducescatter_async(_cuda.to_host(tensor), name, op, prescale_factor,
                                          postscale_factor, what, kind, pset),
                     _cuda.back_to(tensor.device))
    src = tensor.contiguous()
    rsrc, code = _reducible(src, op, what)
    opts, stream = _op_options(src, prescale_factor, postscale_factor, pset)
    tin = _describe(rsrc, code)
    is_complex = tensor.dtype in _COMPLEX

    def finish(hh):
        out = _output(hh)
        return torch.view_as_complex(out) if is_complex else out
    with _op_name(kind, name, pset) as name:
        return submit(_core.gil.plait_reducescatter_async,
                      (_core.encode_name(name), ctypes.byref(tin), c_op(op), opts),
                      (src, rsrc, tin, opts, stream), name, finish)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing tensor over all ranks; rank r receives its block of
    first-dimension rows (the first rows % size ranks get one more)."""
    ps = _check_process_set(process_set, "reducescatter_async")
    op = _resolve_op(op, None, "reducescatter_async")
    return _reducescatter_async(tensor, name, op, prescale_factor, postscale_factor,
                                "reducescatter_async", pset=ps)


def _reducescatter_grad(grad, op, pre, post, process_set=global_process_set):
    """Horovod's HorovodReducescatter.backward before its allgather: times
    size (the process set's) for Sum, then the prescale, then the postscale
    factor."""
    if op == Sum:
        grad = grad * (size() if _check_process_set(process_set) == 0 else process_set.size())
    if pre != 1.0:
        grad = grad * pre
    if post != 1.0:
        grad = grad * post
    return grad


def _check_rs_grad(op, what):
    if op not in (Sum, Average):
        raise NotImplementedError("plait.torch.%s: gradients are defined for Sum and "
                                  "Average only (Horovod's reducescatter allows no other "
                                  "op)" % what)


class _Reducescatter(torch.autograd.Function):
    """Horovod's HorovodReducescatter: allgather of the gradient times size
    (Sum only) and the scale factors."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.pre, ctx.post = prescale_factor, postscale_factor
        ctx.name = name
        ctx.process_set = process_set
        return synchronize(_reducescatter_async(tensor, name, op, prescale_factor,
                                                postscale_factor, "reducescatter",
                                                pset=_check_process_set(process_set)))

    @staticmethod
    def backward(ctx, grad):
        _check_rs_grad(ctx.op, "reducescatter")
        g = _reducescatter_grad(grad, ctx.op, ctx.pre, ctx.post, ctx.process_set)
        return (allgather(g, name=_grad_name(ctx.name), process_set=ctx.process_set),
                None, None, None, None, None)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces tensor over all ranks and returns this rank's block of rows.
    op: Average (Horovod's default) or Sum, Min, Max, Product. Differentiable
    for Sum and Average (Horovod's gradient)."""
    _check_process_set(process_set, "reducescatter")
    op = _resolve_op(op, None, "reducescatter")
    _check_tensor(tensor, "reducescatter")
    _check_rows(tensor, "reducescatter")
    compressed, cctx = compression.compress(tensor)
    out = _Reducescatter.apply(compressed, name, op, prescale_factor, postscale_factor,
                               process_set)
    return compression.decompress(out, cctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter of each tensor of a list; synchronize() returns
    the tuple of this rank's blocks. Tensors are named as in Horovod
    ('grouped_reducescatter.<name>_<i>of<n>')."""
    ps = _check_process_set(process_set, "grouped_reducescatter_async")
    op = _resolve_op(op, None, "grouped_reducescatter_async")
    tensors = _check_group(tensors, "grouped_reducescatter_async")
    return _submit_parts(tensors, "grouped_reducescatter", name, ps,
                         lambda t, nm: _reducescatter_async(
                             t, nm, op, prescale_factor, postscale_factor,
                             "grouped_reducescatter_async", kind=None, pset=ps))


class _GroupedReducescatter(torch.autograd.Function):
    """Horovod's HorovodGroupedReducescatter."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.pre, ctx.post = prescale_factor, postscale_factor
        ctx.name = name
        ctx.process_set = process_set
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        _check_rs_grad(ctx.op, "grouped_reducescatter")
        gs = [_reducescatter_grad(g, ctx.op, ctx.pre, ctx.post, ctx.process_set) for g in grads]
        return (None, None, None, None, None) + tuple(grouped_allgather(
            gs, name=_grad_name(ctx.name), process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatters each tensor of a list; returns the list of this rank's
    blocks. Differentiable for Sum and Average, as reducescatter."""
    _check_process_set(process_set, "grouped_reducescatter")
    op = _resolve_op(op, None, "grouped_reducescatter")
    tensors = _check_group(tensors, "grouped_reducescatter")
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedReducescatter.apply(name, op, prescale_factor, postscale_factor, process_set,
                                       *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


# --------------------------------------------------------------------------
# sparse allreduce
# --------------------------------------------------------------------------

def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Horovod's sparse allreduce of a sparse COO tensor: every rank's indices
    and values are allgathered ('<name>.indices', '<name>.values'; values
    divided by size for Average). Returns a function that waits and returns
    the (uncoalesced) sparse sum, as Horovod's does."""
    _check_process_set(process_set, "sparse_allreduce_async")
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise TypeError("plait.torch.sparse_allreduce_async: expected a sparse COO tensor, "
                        "got %s" % (type(tensor).__name__ if not isinstance(tensor, torch.Tensor)
                                    else "a dense tensor"))
    op = _resolve_op(op, None, "sparse_allreduce_async")
    t = tensor
    h_indices = allgather_async(t._indices().transpose(0, 1).contiguous(),
                                name="%s.indices" % (name,), process_set=process_set)
    h_values = allgather_async(t._values(), name="%s.values" % (name,), process_set=process_set)
    n = size() if _check_process_set(process_set) == 0 else process_set.size()
    done = []

    def handle():
        if not done:
            values = synchronize(h_values)
            indices = synchronize(h_indices)
            if op == Average:
                values = values / n
            if indices.dim() == 0 or values.dim() == 0:
                done.append(t.new().resize_as_(t))
            else:
                done.append(torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size(),
                                                    dtype=values.dtype))
        return done[0]
    return handle


# --------------------------------------------------------------------------
# join, barrier
# --------------------------------------------------------------------------

def join(device=-1) -> int:
    """This rank has no more batches: it takes part in the other ranks'
    allreduces (with the op's identity) and allgathers (with no rows) until
    every rank has joined. Returns the last rank to join."""
    last = run(_core.gil.plait_join_async, (None,), None, "join", _join_rank)
    # Every rank returns from the same join, and the ranks issued different
    # numbers of operations before it (the joined ones none): every count of
    # unnamed operations starts again from 0 on every rank, so the next
    # unnamed operation matches (Horovod's handle-numbered names stay out of
    # step after uneven batches: docs/horovod-comparison.md).
    AUTO_NAMES.reset()
    return last


def barrier(process_set=global_process_set):
    """Returns when every rank of process_set has reached the barrier."""
    opts = _options(pset=_check_process_set(process_set, "barrier"))
    run(_core.gil.plait_barrier_async, (opts,), opts, "barrier", _nothing)


def _join_rank(h):
    return h.join_rank()


def _nothing(_h):
    return None
