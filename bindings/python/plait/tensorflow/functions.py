"""Broadcasts of variables and Python objects and allgather of objects, as
horovod.tensorflow.functions."""

import numpy as np
import tensorflow as tf

from plait.common import ops as _ops
from plait.common.process_sets import global_process_set
from plait.tensorflow.mpi_ops import allgather, broadcast, broadcast_, rank
from plait.tensorflow.util import _make_subgraph, executing_eagerly

def _broadcast_group(variables, root_rank, process_set):
    if executing_eagerly():
        # As Horovod, the broadcasts run as one tf.function, so they are in
        # flight together. The variables are captured rather than passed as
        # arguments: tf.function would turn Keras 3 variables into tensors.
        def broadcast_group():
            for var in variables:
                var.assign(broadcast(var, root_rank, process_set=process_set))
        _make_subgraph(broadcast_group)()
        return None
    return tf.group(*[var.assign(broadcast(var, root_rank, process_set=process_set))
                      for var in variables])


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Sets every variable to root_rank's value (an op in a graph).
    inplace=True uses broadcast_, as Horovod's."""
    variables = list(variables)
    if inplace:
        if executing_eagerly():
            broadcast_(variables, root_rank, process_set=process_set)
            return None
        return tf.group(*broadcast_(variables, root_rank, process_set=process_set))
    return _broadcast_group(variables, root_rank, process_set)


def _to_numpy(v, session):
    if executing_eagerly():
        return v.numpy()
    sess = session or tf.compat.v1.get_default_session()
    if sess is None:
        raise ValueError("plait.tensorflow: in graph mode, pass session= or run inside a "
                         "default session")
    return sess.run(v)


_dumps = _ops.dumps


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's obj (any picklable object) on every rank."""
    if name is None:
        name = type(obj).__name__
    if rank() == root_rank:
        t = tf.convert_to_tensor(np.frombuffer(_dumps(obj), dtype=np.uint8))
        sz = tf.convert_to_tensor([t.shape[0]], dtype=tf.int32)
        _to_numpy(broadcast(sz, root_rank, name + '.sz', process_set=process_set), session)
    else:
        sz = tf.convert_to_tensor([0], dtype=tf.int32)
        sz = _to_numpy(broadcast(sz, root_rank, name + '.sz', process_set=process_set), session)
        t = tf.zeros(sz.tolist()[0], dtype=tf.uint8)
    t = _to_numpy(broadcast(t, root_rank, name + '.t', process_set=process_set), session)
    if rank() != root_rank:
        obj = _ops.loads(t)
    return obj


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """For TF1 graphs: builds the broadcast ops once and returns a function
    obj -> root_rank's obj that runs them in session."""
    name = name or 'broadcast_object_fn'
    sz = tf.compat.v1.placeholder(tf.int32, [1], name='bcast_object_size')
    bcast_size = broadcast(sz, root_rank, name + '.sz', process_set=process_set)
    t = tf.compat.v1.placeholder(tf.uint8, [None], name='bcast_object_data')
    bcast_data = broadcast(t, root_rank, name + '.t', process_set=process_set)
    session = session or tf.compat.v1.get_default_session()

    def _bcast(obj):
        if rank() == root_rank:
            t_ = np.frombuffer(_dumps(obj), dtype=np.uint8)
            session.run(bcast_size, feed_dict={sz: [len(t_)]})
        else:
            sz_ = session.run(bcast_size, feed_dict={sz: [0]})
            t_ = np.zeros(sz_, dtype=np.uint8)
        t_ = session.run(bcast_data, feed_dict={t: t_})
        if rank() != root_rank:
            obj = _ops.loads(t_)
        return obj
    return _bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """The list of every rank's obj, in rank order."""
    if name is None:
        name = type(obj).__name__
    t = tf.convert_to_tensor(np.frombuffer(_dumps(obj), dtype=np.uint8))
    sz = tf.convert_to_tensor([t.shape[0]], dtype=tf.int32)
    sizes = _to_numpy(allgather(sz, name=name + '.sz', process_set=process_set), session)
    gathered = _to_numpy(allgather(t, name=name + '.t', process_set=process_set), session)
    return _ops.unpack(gathered, sizes.tolist())
