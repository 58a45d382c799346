"""broadcast_object and allgather_object (horovod.mxnet.functions), and
broadcast_parameters (horovod.mxnet)."""

import types

import mxnet as mx
import numpy as np

from plait.common import ops as _ops
from plait.mxnet.mpi_ops import allgather, broadcast_, rank, size

_to_bytes = _ops.dumps


def broadcast_object(obj, root_rank=0, name=None):
    """Serializes obj on root_rank (cloudpickle when installed, else pickle)
    and returns it on every rank."""
    if name is None:
        name = type(obj).__name__
    if rank() == root_rank:
        data = _to_bytes(obj)
        t = mx.nd.array(np.frombuffer(data, dtype=np.uint8), dtype="uint8")
        sz = mx.nd.array([t.size], dtype="int32")
        broadcast_(sz, root_rank, name + ".sz")
    else:
        sz = mx.nd.empty(shape=(1,), dtype="int32")
        broadcast_(sz, root_rank, name + ".sz")
        t = mx.nd.empty(shape=(int(sz.asscalar()),), dtype="uint8")
    broadcast_(t, root_rank, name + ".t")
    if rank() != root_rank:
        obj = _ops.loads(t.asnumpy())
    else:
        t.wait_to_read()
    return obj


def allgather_object(obj, name=None):
    """Serializes obj on every rank and returns the list of every rank's
    object, in rank order."""
    if name is None:
        name = type(obj).__name__
    data = _to_bytes(obj)
    t = mx.nd.array(np.frombuffer(data, dtype=np.uint8), dtype="uint8")
    sz = mx.nd.array([t.size], dtype="int32")
    sizes = allgather(sz, name=name + ".sz").asnumpy()
    gathered = allgather(t, name=name + ".t").asnumpy()
    return _ops.unpack(gathered, sizes[:size()])


def _append_broadcast_init(param, root_rank, name):
    """param._init_impl that broadcasts the value once MXNet has initialised
    it (deferred initialisation)."""
    init_impl = getattr(param, "_init_impl")

    def wrapped_init_impl(self, *args, **kwargs):
        init_impl(*args, **kwargs)
        broadcast_(self.data(), root_rank=root_rank, name=name)
    return wrapped_init_impl


def broadcast_parameters(params, root_rank=0, prefix=None):
    """Broadcasts parameters from root_rank to every rank, in place: a dict
    of NDArrays (or Parameters), or a gluon ParameterDict
    (Block.collect_params()). Parameters whose initialisation is deferred
    are broadcast right after MXNet initialises them (first forward pass)."""
    if size() == 1:
        return
    if prefix is not None and not isinstance(prefix, str):
        raise ValueError("broadcast_parameters: prefix must be a str, not %r" % (prefix,))
    prefix = prefix or ""
    try:
        from mxnet.gluon.parameter import ParameterDict
        valid_types = (dict, ParameterDict)
    except ImportError:
        valid_types = (dict,)
    if not isinstance(params, valid_types):
        raise ValueError("invalid params of type: %s" % type(params))
    tensors, names = [], []
    for name, p in sorted(params.items()):
        try:
            if isinstance(p, mx.gluon.parameter.Parameter):
                tensors.append(p.data())
            else:
                tensors.append(p)
            names.append(prefix + str(name))
        except mx.gluon.parameter.DeferredInitializationError:
            new_init = _append_broadcast_init(p, root_rank, prefix + str(name))
            p._init_impl = types.MethodType(new_init, p)
    for tensor, name in zip(tensors, names):
        broadcast_(tensor, root_rank, name=name)
