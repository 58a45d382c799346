"""plait.mxnet collective operations: horovod.mxnet 0.28's API on plait.

As in Horovod, allreduce(_), grouped_allreduce(_) and broadcast(_) return at
once: the operation is pushed into MXNet's dependency engine, reads its
inputs and writes its outputs there (so MXNet orders it against other work
on those arrays), and wait_to_read()/asnumpy() on an output wait for it.
allgather, alltoall and reducescatter, whose output size is known only after
the ranks have agreed, wait for their result before returning (Horovod's
do too). Operations are matched across ranks by name: name='x' on an
allreduce is 'allreduce.x'; unnamed ones are numbered per kind
('allreduce.noname.<n>'), so every rank must issue them in the same order.

barrier() and join() are plait's additions (horovod.mxnet has neither):
plait.torch's, for NDArray scripts.
"""

import threading

import mxnet as mx

from plait import _core
from plait.common import basics as _basics
from plait.common.basics import (  # noqa: F401
    init, shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, is_homogeneous, mpi_threads_supported,
    mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built,
    cuda_built, rocm_built, Average, Sum, Adasum, Min, Max, Product, c_op,
)
from plait.common.process_sets import (  # noqa: F401
    ProcessSet, global_process_set, add_process_set, remove_process_set,
)
from plait.common.process_sets import _check as _check_process_set
from plait.mxnet import _engine

_OPS = (Average, Sum, Min, Max, Product)
_counters = {}
_counters_lock = threading.Lock()


def _op_name(kind, name):
    """Horovod's operation name: '<kind>.<name>', or '<kind>.noname.<n>'."""
    if name is None:
        with _counters_lock:
            n = _counters.get(kind, 0)
            _counters[kind] = n + 1
        return "%s.noname.%d" % (kind, n)
    if isinstance(name, bytes):
        name = name.decode("utf-8")
    if not isinstance(name, str):
        raise TypeError("plait.mxnet: name must be a str, not %s" % type(name).__name__)
    return "%s.%s" % (kind, name)


def _resolve_op(op, average, what):
    """Horovod's average/op rules (horovod.common.util)."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one "
                             "of them.")
    elif average is not None:
        import warnings
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed "
                      "in v1.0", DeprecationWarning, stacklevel=3)
        op = Average if average else Sum
    else:
        op = Average
    if op == Adasum:
        raise NotImplementedError("plait.mxnet.%s: Adasum is not implemented by plait; use "
                                  "Average or Sum" % what)
    if op not in _OPS:
        raise ValueError("plait.mxnet.%s: unknown op %r; use Sum, Average, Min, Max or "
                         "Product" % (what, op))
    return op


def _check(arr, what):
    _engine.check_array(arr, what)
    return _engine.dtype_code(arr, what)


def _check_reducible(code, op, what):
    if code == _core.dtype_code("bool") and op == Average:
        raise _engine.invalid("plait.mxnet.%s: Average of a bool NDArray is not defined; use "
                              "Sum (logical or), Min, Max or Product" % what)


def _check_factors(prescale_factor, postscale_factor, what):
    for v in (prescale_factor, postscale_factor):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise TypeError("plait.mxnet.%s: scale factors must be numbers, not %r"
                            % (what, v))


# --------------------------------------------------------------------------
# allreduce
# --------------------------------------------------------------------------

def _allreduce(tensors, outputs, names, op, priority, prescale_factor, postscale_factor,
               what):
    codes = [_check(t, what) for t in tensors]
    for c in codes:
        _check_reducible(c, op, what)
    _check_factors(prescale_factor, postscale_factor, what)
    seen = set()
    for t in tensors:
        key = t.handle.value
        if key in seen:
            raise _engine.invalid("plait.mxnet.%s: the same NDArray appears twice in the "
                                  "group" % what)
        seen.add(key)
    _engine.push(_engine.ALLREDUCE, names, tensors, outputs,
                 [_engine.describe(t, c) for t, c in zip(tensors, codes)], op=c_op(op),
                 prescale=prescale_factor, postscale=postscale_factor, priority=priority)


def allreduce(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set, op=None):
    """Returns a new NDArray with tensor reduced over all ranks (Average by
    default); tensor is not modified. Returns at once: the result is there
    when MXNet reads it (wait_to_read, asnumpy, later operations)."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "allreduce")
    _check(tensor, "allreduce")
    output = mx.nd.zeros(shape=tensor.shape, ctx=tensor.context, dtype=tensor.dtype)
    _allreduce([tensor], [output], [_op_name("allreduce", name)], op, priority,
               prescale_factor, postscale_factor, "allreduce")
    return output


def allreduce_(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set, op=None):
    """allreduce in place: tensor receives the result; returns tensor."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "allreduce_")
    _allreduce([tensor], [tensor], [_op_name("allreduce", name)], op, priority,
               prescale_factor, postscale_factor, "allreduce_")
    return tensor


def _group_names(kind, name, n):
    base = _op_name(kind, name)
    return ["%s_%dof%d" % (base, i + 1, n) for i in range(n)]


def _group(tensors, what):
    if isinstance(tensors, mx.nd.NDArray):
        raise TypeError("plait.mxnet.%s: expected a list of NDArrays, got an NDArray" % what)
    return list(tensors)


def grouped_allreduce(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set, op=None):
    """allreduce of a list of NDArrays as one group (negotiated and reduced
    together); returns a list of new NDArrays."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "grouped_allreduce")
    tensors = _group(tensors, "grouped_allreduce")
    if not tensors:
        return tensors
    for t in tensors:
        _check(t, "grouped_allreduce")
    outputs = [mx.nd.zeros(shape=t.shape, ctx=t.context, dtype=t.dtype) for t in tensors]
    _allreduce(tensors, outputs, _group_names("allreduce", name, len(tensors)), op, priority,
               prescale_factor, postscale_factor, "grouped_allreduce")
    return outputs


def grouped_allreduce_(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set, op=None):
    """grouped_allreduce in place; returns tensors."""
    _check_process_set(process_set)
    op = _resolve_op(op, average, "grouped_allreduce_")
    tensors_list = _group(tensors, "grouped_allreduce_")
    if not tensors_list:
        return tensors
    _allreduce(tensors_list, tensors_list,
               _group_names("allreduce", name, len(tensors_list)), op, priority,
               prescale_factor, postscale_factor, "grouped_allreduce_")
    return tensors


# --------------------------------------------------------------------------
# broadcast
# --------------------------------------------------------------------------

def _check_root(root_rank, what):
    if not isinstance(root_rank, int) or isinstance(root_rank, bool):
        raise TypeError("plait.mxnet.%s: root_rank must be an int, not %r" % (what, root_rank))
    n = size()
    if not 0 <= root_rank < n:
        raise _engine.invalid("plait.mxnet.%s: root_rank %d is not a rank of this job "
                              "(0..%d)" % (what, root_rank, n - 1))


def broadcast_(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """Replaces tensor, in place, with root_rank's; returns tensor at once."""
    _check_process_set(process_set)
    code = _check(tensor, "broadcast_")
    _check_root(root_rank, "broadcast_")
    _engine.push(_engine.BROADCAST, [_op_name("broadcast", name)], [tensor], [tensor],
                 [_engine.describe(tensor, code)], root=root_rank, priority=priority)
    return tensor


def broadcast(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """A new NDArray holding root_rank's tensor; tensor is not modified."""
    _check_process_set(process_set)
    _check(tensor, "broadcast")
    _check_root(root_rank, "broadcast")
    output = tensor.copy()  # ordered by MXNet after earlier writes to tensor
    return broadcast_(output, root_rank, name=name, priority=priority)


# --------------------------------------------------------------------------
# Operations whose output plait allocates: wait, then copy into an NDArray
# --------------------------------------------------------------------------

def _check_rows(tensor, what):
    if tensor.ndim == 0 or tensor.shape == ():
        raise ValueError("plait.mxnet.%s: a scalar has no first dimension" % what)


def _gathered(kind, tensor, name, priority, what, **kw):
    code = _check(tensor, what)
    ticket = _engine.push(kind, [name], [tensor], None, [_engine.describe(tensor, code)],
                          priority=priority, **kw)
    try:
        ticket.wait()
        out = _engine.to_ndarray(ticket.output(), tensor.dtype, tensor.context)
        splits = ticket.splits(size()) if kind == _engine.ALLTOALL else None
    finally:
        ticket.release()
    return out, splits


def allgather(tensor, name=None, priority=0, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension (which may
    differ between ranks); waits for the result."""
    _check_process_set(process_set)
    _check(tensor, "allgather")
    _check_rows(tensor, "allgather")
    return _gathered(_engine.ALLGATHER, tensor, _op_name("allgather", name), priority,
                     "allgather")[0]


def grouped_allgather(tensors, name=None, priority=0, process_set=global_process_set):
    """allgather of each NDArray of a list; returns the list of results."""
    _check_process_set(process_set)
    tensors = _group(tensors, "grouped_allgather")
    names = _group_names("allgather", name, len(tensors))
    for t in tensors:
        _check(t, "grouped_allgather")
        _check_rows(t, "grouped_allgather")
    return [_gathered(_engine.ALLGATHER, t, n, priority, "grouped_allgather")[0]
            for t, n in zip(tensors, names)]


def _splits_list(splits, n):
    if isinstance(splits, mx.nd.NDArray):
        values = [int(v) for v in splits.asnumpy().reshape(-1).tolist()]
    else:
        values = [int(v) for v in splits]
    if len(values) != n:
        raise _engine.invalid("plait.mxnet.alltoall: splits has %d entries but there are %d "
                              "ranks" % (len(values), n))
    return values


def alltoall(tensor, splits=None, name=None, priority=0, process_set=global_process_set):
    """Sends splits[r] first-dimension rows of tensor to rank r (equal parts
    when splits is None) and returns the rows received, in rank order; with
    splits given, also an int32 NDArray of how many came from each rank."""
    _check_process_set(process_set)
    _check(tensor, "alltoall")
    _check_rows(tensor, "alltoall")
    n = size()
    values = None
    if splits is not None:
        values = _splits_list(splits, n)
    elif tensor.shape[0] % n != 0:
        raise _engine.invalid("plait.mxnet.alltoall: without splits the first dimension (%d) "
                              "must divide by the number of ranks (%d)" % (tensor.shape[0], n))
    out, received = _gathered(_engine.ALLTOALL, tensor, _op_name("alltoall", name), priority,
                              "alltoall", splits=values)
    if splits is None:
        return out
    return out, mx.nd.array(received, ctx=mx.cpu(), dtype="int32")


def reducescatter(tensor, op=Average, name=None, priority=0,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces tensor over all ranks (Average or Sum) and returns this rank's
    block of first-dimension rows (the first rows % size ranks get one more)."""
    _check_process_set(process_set)
    if op not in (Average, Sum):
        raise ValueError("plait.mxnet.reducescatter: op must be Average or Sum, as in "
                         "Horovod, not %r" % (op,))
    code = _check(tensor, "reducescatter")
    if tensor.shape == ():
        raise ValueError("reducescatter does not support scalar inputs")
    _check_reducible(code, op, "reducescatter")
    _check_factors(prescale_factor, postscale_factor, "reducescatter")
    return _gathered(_engine.REDUCESCATTER, tensor, _op_name("reducescatter", name), priority,
                     "reducescatter", op=c_op(op), prescale=prescale_factor,
                     postscale=postscale_factor)[0]


def grouped_reducescatter(tensors, op=Average, name=None, priority=0,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each NDArray of a list; returns the list of results."""
    _check_process_set(process_set)
    tensors = _group(tensors, "grouped_reducescatter")
    if any(t.shape == () for t in tensors):
        raise ValueError("groued_reducescatter does not support scalar inputs")
    names = _group_names("reducescatter", name, len(tensors))
    outs = []
    for t, n in zip(tensors, names):
        if op not in (Average, Sum):
            raise ValueError("plait.mxnet.grouped_reducescatter: op must be Average or Sum")
        code = _check(t, "grouped_reducescatter")
        _check_reducible(code, op, "grouped_reducescatter")
        outs.append(_gathered(_engine.REDUCESCATTER, t, n, priority, "grouped_reducescatter",
                              op=c_op(op), prescale=prescale_factor,
                              postscale=postscale_factor)[0])
    return outs


# --------------------------------------------------------------------------
# plait's additions: barrier and join
# --------------------------------------------------------------------------

def barrier(process_set=global_process_set):
    """Returns when every rank has called barrier()."""
    _check_process_set(process_set)
    h = _core.submit(_core.lib.plait_barrier_async, "barrier", None, None)
    try:
        h.wait()
    finally:
        h.release()


def join():
    """This rank has no more data: it takes part in the other ranks'
    allreduces (contributing the op's identity) and allgathers (no rows)
    until every rank has joined. Returns the last rank to join."""
    mx.nd.waitall()  # this rank's own pushed operations have all been submitted
    h = _core.submit(_core.lib.plait_join_async, "join", None, None)
    try:
        h.wait()
        return h.join_rank()
    finally:
        h.release()


def _forget_counters():
    with _counters_lock:
        _counters.clear()


_basics.add_shutdown_hook(_forget_counters)
