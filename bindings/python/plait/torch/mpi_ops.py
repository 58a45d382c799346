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

import atexit
import ctypes
import itertools
import threading

import torch

from plait import _core
from plait._core import PlaitError
from plait.torch.compression import Compression

# Reduction operations, with Horovod's names. Values are plait's op codes.
Sum = _core.op_code("sum")
Average = _core.op_code("average")
Min = _core.op_code("min")
Max = _core.op_code("max")
Product = _core.op_code("product")
# Horovod's Adasum has no plait equivalent: refused with a clear error.
Adasum = -1

_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max",
             Product: "Product", Adasum: "Adasum"}

# Horovod's error for a failed collective (e.g. a lost peer).
HorovodInternalError = PlaitError

# torch dtype -> plait dtype code, for the dtypes plait can reduce.
_REDUCIBLE = {
    torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.float32: "float32",
    torch.float64: "float64", torch.bool: "bool",
}
if hasattr(torch, "uint16"):  # torch >= 2.3
    _REDUCIBLE[torch.uint16] = "uint16"
_REDUCIBLE = {k: _core.dtype_code(v) for k, v in _REDUCIBLE.items()}
_COMPLEX = {torch.complex64, torch.complex128}
_BYTES = _core.dtype_code("uint8")


# --------------------------------------------------------------------------
# Life cycle and queries (Horovod's names)
# --------------------------------------------------------------------------

def init(comm=None, process_sets=None):
    """Joins the job (plait_init). comm and process_sets are Horovod's MPI
    and process-set arguments, which plait does not have."""
    if comm is not None:
        raise NotImplementedError("plait.torch.init: plait does not use MPI "
                                  "communicators (comm=%r); launch with plaitrun, "
                                  "mpirun, srun or torchrun instead" % (comm,))
    _check_process_set(process_sets)
    _core.init()
    global _atexit_registered
    if not _atexit_registered:
        # As Horovod: leave the job cleanly when the script ends without
        # shutdown(), so the other ranks are not told this one was lost.
        atexit.register(_shutdown_at_exit)
        _atexit_registered = True


_atexit_registered = False


def _shutdown_at_exit():
    try:
        if _core.is_initialized():
            shutdown()
    except PlaitError:
        pass


def shutdown():
    _handles.clear()
    _core.shutdown()


is_initialized = _core.is_initialized
rank = _core.rank
size = _core.size
local_rank = _core.local_rank
local_size = _core.local_size
cross_rank = _core.cross_rank
cross_size = _core.cross_size


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


def start_timeline(file_path, mark_cycles=False):
    _core.timeline_start(file_path)


def stop_timeline():
    _core.timeline_stop()


def mpi_threads_supported():
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return is_initialized() and _core.transport_name() == "gloo"


def gloo_built():
    return True


def nccl_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


class _GlobalProcessSet:
    """Horovod's global process set: plait has only this one."""
    process_set_id = 0

    def size(self):
        return size()

    def rank(self):
        return rank()

    def included(self):
        return True

    def __repr__(self):
        return "ProcessSet(process_set_id=0, ranks=all)"


global_process_set = _GlobalProcessSet()


def _check_process_set(process_set):
    if process_set is None or process_set is global_process_set:
        return
    if isinstance(process_set, (list, tuple)) and not process_set:
        return
    raise NotImplementedError("plait has no process sets other than the global "
                              "one (got %r)" % (process_set,))


# --------------------------------------------------------------------------
# Handles
# --------------------------------------------------------------------------

class _Pending:
    """An operation in flight: the core handle and what turns it into the
    Python result once it has finished."""
    __slots__ = ("handle", "finish")

    def __init__(self, handle, finish):
        self.handle = handle
        self.finish = finish


_handles = {}
_handle_ids = itertools.count(1)
_handles_lock = threading.Lock()
_name_counters = {}


def _register(pending):
    with _handles_lock:
        hid = next(_handle_ids)
        _handles[hid] = pending
    return hid


def _take(handle):
    with _handles_lock:
        pending = _handles.pop(handle, None)
    if pending is None:
        raise ValueError("plait.torch: %r is not a handle in flight (already "
                         "synchronized, or never returned by an *_async call)" % (handle,))
    return pending


def poll(handle):
    """True when the operation behind handle has finished; synchronize() then
    returns without waiting."""
    with _handles_lock:
        pending = _handles.get(handle)
    if pending is None:
        raise ValueError("plait.torch: %r is not a handle in flight" % (handle,))
    return pending.handle.poll()


def synchronize(handle):
    """Waits for the operation (the GIL is released meanwhile) and returns its
    output; raises PlaitError (e.g. PeerLostError, MismatchError) with the
    library's message when it failed."""
    pending = _take(handle)
    try:
        pending.handle.wait()
        return pending.finish(pending.handle)
    finally:
        pending.handle.release()


def _auto_name(kind, name):
    if name is not None:
        if not isinstance(name, str):
            raise TypeError("plait.torch: name must be a str, not %s" % type(name).__name__)
        return name
    with _handles_lock:
        n = _name_counters.get(kind, 0)
        _name_counters[kind] = n + 1
    return "%s.noname.%d" % (kind, n)


# --------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------

def _device(t):
    if t.device.type == "cpu":
        return _core.DEVICE_HOST
    if t.device.type == "cuda":
        return t.device.index if t.device.index is not None else torch.cuda.current_device()
    raise TypeError("plait.torch: tensors on %s are not supported (CPU or CUDA)" % t.device)


def _check_tensor(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError("plait.torch.%s: expected a torch.Tensor, got %s"
                        % (what, type(t).__name__))
    if t.is_sparse:
        raise TypeError("plait.torch.%s: sparse tensors are not supported; "
                        "densify them first (tensor.to_dense())" % what)


def _reducible(t, op, what):
    """The view of contiguous t that plait reduces, and its dtype code."""
    if t.dtype in _COMPLEX:
        if op not in (Sum, Average):
            raise TypeError("plait.torch.%s: %s on %s is not defined (complex "
                            "tensors allow Sum and Average)" % (what, _OP_NAMES[op], t.dtype))
        t = torch.view_as_real(t)
    code = _REDUCIBLE.get(t.dtype)
    if code is None:
        raise TypeError("plait.torch.%s: plait cannot reduce %s; reducible dtypes: %s"
                        % (what, t.dtype, ", ".join(str(d) for d in _REDUCIBLE)))
    return t, code


def _as_bytes_rows(t):
    """Contiguous t as a 2-D uint8 tensor of its first-dimension rows (for
    operations that only move data), and how to turn such rows back."""
    if t.dim() == 0:
        t = t.reshape(1)
    rest = tuple(t.shape[1:])
    item = t.element_size()
    width = item
    for d in rest:
        width *= d
    flat = t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)
    rows = flat.reshape(t.shape[0], width)

    def back(raw):
        n = raw.shape[0]
        if n == 0 or width == 0:
            return torch.empty((n,) + rest, dtype=t.dtype)
        return raw.reshape(-1).view(t.dtype).reshape((n,) + rest)
    return rows, back


def _movable(t):
    """(view, code, back): t as plait moves it: itself when plait knows its
    dtype, else as rows of bytes."""
    code = _REDUCIBLE.get(t.dtype)
    if code is not None:
        return t, code, None
    rows, back = _as_bytes_rows(t)
    return rows, _BYTES, back


def _describe(t, code):
    return _core.make_tensor(t.data_ptr() if t.numel() else 0, code, tuple(t.shape), _device(t))


def _options(prescale_factor, postscale_factor):
    """A pointer to plait_op_options_t, or None (the library's defaults) when
    both factors are 1: no struct to build on the common path."""
    if prescale_factor == 1.0 and postscale_factor == 1.0:
        return None
    return ctypes.byref(_core.options(prescale_factor, postscale_factor))


def _resolve_op(op, average, what):
    if average is not None:
        if op is not None:
            raise ValueError("plait.torch.%s: give op or average (deprecated), not both" % what)
        return Average if average else Sum
    if op is None:
        return Average
    if op == Adasum:
        raise NotImplementedError("plait.torch.%s: Adasum is not implemented by plait; "
                                  "use Average or Sum" % what)
    if op not in _OP_NAMES:
        raise ValueError("plait.torch.%s: unknown op %r; use Sum, Average, Min, Max "
                         "or Product" % (what, op))
    return op


def _from_output(ct):
    """A new torch tensor holding a copy of plait's output tensor ct."""
    dtype = next((k for k, v in _REDUCIBLE.items() if v == ct.dtype), None)
    out = torch.empty(_core.tensor_shape(ct), dtype=dtype)
    nbytes = _core.tensor_nbytes(ct)
    if nbytes:
        ctypes.memmove(out.data_ptr(), ct.data, nbytes)
    return out


def _check_rows(x, what):
    if x.dim() == 0:
        raise ValueError("plait.torch.%s: the tensor needs at least one dimension "
                         "(got a scalar)" % what)


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
    opts = _core.options(prescale_factor, postscale_factor)
    h = _core.submit(_core.lib.plait_grouped_allreduce_async, base,
                     (srcs, dsts, ins, outs, cnames, opts), n, cnames, ins, outs, op,
                     ctypes.byref(opts))

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
    opts = _core.options(prescale_factor, postscale_factor)
    tin = _describe(rsrc, code)
    h = _core.submit(_core.lib.plait_reducescatter_async, name, (src, rsrc, tin, opts),
                     _core.encode_name(name), ctypes.byref(tin), op, ctypes.byref(opts))
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
