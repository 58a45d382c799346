"""plait.tensorflow's operations: Horovod 0.28's horovod.tensorflow.mpi_ops
on plait's TensorFlow op library (bindings/tensorflow).

Every operation is a TensorFlow op whose kernel submits to plait and returns
at once, so it runs eagerly, inside tf.function and in tf.compat.v1 graphs,
and many operations of one graph are in flight together (plait fuses them).

Names, as Horovod's: in a graph (tf.function or TF1), an operation without a
name is called after its input, 'HorovodAllreduce_<tensor name>', and its node
name (unique in the graph, with its name scope unless ignore_name_scope) is
what plait matches across ranks; eagerly, plait matches '<kind>.<name>', or
'<kind>.noname' when no name is given, so unnamed eager calls must be issued
in the same order on every rank (they run one after another).

Gradients are Horovod 0.28.1's (allreduce: the same allreduce of the
gradient; allgather: this rank's rows of the averaged gradient; broadcast:
the averaged gradient on the root, zero elsewhere; alltoall: the alltoall of
the gradient back; reducescatter: the allgathered gradient, times size for
Sum, times the scale factors), except for allreduce's Min, Max and Product,
where Horovod reduces the gradients with the same op and plait gives the
true gradient (docs/tensorflow.md).
"""

import re

import tensorflow as tf

from plait import _core
from plait.common import ops as _ops

from plait.common import basics as _basics
from plait.common.basics import (  # noqa: F401
    shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, is_homogeneous, mpi_threads_supported,
    mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built,
    cuda_built, rocm_built, Average, Sum, Adasum, Min, Max, Product,
)
from plait.common.process_sets import (  # noqa: F401
    ProcessSet, global_process_set, add_process_set, remove_process_set,
)
from plait.common.process_sets import _id as _process_set_id
from plait.tensorflow import _interrupt
from plait.tensorflow._lib import LIB as MPI_LIB, call as _call, executing_eagerly
from plait.tensorflow._lib import library_path as _library_path

_executing_eagerly = executing_eagerly


def init(comm=None, process_sets=None):
    """Joins the job, as plait.common.basics.init (idempotent, as Horovod's);
    then, from the main thread and when the program has no wakeup fd of its
    own, starts the signal watcher that lets Ctrl-C and other signals end a
    wait (plait.tensorflow._interrupt, docs/tensorflow.md)."""
    _basics.init(comm=comm, process_sets=process_sets)
    _interrupt.install(_library_path)


def check_num_rank_power_of_2(num_rank):
    """Horovod's helper: True when num_rank is a power of 2."""
    return num_rank != 0 and (num_rank & (num_rank - 1)) == 0


# Horovod's: op from the deprecated average argument; Average by default.
handle_average_backwards_compatibility = _ops.average_compat


def _check_op(op, what):
    return _ops.check_op(op, "plait.tensorflow." + what)


def _normalize_name(name):
    """Normalizes operation name to TensorFlow rules (as Horovod)."""
    return re.sub('[^a-zA-Z0-9_]', '_', name)


def _set_id(process_set, what):
    """process_set's id for an operation (0 for the global set); ValueError
    for a set that is not registered. plait refuses, when the op runs, a set
    this rank is not in (ValueError naming the set and its ranks)."""
    return _process_set_id(process_set, "plait.tensorflow.%s" % what)


def _set_of(op):
    """The process set a gradient runs on: its operation's (Horovod's
    _temp_process_set_object)."""
    pid = op.get_attr("process_set_id")
    if pid == 0:
        return global_process_set
    ps = ProcessSet.__new__(ProcessSet)
    ps.process_set_id = pid
    return ps


def _set_size(process_set):
    return size() if process_set.process_set_id == 0 else _core.process_set_size(
        process_set.process_set_id)


def _included(process_set):
    """Whether this rank is in process_set (a registered set)."""
    return process_set.process_set_id == 0 or _core.process_set_rank(
        process_set.process_set_id) >= 0


def _set_rank(process_set):
    return rank() if process_set.process_set_id == 0 else _core.process_set_rank(
        process_set.process_set_id)


def _naming(kind, prefix, name, tensors, ignore_name_scope):
    """The keyword arguments that name an operation (see the module text)."""
    if name is not None and not isinstance(name, str):
        raise TypeError("plait.tensorflow.%s: name must be a str, not %s"
                        % (kind, type(name).__name__))
    if name is not None:
        _core.check_name_has_no_nul(name, "plait.tensorflow.%s" % kind)
    if executing_eagerly():
        return {"tensor_name": "%s.%s" % (kind, "noname" if name is None else name)}
    if name is None:
        if len(tensors) == 1:
            name = "%s_%s" % (prefix, _normalize_name(tensors[0].name))
        else:
            name = _normalize_name("%s_%s_%s" % (prefix, tensors[0].name, tensors[-1].name))
    return {"name": name, "ignore_name_scope": ignore_name_scope}


def _run(fn, **kwargs):
    return _call(fn, **kwargs)


# --------------------------------------------------------------------------
# allreduce
# --------------------------------------------------------------------------

def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """Reduces tensor over all ranks (Sum by default). Differentiable."""
    _check_op(op, "allreduce")
    pid = _set_id(process_set, "allreduce")
    tensor = tf.convert_to_tensor(tensor)
    return _run(MPI_LIB.plait_allreduce, tensor=tensor, reduce_op=op,
                prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                process_set_id=pid,
                **_naming("allreduce", "HorovodAllreduce", name, [tensor], ignore_name_scope))


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set):
    """Reduces a list of tensors of one dtype as one unit. Differentiable."""
    _check_op(op, "grouped_allreduce")
    pid = _set_id(process_set, "grouped_allreduce")
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("plait.tensorflow.grouped_allreduce: the group is empty")
    return _run(MPI_LIB.plait_grouped_allreduce, tensors=tensors, reduce_op=op,
                prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                process_set_id=pid,
                **_naming("grouped_allreduce", "HorovodGroupedAllreduce", name, tensors,
                          ignore_name_scope))


def _prescaled(x, pre):
    """x * pre rounded as plait's prescale (Horovod's ScaleBuffer): float64 in
    double, other floats in float32 by the factor rounded to float32."""
    if pre == 1.0:
        return x
    if x.dtype == tf.float64:
        return x * tf.constant(pre, tf.float64)
    return tf.cast(tf.cast(x, tf.float32) * tf.constant(pre, tf.float32), x.dtype)


def _true_grad(x, grad, op, pre, post, ps=global_process_set):
    """The gradient of y = post * op_k(pre * x_k) for this rank's x, given
    the gradient of y here (plait's, not Horovod's; see plait.torch)."""
    total = _allreduce(grad, op=Sum, process_set=ps)
    s = _prescaled(x, pre)
    scale = tf.cast(pre * post, grad.dtype)
    if op == Product:
        zero = tf.equal(s, 0)
        nonzero = tf.where(zero, tf.ones_like(s), s)
        prod_nz = _allreduce(nonzero, op=Product, process_set=ps)
        zeros = _allreduce(tf.cast(zero, tf.int32), op=Sum, process_set=ps)
        others = tf.where(zeros - tf.cast(zero, tf.int32) > 0, tf.zeros_like(s),
                          prod_nz / nonzero)
        return total * tf.cast(others, grad.dtype) * scale
    extreme = _allreduce(s, op=op, process_set=ps)
    hit = tf.cast(tf.equal(s, extreme), grad.dtype)
    hits = _allreduce(hit, op=Sum, process_set=ps)
    return total * hit / tf.maximum(hits, tf.ones_like(hits)) * scale


@tf.RegisterGradient("PlaitAllreduce")
def _allreduce_grad(op, grad):
    reduce_op = op.get_attr("reduce_op")
    pre = op.get_attr("prescale_factor")
    post = op.get_attr("postscale_factor")
    ps = _set_of(op)
    if reduce_op in (Sum, Average):
        return _allreduce(grad, op=reduce_op, prescale_factor=pre, postscale_factor=post,
                          ignore_name_scope=op.get_attr("ignore_name_scope"), process_set=ps)
    return _true_grad(op.inputs[0], grad, reduce_op, pre, post, ps)


@tf.RegisterGradient("PlaitGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    reduce_op = op.get_attr("reduce_op")
    pre = op.get_attr("prescale_factor")
    post = op.get_attr("postscale_factor")
    ps = _set_of(op)
    if reduce_op in (Sum, Average):
        return _grouped_allreduce(list(grads), op=reduce_op, prescale_factor=pre,
                                  postscale_factor=post,
                                  ignore_name_scope=op.get_attr("ignore_name_scope"),
                                  process_set=ps)
    return [_true_grad(x, g, reduce_op, pre, post, ps) for x, g in zip(op.inputs, grads)]


# --------------------------------------------------------------------------
# allgather
# --------------------------------------------------------------------------

def _check_rows(tensor, what):
    _ops.check_rows(tensor.shape.rank, "plait.tensorflow." + what)


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates tensor from every rank along the first dimension, which
    may differ between ranks. Differentiable."""
    pid = _set_id(process_set, "allgather")
    tensor = tf.convert_to_tensor(tensor)
    _check_rows(tensor, "allgather")
    return _run(MPI_LIB.plait_allgather, tensor=tensor, process_set_id=pid,
                **_naming("allgather", "HorovodAllgather", name, [tensor], ignore_name_scope))


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """allgather of each tensor of a list (Horovod's grouped_allgather). The
    allgathers are submitted together: in a graph they are in flight at once."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("plait.tensorflow.grouped_allgather: the group is empty")
    n = len(tensors)
    if name is None and not executing_eagerly():
        name = _normalize_name("HorovodGroupedAllgather_%s_%s"
                               % (tensors[0].name, tensors[-1].name))
    return [allgather(t, name=None if name is None else "%s_%dof%d" % (name, i + 1, n),
                      ignore_name_scope=ignore_name_scope, process_set=process_set)
            for i, t in enumerate(tensors)]


def _rows_of_every_rank(x, ignore_name_scope, ps=global_process_set):
    d = tf.reshape(tf.shape(x)[0], [1])
    return tf.reshape(allgather(d, ignore_name_scope=ignore_name_scope, process_set=ps),
                      [_set_size(ps)])


@tf.RegisterGradient("PlaitAllgather")
def _allgather_grad(op, grad):
    ignore = op.get_attr("ignore_name_scope")
    ps = _set_of(op)
    grad = _allreduce(grad, op=Average, ignore_name_scope=ignore, process_set=ps)
    with tf.device("/cpu:0"):
        d = _rows_of_every_rank(op.inputs[0], ignore, ps)
    return tf.split(grad, num_or_size_splits=d, axis=0)[_set_rank(ps)]


# --------------------------------------------------------------------------
# broadcast
# --------------------------------------------------------------------------

def _check_root(root_rank, what):
    _ops.check_root_type(root_rank, "plait.tensorflow." + what)  # the op's int32


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """root_rank's tensor on every rank. Differentiable."""
    pid = _set_id(process_set, "broadcast")
    _check_root(root_rank, "broadcast")
    tensor = tf.convert_to_tensor(tensor)
    return _run(MPI_LIB.plait_broadcast, tensor=tensor, root_rank=root_rank,
                process_set_id=pid,
                **_naming("broadcast", "HorovodBroadcast", name, [tensor], ignore_name_scope))


@tf.RegisterGradient("PlaitBroadcast")
def _broadcast_grad(op, grad):
    root = op.get_attr("root_rank")
    reduced = _allreduce(grad, op=Average, ignore_name_scope=op.get_attr("ignore_name_scope"),
                         process_set=_set_of(op))
    if rank() != root:  # root_rank is a rank of the job, as in Horovod
        return reduced * 0
    return reduced


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Sets each variable to root_rank's value (Horovod's in-place broadcast);
    returns the new values. The broadcasts are submitted together."""
    _check_root(root_rank, "broadcast_")
    _set_id(process_set, "broadcast_")
    variables = list(variables)
    base = name if name is not None else "broadcast_"
    values = []
    for v in variables:
        vname = _normalize_name("%s.%s" % (base, v.name))
        values.append(broadcast(v.read_value() if hasattr(v, "read_value") else v, root_rank,
                                name=vname if (name is not None or executing_eagerly())
                                else None,
                                process_set=process_set))
    assigns = [v.assign(x) for v, x in zip(variables, values)]
    if executing_eagerly():
        return [v.read_value() for v in variables]
    with tf.control_dependencies([a if isinstance(a, tf.Operation) else a.op
                                  for a in assigns]):
        return [tf.identity(x) for x in values]


# --------------------------------------------------------------------------
# alltoall
# --------------------------------------------------------------------------

def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[r] first-dimension rows of tensor to rank r (equal parts
    when splits is None); returns the rows received, in rank order, and, when
    splits was given, how many came from each rank. Differentiable."""
    pid = _set_id(process_set, "alltoall")
    tensor = tf.convert_to_tensor(tensor)
    _check_rows(tensor, "alltoall")
    splits_ = (tf.convert_to_tensor(splits, dtype=tf.int32) if splits is not None
               else tf.constant([], dtype=tf.int32))
    output, rsplits = _run(MPI_LIB.plait_alltoall, tensor=tensor, splits=splits_,
                           process_set_id=pid,
                           **_naming("alltoall", "HorovodAlltoall", name, [tensor],
                                     ignore_name_scope))
    return (output, rsplits) if splits is not None else output


@tf.RegisterGradient("PlaitAlltoall")
def _alltoall_grad(op, grad_wrt_output, grad_wrt_received_splits):
    grad, _ = alltoall(grad_wrt_output, splits=op.outputs[1],
                       ignore_name_scope=op.get_attr("ignore_name_scope"),
                       process_set=_set_of(op))
    return [grad, None]


# --------------------------------------------------------------------------
# reducescatter
# --------------------------------------------------------------------------

def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces tensor over all ranks and gives each rank its block of rows
    (the first rows % size ranks one row more). Differentiable."""
    _check_op(op, "reducescatter")
    pid = _set_id(process_set, "reducescatter")
    tensor = tf.convert_to_tensor(tensor)
    _check_rows(tensor, "reducescatter")
    return _run(MPI_LIB.plait_reducescatter, tensor=tensor, reduce_op=op,
                prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                process_set_id=pid,
                **_naming("reducescatter", "HorovodReducescatter", name, [tensor],
                          ignore_name_scope))


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    """reducescatter of each tensor of a list, submitted together."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("plait.tensorflow.grouped_reducescatter: the group is empty")
    n = len(tensors)
    if name is None and not executing_eagerly():
        name = _normalize_name("HorovodGroupedReducescatter_%s_%s"
                               % (tensors[0].name, tensors[-1].name))
    return [_reducescatter(t, name=None if name is None else "%s_%dof%d" % (name, i + 1, n),
                           op=op, ignore_name_scope=ignore_name_scope, process_set=process_set,
                           prescale_factor=prescale_factor, postscale_factor=postscale_factor)
            for i, t in enumerate(tensors)]


@tf.RegisterGradient("PlaitReducescatter")
def _reducescatter_grad(op, grad):
    reduce_op = op.get_attr("reduce_op")
    pre = op.get_attr("prescale_factor")
    post = op.get_attr("postscale_factor")
    ps = _set_of(op)
    if reduce_op == Sum:
        grad *= _set_size(ps)
    if pre != 1.0:
        grad *= pre
    if post != 1.0:
        grad *= post
    return allgather(grad, ignore_name_scope=op.get_attr("ignore_name_scope"), process_set=ps)


# --------------------------------------------------------------------------
# join, barrier and the *_op queries
# --------------------------------------------------------------------------

def join():
    """This rank has no more data; returns (a scalar int32 tensor) the last
    rank to join, once every rank has joined."""
    return _run(MPI_LIB.plait_join)


def barrier(process_set=global_process_set):
    """Returns once every rank has reached the barrier (an op in a graph)."""
    pid = _set_id(process_set, "barrier")
    return _run(MPI_LIB.plait_barrier, process_set_id=pid)


def _query(what, process_set_id=0, name=None):
    return _run(MPI_LIB.plait_query, query=what, process_set_id=process_set_id, name=name)


def size_op(process_set_id=0, name=None):
    """The number of ranks (of the process set), read when the op runs (a
    scalar int32 tensor)."""
    return _query("size", process_set_id, name)


def local_size_op(name=None):
    """The number of ranks on this host, read when the op runs."""
    return _query("local_size", 0, name)


def rank_op(name=None):
    """This process's rank, read when the op runs."""
    return _query("rank", 0, name)


def local_rank_op(name=None):
    """This process's rank on its host, read when the op runs."""
    return _query("local_rank", 0, name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank belongs to the process set, else 0, read when the op
    runs."""
    return _query("process_set_included", process_set_id, name)


for _op in ("PlaitQuery", "PlaitJoin", "PlaitBarrier"):
    tf.no_gradient(_op)
del _op
