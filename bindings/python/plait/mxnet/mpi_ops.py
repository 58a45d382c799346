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

import ctypes

import mxnet as mx
import numpy as np

from plait import _core
from plait.common import basics as _basics
from plait.common import ops as _ops
from plait.common.basics import (  # noqa: F401
    init, shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, is_homogeneous, mpi_threads_supported,
    mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built,
    cuda_built, rocm_built, Average, Sum, Adasum, Min, Max, Product, c_op,
)
from plait.common.names import AUTO_NAMES
from plait.common.process_sets import (  # noqa: F401
    ProcessSet, global_process_set, add_process_set, remove_process_set,
)
from plait.common.process_sets import _id as _process_set_id
from plait.mxnet import _engine

def _name_arg(name):
    """The user's name as a str (None: an automatic one), checked before
    anything is taken."""
    if name is None:
        return None
    if isinstance(name, bytes):
        name = name.decode("utf-8")
    if not isinstance(name, str):
        raise TypeError("plait.mxnet: name must be a str, not %s" % type(name).__name__)
    _core.check_name_has_no_nul(name, "plait.mxnet")
    return name


def _set(process_set, what):
    """The id of process_set (0: the global set), refused at the call, as
    in plait.torch, when it is not registered or this rank is not in it
    (Horovod's MXNet raises the latter from wait_to_read(): MXNetError;
    plait's InvalidArgumentError is a ValueError and an MXNetError)."""
    ps = _process_set_id(process_set, "plait.mxnet." + what)
    if ps != 0 and _core.process_set_rank(ps) < 0:
        raise _engine.invalid("plait.mxnet.%s: rank %d is not a member of process set %d "
                              "(ranks %s)" % (what, rank(), ps, _core.process_set_ranks(ps)))
    return ps


def _set_size(ps):
    return size() if ps == 0 else _core.process_set_size(ps)


def _resolve_op(op, average, what):
    """Horovod's average/op rules (plait.common.ops)."""
    return _ops.resolve_op(op, average, "plait.mxnet." + what)


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
#
# Every operation checks all of its arguments first and takes its automatic
# name last (AUTO_NAMES.take: consumed only if the submission is accepted), so
# a call refused on one rank leaves its counters as they were, whatever check
# refused it there and elsewhere (plait.common.names).

def _check_allreduce(tensors, op, prescale_factor, postscale_factor, priority, what):
    codes = [_check(t, what) for t in tensors]
    for c in codes:
        _check_reducible(c, op, what)
    _check_factors(prescale_factor, postscale_factor, what)
    _core.c_integer(priority, "plait.mxnet.%s: priority" % what, make_error=_engine.invalid)
    seen = set()
    for t in tensors:
        key = t.handle.value
        if key in seen:
            raise _engine.invalid("plait.mxnet.%s: the same NDArray appears twice in the "
                                  "group" % what)
        seen.add(key)
    return codes


def _push_allreduce(tensors, outputs, codes, names, op, priority, prescale_factor,
                    postscale_factor, ps):
    _engine.push(_engine.ALLREDUCE, names, tensors, outputs,
                 [_engine.describe(t, c) for t, c in zip(tensors, codes)], op=c_op(op),
                 prescale=prescale_factor, postscale=postscale_factor, priority=priority,
                 process_set=ps)


def allreduce(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set, op=None):
    """Returns a new NDArray with tensor reduced over the ranks of
    process_set (Average by default); tensor is not modified. Returns at
    once: the result is there when MXNet reads it (wait_to_read, asnumpy,
    later operations)."""
    ps = _set(process_set, "allreduce")
    op = _resolve_op(op, average, "allreduce")
    name = _name_arg(name)
    codes = _check_allreduce([tensor], op, prescale_factor, postscale_factor, priority,
                             "allreduce")
    output = mx.nd.zeros(shape=tensor.shape, ctx=tensor.context, dtype=tensor.dtype)
    with AUTO_NAMES.take("allreduce", name, ps) as op_name:
        _push_allreduce([tensor], [output], codes, [op_name], op, priority, prescale_factor,
                        postscale_factor, ps)
    return output


def allreduce_(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set, op=None):
    """allreduce in place: tensor receives the result; returns tensor."""
    ps = _set(process_set, "allreduce_")
    op = _resolve_op(op, average, "allreduce_")
    name = _name_arg(name)
    codes = _check_allreduce([tensor], op, prescale_factor, postscale_factor, priority,
                             "allreduce_")
    with AUTO_NAMES.take("allreduce", name, ps) as op_name:
        _push_allreduce([tensor], [tensor], codes, [op_name], op, priority, prescale_factor,
                        postscale_factor, ps)
    return tensor


_group_names = _ops.group_names


def _group(tensors, what):
    if isinstance(tensors, mx.nd.NDArray):
        raise TypeError("plait.mxnet.%s: expected a list of NDArrays, got an NDArray" % what)
    return list(tensors)


def grouped_allreduce(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set, op=None):
    """allreduce of a list of NDArrays as one group (negotiated and reduced
    together); returns a list of new NDArrays."""
    ps = _set(process_set, "grouped_allreduce")
    op = _resolve_op(op, average, "grouped_allreduce")
    name = _name_arg(name)
    tensors = _group(tensors, "grouped_allreduce")
    if not tensors:
        return tensors
    codes = _check_allreduce(tensors, op, prescale_factor, postscale_factor, priority,
                             "grouped_allreduce")
    outputs = [mx.nd.zeros(shape=t.shape, ctx=t.context, dtype=t.dtype) for t in tensors]
    with AUTO_NAMES.take("allreduce", name, ps) as base:
        _push_allreduce(tensors, outputs, codes, _group_names(base, len(tensors)), op, priority,
                        prescale_factor, postscale_factor, ps)
    return outputs


def grouped_allreduce_(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set, op=None):
    """grouped_allreduce in place; returns tensors."""
    ps = _set(process_set, "grouped_allreduce_")
    op = _resolve_op(op, average, "grouped_allreduce_")
    name = _name_arg(name)
    tensors_list = _group(tensors, "grouped_allreduce_")
    if not tensors_list:
        return tensors
    codes = _check_allreduce(tensors_list, op, prescale_factor, postscale_factor, priority,
                             "grouped_allreduce_")
    with AUTO_NAMES.take("allreduce", name, ps) as base:
        _push_allreduce(tensors_list, tensors_list, codes,
                        _group_names(base, len(tensors_list)), op, priority, prescale_factor,
                        postscale_factor, ps)
    return tensors


# --------------------------------------------------------------------------
# broadcast
# --------------------------------------------------------------------------

def _check_root(root_rank, ps, what):
    """root_rank is a rank of the job (as in Horovod, also on a process
    set), and a member of the set."""
    _ops.check_root(root_rank, "plait.mxnet." + what, ps, _engine.invalid)


def _check_broadcast(tensor, root_rank, priority, ps, what):
    code = _check(tensor, what)
    _check_root(root_rank, ps, what)
    _core.c_integer(priority, "plait.mxnet.%s: priority" % what, make_error=_engine.invalid)
    return code


def _push_broadcast(tensor, code, root_rank, name, priority, ps):
    with AUTO_NAMES.take("broadcast", name, ps) as op_name:
        _engine.push(_engine.BROADCAST, [op_name], [tensor], [tensor],
                     [_engine.describe(tensor, code)], root=root_rank, priority=priority,
                     process_set=ps)


def broadcast_(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """Replaces tensor, in place, with root_rank's (a rank of the job, in
    process_set); returns tensor at once."""
    ps = _set(process_set, "broadcast_")
    name = _name_arg(name)
    code = _check_broadcast(tensor, root_rank, priority, ps, "broadcast_")
    _push_broadcast(tensor, code, root_rank, name, priority, ps)
    return tensor


def broadcast(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """A new NDArray holding root_rank's tensor; tensor is not modified."""
    ps = _set(process_set, "broadcast")
    name = _name_arg(name)
    code = _check_broadcast(tensor, root_rank, priority, ps, "broadcast")
    output = tensor.copy()  # ordered by MXNet after earlier writes to tensor
    _push_broadcast(output, code, root_rank, name, priority, ps)
    return output


# --------------------------------------------------------------------------
# Operations whose output plait allocates: wait, then copy into an NDArray
# --------------------------------------------------------------------------

def _check_rows(tensor, what):
    _ops.check_rows(0 if tensor.shape == () else tensor.ndim, "plait.mxnet." + what)


def _submit_tickets(kind, label, tensors, codes, name, ps, priority, group, **kw):
    """Pushes one operation per tensor ('<label>.<name>', or the group's
    names '<...>_<i>of<n>'); the automatic name is consumed only when plait
    accepted them (a refusal there, e.g. alltoall splits that do not add up,
    raises and leaves the counter as it was). Returns the tickets."""
    tickets = []
    interrupted = None
    try:
        with AUTO_NAMES.take(label, name, ps) as base:
            names = _group_names(base, len(tensors)) if group else [base]
            for t, c, n in zip(tensors, codes, names):
                tickets.append(_engine.push(kind, [n], [t], None, [_engine.describe(t, c)],
                                            priority=priority, process_set=ps, **kw))
            try:
                accepted = [tk.submitted() for tk in tickets]
            except BaseException as e:  # noqa: B902 - a signal: it was pushed, will be submitted
                interrupted, accepted = e, [True]
            if not any(accepted):
                tickets[0].wait()  # raises the refusal
    except BaseException:
        for tk in tickets:
            tk.release()
        raise
    if interrupted is not None:
        for tk in tickets:
            tk.release()
        raise interrupted
    return tickets


def _collect(kind, tickets, tensors, n):
    """Waits for each ticket (in slices: signals raise here) and copies its
    output into a new NDArray; returns [(NDArray, received splits or None)]."""
    try:
        out = []
        for tk, t in zip(tickets, tensors):
            tk.wait()
            arr = _engine.to_ndarray(tk.output(), t.dtype, t.context)
            out.append((arr, tk.splits(n) if kind == _engine.ALLTOALL else None))
        return out
    finally:
        for tk in tickets:
            tk.release()


def _gathered(kind, label, tensors, codes, name, ps, priority, group, **kw):
    tickets = _submit_tickets(kind, label, tensors, codes, name, ps, priority, group, **kw)
    return _collect(kind, tickets, tensors, _set_size(ps))


def _check_priority(priority, what):
    _core.c_integer(priority, "plait.mxnet.%s: priority" % what, make_error=_engine.invalid)


def allgather(tensor, name=None, priority=0, process_set=global_process_set):
    """Concatenates the tensors of process_set's ranks along the first
    dimension (which may differ between ranks); waits for the result."""
    ps = _set(process_set, "allgather")
    name = _name_arg(name)
    code = _check(tensor, "allgather")
    _check_rows(tensor, "allgather")
    _check_priority(priority, "allgather")
    return _gathered(_engine.ALLGATHER, "allgather", [tensor], [code], name, ps, priority,
                     False)[0][0]


def grouped_allgather(tensors, name=None, priority=0, process_set=global_process_set):
    """allgather of each NDArray of a list; returns the list of results."""
    ps = _set(process_set, "grouped_allgather")
    name = _name_arg(name)
    tensors = _group(tensors, "grouped_allgather")
    codes = []
    for t in tensors:
        codes.append(_check(t, "grouped_allgather"))
        _check_rows(t, "grouped_allgather")
    _check_priority(priority, "grouped_allgather")
    if not tensors:
        return []
    return [out for out, _ in _gathered(_engine.ALLGATHER, "allgather", tensors, codes, name,
                                        ps, priority, True)]


_SPLITS_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _splits_list(splits, n):
    """splits as a list of n ints. An array (NDArray, numpy) must be 1-D of
    int32 or int64, whatever its values (Horovod refuses any dtype but
    int32); a list must hold integers (or floats with integral values)."""
    if isinstance(splits, (mx.nd.NDArray, np.ndarray)):
        if np.dtype(splits.dtype) not in _SPLITS_DTYPES:
            raise _engine.invalid("plait.mxnet.alltoall: splits must hold 32- or 64-bit "
                                  "integers, not %s" % np.dtype(splits.dtype).name)
        if len(splits.shape) != 1:
            raise _engine.invalid("plait.mxnet.alltoall: splits must be 1-D, not of shape %s"
                                  % (tuple(splits.shape),))
        arr = splits.asnumpy() if isinstance(splits, mx.nd.NDArray) else splits
        values = [int(v) for v in arr.tolist()]
    else:
        values = []
        for i, v in enumerate(splits):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                      np.floating)):
                raise _engine.invalid("plait.mxnet.alltoall: splits[%d] is %r, not an integer"
                                      % (i, v))
            if isinstance(v, (float, np.floating)) and not float(v).is_integer():
                raise _engine.invalid("plait.mxnet.alltoall: splits[%d] is %r, not an integer"
                                      % (i, v))
            values.append(int(v))
    if len(values) != n:
        raise _engine.invalid("plait.mxnet.alltoall: splits has %d entries but the process set "
                              "has %d ranks" % (len(values), n))
    for i, v in enumerate(values):
        _core.c_integer(v, "plait.mxnet.alltoall: splits[%d]" % i, _core.INT64_RANGE,
                        make_error=_engine.invalid)
    return values


def alltoall(tensor, splits=None, name=None, priority=0, process_set=global_process_set):
    """Sends splits[i] first-dimension rows of tensor to the i-th rank of
    process_set (equal parts when splits is None) and returns the rows
    received, in rank order; with splits given, also an int32 NDArray of how
    many came from each rank."""
    ps = _set(process_set, "alltoall")
    name = _name_arg(name)
    code = _check(tensor, "alltoall")
    _check_rows(tensor, "alltoall")
    _check_priority(priority, "alltoall")
    n = _set_size(ps)
    values = None
    if splits is not None:
        values = _splits_list(splits, n)
    elif tensor.shape[0] % n != 0:
        raise _engine.invalid("plait.mxnet.alltoall: without splits the first dimension (%d) "
                              "must divide by the number of ranks (%d)" % (tensor.shape[0], n))
    (out, received), = _gathered(_engine.ALLTOALL, "alltoall", [tensor], [code], name, ps,
                                 priority, False, splits=values)
    if splits is None:
        return out
    return out, mx.nd.array(received, ctx=mx.cpu(), dtype="int32")


def _check_reducescatter(tensor, op, prescale_factor, postscale_factor, what):
    if op not in (Average, Sum):
        raise ValueError("plait.mxnet.%s: op must be Average or Sum, as in Horovod, not %r"
                         % (what, op))
    code = _check(tensor, what)
    if tensor.shape == ():
        raise ValueError("reducescatter does not support scalar inputs")
    _check_reducible(code, op, what)
    _check_factors(prescale_factor, postscale_factor, what)
    return code


def reducescatter(tensor, op=Average, name=None, priority=0,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces tensor over the ranks of process_set (Average or Sum) and
    returns this rank's block of first-dimension rows (the first rows % size
    ranks get one more)."""
    ps = _set(process_set, "reducescatter")
    name = _name_arg(name)
    code = _check_reducescatter(tensor, op, prescale_factor, postscale_factor, "reducescatter")
    _check_priority(priority, "reducescatter")
    return _gathered(_engine.REDUCESCATTER, "reducescatter", [tensor], [code], name, ps,
                     priority, False, op=c_op(op), prescale=prescale_factor,
                     postscale=postscale_factor)[0][0]


def grouped_reducescatter(tensors, op=Average, name=None, priority=0,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each NDArray of a list; returns the list of results."""
    ps = _set(process_set, "grouped_reducescatter")
    name = _name_arg(name)
    tensors = _group(tensors, "grouped_reducescatter")
    if any(isinstance(t, mx.nd.NDArray) and t.shape == () for t in tensors):
        raise ValueError("groued_reducescatter does not support scalar inputs")
    codes = [_check_reducescatter(t, op, prescale_factor, postscale_factor,
                                  "grouped_reducescatter") for t in tensors]
    _check_priority(priority, "grouped_reducescatter")
    if not tensors:
        return []
    return [out for out, _ in _gathered(_engine.REDUCESCATTER, "reducescatter", tensors, codes,
                                        name, ps, priority, True, op=c_op(op),
                                        prescale=prescale_factor, postscale=postscale_factor)]


# --------------------------------------------------------------------------
# plait's additions: barrier and join
# --------------------------------------------------------------------------

def barrier(process_set=global_process_set):
    """Returns when every rank of process_set has called barrier()."""
    ps = _set(process_set, "barrier")
    opts = _core.options(process_set=ps)
    h = _core.submit(_core.lib.plait_barrier_async, "barrier", None, ctypes.byref(opts))
    try:
        _engine.wait_handle(h)
    finally:
        h.release()


def join():
    """This rank has no more data: it takes part in the other ranks'
    allreduces (contributing the op's identity) and allgathers (no rows)
    until every rank has joined. Returns the last rank to join."""
    mx.nd.waitall()  # this rank's own pushed operations have all been submitted
    h = _core.submit(_core.lib.plait_join_async, "join", None, None)
    try:
        _engine.wait_handle(h)
        last = h.join_rank()
    finally:
        h.release()
    # Every rank returns from the same join after issuing different numbers
    # of operations: every count of unnamed operations starts again from 0,
    # as in plait.torch, so the next unnamed operation matches.
    AUTO_NAMES.reset()
    return last


_basics.add_shutdown_hook(AUTO_NAMES.reset)  # a new job counts from 0
