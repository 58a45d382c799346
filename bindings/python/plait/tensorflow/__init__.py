"""plait.tensorflow: a drop-in replacement for horovod.tensorflow (0.28).

    import plait.tensorflow as hvd
    hvd.init()
    tape = hvd.DistributedGradientTape(tape)
    hvd.broadcast_variables(model.variables, root_rank=0)

The operations are TensorFlow ops from plait's op library (bindings/
tensorflow): they run eagerly, inside tf.function and in tf.compat.v1
graphs. docs/tensorflow.md lists the API and what differs from Horovod.
"""

import os
import warnings

import tensorflow as tf

from plait._core import PlaitError  # noqa: F401
from plait import stats, stats_reset, transport_name, config_dump  # noqa: F401
from plait import ERRORS as _ERRORS
from plait.common import ops as _ops
from plait.common.exceptions import HorovodInternalError  # noqa: F401
from plait.tensorflow import elastic  # noqa: F401
from plait.tensorflow.compression import Compression
from plait.tensorflow.mpi_ops import (  # noqa: F401
    init, shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, is_homogeneous, mpi_threads_supported,
    mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built,
    cuda_built, rocm_built, ProcessSet, global_process_set, add_process_set,
    remove_process_set, Average, Sum, Adasum, Min, Max, Product,
    handle_average_backwards_compatibility, check_num_rank_power_of_2,
    rank_op, local_rank_op, size_op, local_size_op, process_set_included_op,
    allgather, grouped_allgather, broadcast, broadcast_, alltoall, join, barrier,
    _allreduce, _grouped_allreduce, _reducescatter, _grouped_reducescatter,
)
from plait.tensorflow.mpi_ops import _check_op, _included, _set_id, _set_size
from plait.tensorflow.gradient_aggregation import LocalGradientAggregationHelper
from plait.tensorflow.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_object_fn, broadcast_variables,
)
from plait.tensorflow.util import (  # noqa: F401
    _cache, _executing_eagerly, _key, _make_subgraph, refs_to_vars, vars_to_refs,
)

# PeerLostError, MismatchError, ...: plait's class for each result code.
for _cls in _ERRORS.values():
    globals()[_cls.__name__] = _cls
del _cls


def _elastic_mode():
    """Whether the ranks may change under a traced function: Horovod's
    HOROVOD_ELASTIC=1, or a worker of plaitrun's elastic driver
    (PLAIT_ELASTIC_DRIVER). Then, as Horovod under HOROVOD_ELASTIC, the size
    is read when the ops run (size_op) and the gradient allreduces are in the
    graph whatever the size at tracing."""
    return bool(int(os.environ.get("HOROVOD_ELASTIC", 0) or 0)) or \
        bool(os.environ.get("PLAIT_ELASTIC_DRIVER"))


def _set_size_for(process_set):
    """process_set's size: a tensor read when it runs in elastic mode, else
    the number now."""
    if _elastic_mode():
        return size_op(process_set_id=process_set.process_set_id)
    return process_set.size()


def _size_for(process_set, dtype):
    return tf.cast(_set_size_for(process_set), dtype=dtype)


def allreduce(tensor, average=None, device_dense='', device_sparse='',
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """Reduces tensor over all ranks (Average by default); returns a new tensor.

    A tf.IndexedSlices is allgathered (values and indices) as Horovod does,
    the values divided by size for Average; only Sum and Average, without
    scale factors. compression: Compression.none or Compression.fp16.
    Differentiable."""
    op = handle_average_backwards_compatibility(op, average)
    _check_op(op, "allreduce")
    _set_id(process_set, "allreduce")
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Sum, Average):
            raise NotImplementedError('Only Sum and Average ops are supported with '
                                      'tf.IndexedSlices')
        if prescale_factor != 1.0 or postscale_factor != 1.0:
            raise NotImplementedError("Pre/postscale_factor are not supported with "
                                      "tf.IndexedSlices")
        with tf.device(device_sparse):
            values = allgather(tensor.values, process_set=process_set,
                               ignore_name_scope=ignore_name_scope)
            indices = allgather(tensor.indices, process_set=process_set,
                                ignore_name_scope=ignore_name_scope)
            new_values = (values / _size_for(process_set, values.dtype)) if op == Average \
                else values
        return tf.IndexedSlices(new_values, indices, dense_shape=tensor.dense_shape)
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
        reduced = _allreduce(compressed, op=op, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor, name=name,
                             process_set=process_set, ignore_name_scope=ignore_name_scope)
        return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense='', device_sparse='',
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """Reduces a list of tensors as one unit; tf.IndexedSlices members are
    allgathered as allreduce does. Returns the list of results."""
    if not tensors:
        return tensors
    op = handle_average_backwards_compatibility(op, average)
    _check_op(op, "grouped_allreduce")
    _set_id(process_set, "grouped_allreduce")
    dense, dense_idx, sparse, sparse_idx = [], [], [], []
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            sparse.append(t)
            sparse_idx.append(i)
        else:
            dense.append(tf.convert_to_tensor(t))
            dense_idx.append(i)
    merged = [None] * len(tensors)
    if sparse:
        if op not in (Sum, Average):
            raise NotImplementedError('Only Sum and Average ops are supported with '
                                      'tf.IndexedSlices')
        if prescale_factor != 1.0 or postscale_factor != 1.0:
            raise NotImplementedError("Pre/postscale_factor are not supported with "
                                      "tf.IndexedSlices")
        with tf.device(device_sparse):
            values = grouped_allgather([x.values for x in sparse], process_set=process_set,
                                       ignore_name_scope=ignore_name_scope)
            indices = grouped_allgather([x.indices for x in sparse], process_set=process_set,
                                        ignore_name_scope=ignore_name_scope)
            values = [v / _size_for(process_set, v.dtype) if op == Average else v
                      for v in values]
        for i, v, ind, t in zip(sparse_idx, values, indices, sparse):
            merged[i] = tf.IndexedSlices(v, ind, dense_shape=t.dense_shape)
    if dense:
        with tf.device(device_dense):
            pairs = [compression.compress(t) for t in dense]
            # One plait group per dtype: a TensorFlow op takes one dtype for
            # all of its N inputs (Horovod's has the same limit).
            by_dtype = {}
            for j, (c, _) in enumerate(pairs):
                by_dtype.setdefault(c.dtype, []).append(j)
            outs = [None] * len(dense)
            for k, js in enumerate(by_dtype.values()):
                gname = name if name is None or len(by_dtype) == 1 else "%s.%d" % (name, k)
                reduced = _grouped_allreduce([pairs[j][0] for j in js], op=op,
                                             prescale_factor=prescale_factor,
                                             postscale_factor=postscale_factor,
                                             process_set=process_set, name=gname,
                                             ignore_name_scope=ignore_name_scope)
                for j, r in zip(js, reduced):
                    outs[j] = compression.decompress(r, pairs[j][1])
        for i, o in zip(dense_idx, outs):
            merged[i] = o
    return merged


def reducescatter(tensor, device_dense='', compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces tensor over all ranks (Average by default) and returns this
    rank's block of first-dimension rows. Differentiable."""
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
        reduced = _reducescatter(compressed, op=op, name=name, process_set=process_set,
                                 ignore_name_scope=ignore_name_scope,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor)
        return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors, device_dense='', compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each tensor of a list, submitted together."""
    if not tensors:
        return tensors
    with tf.device(device_dense):
        pairs = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]
        reduced = _grouped_reducescatter([p[0] for p in pairs], op=op, process_set=process_set,
                                         prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor)
        return [compression.decompress(r, p[1]) for r, p in zip(reduced, pairs)]


def _reduces_here(process_set):
    """Horovod's condition for reducing gradients: this rank is in the set
    and the set has more than one rank (else they pass through unchanged)."""
    _set_id(process_set, "DistributedOptimizer")
    return _included(process_set) and _set_size(process_set) > 1


def _allreduce_cond(tensor, *args, process_set=global_process_set, **kwargs):
    # Horovod builds tf.cond(included and size > 1, allreduce, identity) on a
    # constant condition; plait decides in Python (same result, no cond).
    if not _elastic_mode() and not _reduces_here(process_set):
        return tensor
    return allreduce(tensor, *args, process_set=process_set, **kwargs)


def _grouped_allreduce_cond(tensors, *args, process_set=global_process_set, **kwargs):
    if not _elastic_mode() and not _reduces_here(process_set):
        return tensors
    return grouped_allreduce(tensors, *args, process_set=process_set, **kwargs)


def broadcast_global_variables(root_rank):
    """TF1 graphs: an op that sets every global variable to root_rank's value.
    Eagerly, RuntimeError as in Horovod (use broadcast_variables)."""
    if _executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution. "
            "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A SessionRunHook that broadcasts root_rank's global variables once the
    session is created (TF1 MonitoredTrainingSession)."""

    def __init__(self, root_rank, device=''):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None
        self.device = device

    def begin(self):
        if not self.bcast_op or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)


split_list = _ops.split_list  # Horovod's: n nearly equal consecutive parts


@_cache
def _make_cached_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                    sparse_as_dense, op, gradient_predivide_factor, groups,
                                    process_set):
    groups = refs_to_vars(groups) if isinstance(groups, tuple) else groups
    if op == Average:
        prescale_factor = 1.0 / gradient_predivide_factor
        postscale_factor = gradient_predivide_factor
    else:
        prescale_factor = postscale_factor = 1.0

    def partition(grads, vars):
        """The groups as tuples of gradient indexes (None: no groups), in
        Python, so the variables never enter a tf.function (which would turn
        Keras 3 variables into tensors)."""
        present = [i for i, g in enumerate(grads) if g is not None]
        if groups is None:
            return None
        if isinstance(groups, list):
            by_var = {_key(vars[i]): i for i in present}
            parts = []
            for group in groups:
                parts.append(tuple(by_var.pop(_key(v)) for v in group if _key(v) in by_var))
            parts.extend((i,) for i in by_var.values())
        else:
            parts = [tuple(p) for p in split_list(present, groups)]
        return tuple(p for p in parts if p)

    def reduce_parts(grads, parts, use_generic_names):
        with tf.name_scope(name + "_Allreduce"):
            if sparse_as_dense:
                grads = [tf.convert_to_tensor(g) if g is not None and
                         isinstance(g, tf.IndexedSlices) else g for g in grads]
            kw = dict(device_dense=device_dense, device_sparse=device_sparse,
                      compression=compression, op=op, prescale_factor=prescale_factor,
                      postscale_factor=postscale_factor, process_set=process_set)
            if parts is None:
                return [_allreduce_cond(g, name="grad_%d" % i if use_generic_names else None,
                                        ignore_name_scope=use_generic_names, **kw)
                        if g is not None else g for i, g in enumerate(grads)]
            out = list(grads)
            for k, idx in enumerate(parts):
                reduced = _grouped_allreduce_cond(
                    [grads[i] for i in idx], name="grad_%d" % k if use_generic_names else None,
                    ignore_name_scope=use_generic_names, **kw)
                for i, r in zip(idx, reduced):
                    out[i] = r
            return out

    if _executing_eagerly():
        # Horovod's: eagerly, the allreduces run as one tf.function, so they
        # are in flight together and plait fuses them.
        subgraph = _make_subgraph(reduce_parts)

        def allreduce_grads(grads, vars=None, use_generic_names=False):
            return subgraph(list(grads), partition(grads, vars), use_generic_names)
        return allreduce_grads

    def allreduce_grads(grads, vars=None, use_generic_names=False):
        return reduce_parts(list(grads), partition(grads, vars), use_generic_names)
    return allreduce_grads


def _make_allreduce_grads_fn(name, device_dense, device_sparse, compression, sparse_as_dense,
                             op, gradient_predivide_factor, groups, process_set):
    groups = vars_to_refs(groups) if isinstance(groups, list) else groups
    return _make_cached_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                           sparse_as_dense, op, gradient_predivide_factor,
                                           groups, process_set)


def gpu_available(ext_base_name, verbose=False):
    """Horovod's query: True when TensorFlow sees a GPU (plait's transports
    decide what runs on it)."""
    return bool(tf.config.list_physical_devices("GPU"))


def _check_common(op, gradient_predivide_factor, num_groups, groups):
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError('gradient_predivide_factor not supported with op != Average')
    _check_op(op, "DistributedOptimizer")
    if num_groups != 0:
        warnings.warn('Parameter `num_groups` has been replaced by `groups` '
                      'and will be removed in v0.23.0.', DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None:
        if not (isinstance(groups, list) or groups > 0):
            raise ValueError('groups should be a non-negative integer or '
                             'a list of list of tf.Variable.')
    return groups


def _reduce_and_scale(grads, sources, local, allreduce_grads, process_set, scale_local,
                      use_generic_names=None):
    """Allreduces the gradients of the sources not in local (a set of
    _key()s) and divides the local ones by size when scale_local (Horovod's
    register_local_var / register_local_source)."""
    rs, rg = [], []
    for s, g in zip(sources, grads):
        if _key(s) not in local:
            rs.append(s)
            rg.append(g)
    if use_generic_names is None:
        rg = allreduce_grads(rg, rs)
    else:
        rg = allreduce_grads(rg, rs, use_generic_names)
    by_key = {_key(s): g for s, g in zip(sources, grads)}
    for s, g in zip(rs, rg):
        by_key[_key(s)] = g
    if scale_local and local:
        n = _set_size_for(process_set)
        for k in list(by_key):
            g = by_key[k]
            if k in local and g is not None:
                if isinstance(g, tf.IndexedSlices):
                    g = tf.IndexedSlices(g.values / tf.cast(n, g.values.dtype), g.indices,
                                         g.dense_shape)
                else:
                    g = g / tf.cast(n, g.dtype)
                by_key[k] = g
    return [by_key[_key(s)] for s in sources]


class _DistributedOptimizer(tf.compat.v1.train.Optimizer):
    """A TF1 optimizer whose compute_gradients allreduces the gradients."""

    def __init__(self, optimizer, name=None, use_locking=False, device_dense='',
                 device_sparse='', compression=Compression.none, sparse_as_dense=False,
                 op=Average, gradient_predivide_factor=1.0, backward_passes_per_step=1,
                 average_aggregated_gradients=False, groups=None,
                 process_set=global_process_set, scale_local_gradients=True):
        if name is None:
            name = "Distributed{}".format(type(optimizer).__name__)
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._allreduce_grads = _make_allreduce_grads_fn(
            name, device_dense, device_sparse, compression, sparse_as_dense, op,
            gradient_predivide_factor, groups, process_set=process_set)
        self._local_vars = set()
        self._local_refs = []
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._agg_helper = None
        if backward_passes_per_step > 1:
            if _executing_eagerly():
                raise ValueError("backward_passes_per_step > 1 is not yet supported "
                                 "for _LegacyOptimizer with eager execution.")
            self._agg_helper = LocalGradientAggregationHelper(
                backward_passes_per_step=backward_passes_per_step,
                allreduce_func=self._allreduce_grads, sparse_as_dense=sparse_as_dense,
                average_aggregated_gradients=average_aggregated_gradients, rank=rank(),
                optimizer_type=LocalGradientAggregationHelper._OPTIMIZER_TYPE_LEGACY,
                process_set=process_set, scale_local_gradients=scale_local_gradients,
                name=name)

    def register_local_var(self, var):
        """var's gradient stays local (not allreduced)."""
        if self._agg_helper:
            self._agg_helper.register_local_var(var)
        else:
            self._local_vars.add(_key(var))
            self._local_refs.append(var)

    def compute_gradients(self, *args, **kwargs):
        gradients = self._optimizer.compute_gradients(*args, **kwargs)
        grads, vars = zip(*gradients)
        if self._agg_helper:
            avg = self._agg_helper.compute_gradients(grads, vars)
        else:
            avg = _reduce_and_scale(grads, vars, self._local_vars, self._allreduce_grads,
                                    self.process_set, self.scale_local_gradients)
        return list(zip(avg, vars))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if self._agg_helper:
            return self._agg_helper.apply_gradients(
                lambda: self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                                        name=name),
                self._optimizer, grads_and_vars, global_step=global_step, name=name)
        return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                               name=name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense='',
                         device_sparse='', compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """Wraps a TF1 optimizer (tf.compat.v1.train.*) so that its gradients are
    averaged over all ranks; a Keras optimizer goes to
    plait.tensorflow.keras.DistributedOptimizer, as in Horovod."""
    groups = _check_common(op, gradient_predivide_factor, num_groups, groups)
    _set_id(process_set, "DistributedOptimizer")
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        return _DistributedOptimizer(
            optimizer=optimizer, name=name, use_locking=use_locking, device_dense=device_dense,
            device_sparse=device_sparse, compression=compression,
            sparse_as_dense=sparse_as_dense, op=op,
            gradient_predivide_factor=gradient_predivide_factor,
            backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients, groups=groups,
            process_set=process_set, scale_local_gradients=scale_local_gradients)
    import plait.tensorflow.keras as hvd_k
    return hvd_k.DistributedOptimizer(
        optimizer=optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, process_set=process_set,
        scale_local_gradients=scale_local_gradients)


class _DistributedGradientTape(tf.GradientTape):
    """The methods a DistributedGradientTape adds to the user's tape class."""

    def register_local_source(self, source):
        """source's gradient stays local (not allreduced)."""
        self._plait_local.add(_key(source))
        self._plait_local_refs.append(source)

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False):
        gradients = super(self._plait_base, self).gradient(target, sources, output_gradients)
        flat = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(gradients)
        reduced = _reduce_and_scale(flat_grads, flat, self._plait_local,
                                    self._allreduce_grads, self.process_set,
                                    self.scale_local_gradients, use_generic_names)
        return tf.nest.pack_sequence_as(sources, reduced)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None,
                                       use_generic_names=False):
        gradients = self.gradient(target=target, sources=sources,
                                  output_gradients=output_gradients,
                                  use_generic_names=use_generic_names)
        local, global_ = [], []
        for s, g in zip(sources, gradients):
            (local if _key(s) in self._plait_local else global_).append((s, g))
        return local, global_


_tape_classes = {}


def DistributedGradientTape(gradtape, device_dense='', device_sparse='',
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """Wraps a tf.GradientTape so that gradient() returns the gradients
    averaged over all ranks (allreduced in one tf.function when eager, so
    plait fuses them). The tape keeps everything it recorded."""
    groups = _check_common(op, gradient_predivide_factor, num_groups, groups)
    _set_id(process_set, "DistributedGradientTape")
    base = gradtape.__class__
    cls = _tape_classes.get(base)
    if cls is None:
        body = {k: v for k, v in _DistributedGradientTape.__dict__.items()
                if k in ("register_local_source", "gradient", "get_local_and_global_gradients",
                         "__doc__")}
        body["_plait_base"] = None
        cls = type(base.__name__, (base,), body)
        cls._plait_base = cls
        _tape_classes[base] = cls
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._allreduce_grads = _make_allreduce_grads_fn(
        'DistributedGradientTape', device_dense, device_sparse, compression, sparse_as_dense,
        op, gradient_predivide_factor, groups, process_set)
    tape.process_set = process_set
    tape.scale_local_gradients = scale_local_gradients
    tape._plait_local = set()
    tape._plait_local_refs = []
    return tape


def PartialDistributedGradientTape(gradtape, device_dense='', device_sparse='',
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """A DistributedGradientTape whose local_layers' trainable weights keep
    their local gradients (divided by size when scale_local_gradients)."""
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        if not hasattr(layer, "trainable_weights"):
            raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for layer in local_layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape


def __getattr__(name):
    # SyncBatchNormalization imports Keras (a second or two): only when used.
    if name == "SyncBatchNormalization":
        from plait.tensorflow.sync_batch_norm import SyncBatchNormalization
        globals()[name] = SyncBatchNormalization
        return SyncBatchNormalization
    raise AttributeError("module 'plait.tensorflow' has no attribute %r" % name)
