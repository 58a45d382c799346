"""The Keras layer shared by plait.tensorflow.keras (tf.keras: Keras 3, or
tf_keras with TF_USE_LEGACY_KERAS=1) and plait.keras (`import keras`),
horovod._keras's counterpart. make_api(keras) gives the public functions for
one Keras module; the two packages export them with Horovod's names.
"""

import warnings

import tensorflow as tf

import plait.tensorflow as _ptf
from plait.common.basics import Average, Sum
from plait.common.process_sets import global_process_set
from plait._keras.optimizer import create_distributed_optimizer, distributed_class


def _eval(result):
    """result, or its value computed in the Keras session in graph mode."""
    if tf.executing_eagerly():
        return result
    return tf.compat.v1.keras.backend.get_session().run(result)


def _check_optimizer_args(op, groups, backward_passes_per_step, gradient_predivide_factor):
    if op != Average and op != Sum:
        raise ValueError("op currently only supports Average and Sum")
    if groups is not None:
        if isinstance(groups, bool) or not (isinstance(groups, list) or
                                            (isinstance(groups, int) and groups > 0)):
            raise ValueError("groups should be a non-negative integer or a list of list of "
                             "tf.Variable.")
    if not isinstance(backward_passes_per_step, int) or isinstance(backward_passes_per_step, bool) \
            or backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0 (an int), got %r"
                         % (backward_passes_per_step,))
    if gradient_predivide_factor <= 0:
        raise ValueError("gradient_predivide_factor must be > 0, got %r"
                         % (gradient_predivide_factor,))


_DISTRIBUTED_OPTIMIZER_DOC = """An optimizer that wraps another Keras optimizer and allreduces the
        gradients (averaged by default) before they are applied.

        Works on Keras 3 optimizers (gradients are reduced in apply()) and on
        tf_keras ones (reduced where they are computed), with Horovod's
        arguments: compression (Compression.none / fp16), sparse_as_dense
        (IndexedSlices made dense; otherwise they are allgathered),
        gradient_predivide_factor (grad / f summed, then * f / size), op
        (Average or Sum), backward_passes_per_step (sum locally, allreduce
        every N passes; / N with average_aggregated_gradients), groups (an
        int: that many groups of gradients reduced together; or lists of
        variables), process_set, scale_local_gradients (local variables'
        gradients / size). device_dense and device_sparse place the
        collectives (tf.device)."""


def make_api(keras, compression_none, horovod_keras_order=False):
    """DistributedOptimizer, PartialDistributedOptimizer, load_model and the
    value-level operations for one Keras module."""

    def _distributed(optimizer, name, device_dense, device_sparse, compression, sparse_as_dense,
                     gradient_predivide_factor, op, backward_passes_per_step,
                     average_aggregated_gradients, num_groups, groups, process_set,
                     scale_local_gradients):
        if num_groups != 0:
            warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be "
                          "removed in v0.23.0.", DeprecationWarning)
            if groups is None:
                groups = num_groups
        _check_optimizer_args(op, groups, backward_passes_per_step, gradient_predivide_factor)
        _ptf._set_id(process_set, "DistributedOptimizer")
        settings = dict(name=name, device_dense=device_dense, device_sparse=device_sparse,
                        compression=compression, sparse_as_dense=sparse_as_dense,
                        gradient_predivide_factor=gradient_predivide_factor, op=op,
                        backward_passes_per_step=backward_passes_per_step,
                        average_aggregated_gradients=average_aggregated_gradients,
                        groups=groups, process_set=process_set,
                        scale_local_gradients=scale_local_gradients)
        return create_distributed_optimizer(optimizer, settings)

    if horovod_keras_order:
        # horovod.keras's order (op, num_groups, groups); the rest keyword-only.
        def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                 compression=compression_none, sparse_as_dense=False,
                                 gradient_predivide_factor=1.0, op=Average, num_groups=0,
                                 groups=None, *, backward_passes_per_step=1,
                                 average_aggregated_gradients=False,
                                 process_set=global_process_set, scale_local_gradients=True):
            return _distributed(optimizer, name, device_dense, device_sparse, compression,
                                sparse_as_dense, gradient_predivide_factor, op,
                                backward_passes_per_step, average_aggregated_gradients,
                                num_groups, groups, process_set, scale_local_gradients)
    else:
        def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                 compression=compression_none, sparse_as_dense=False,
                                 gradient_predivide_factor=1.0, op=Average,
                                 backward_passes_per_step=1, average_aggregated_gradients=False,
                                 num_groups=0, groups=None, process_set=global_process_set,
                                 scale_local_gradients=True):
            return _distributed(optimizer, name, device_dense, device_sparse, compression,
                                sparse_as_dense, gradient_predivide_factor, op,
                                backward_passes_per_step, average_aggregated_gradients,
                                num_groups, groups, process_set, scale_local_gradients)
    DistributedOptimizer.__doc__ = _DISTRIBUTED_OPTIMIZER_DOC

    def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                    compression=compression_none, sparse_as_dense=False,
                                    gradient_predivide_factor=1.0, op=Average, groups=None,
                                    process_set=global_process_set, local_layers=None,
                                    scale_local_gradients=True):
        """DistributedOptimizer whose local_layers' gradients stay on each rank
        (not allreduced; divided by size when scale_local_gradients)."""
        if local_layers is None:
            local_layers = []
        elif isinstance(local_layers, keras.layers.Layer):
            local_layers = [local_layers]
        else:
            local_layers = list(local_layers)
            if not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
                raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
        opt = DistributedOptimizer(optimizer, name=name, device_dense=device_dense,
                                   device_sparse=device_sparse, compression=compression,
                                   sparse_as_dense=sparse_as_dense,
                                   gradient_predivide_factor=gradient_predivide_factor, op=op,
                                   groups=groups, process_set=process_set,
                                   scale_local_gradients=scale_local_gradients)
        for layer in local_layers:
            for var in layer.trainable_weights:
                opt.register_local_var(var)
        return opt

    def broadcast_global_variables(root_rank):
        """Broadcasts all global variables from root_rank (TF1 graph mode, run
        in the Keras session). Eagerly, as Horovod, a RuntimeError: use
        BroadcastGlobalVariablesCallback or plait.tensorflow.broadcast_variables."""
        if tf.executing_eagerly():
            raise RuntimeError(
                "hvd.broadcast_global_variables() does not support eager execution. "
                "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.")
        return _eval(_ptf.broadcast_global_variables(root_rank))

    def allreduce(value, name=None, average=True if horovod_keras_order else None,
                  prescale_factor=1.0, postscale_factor=1.0, op=None,
                  compression=compression_none):
        """value (anything tf.constant takes) allreduced over all ranks: a
        tensor eagerly, its value in graph mode."""
        return _eval(_ptf.allreduce(tf.constant(value), average=average,
                                    prescale_factor=prescale_factor,
                                    postscale_factor=postscale_factor, op=op,
                                    compression=compression, name=name))

    def allgather(value, name=None):
        """value gathered from all ranks along its first dimension."""
        return _eval(_ptf.allgather(tf.constant(value), name=name))

    def broadcast(value, root_rank, name=None):
        """root_rank's value, on every rank."""
        return _eval(_ptf.broadcast(tf.constant(value), root_rank, name=name))

    def reducescatter(value, name=None, op=Average):
        """value reduced over all ranks; this rank's block of first-dimension rows."""
        return _eval(_ptf.reducescatter(tf.constant(value), op=op, name=name))

    def load_model(filepath, custom_optimizers=None, custom_objects=None,
                   compression=compression_none, legacy_opts=False):
        """keras.models.load_model whose optimizer comes back wrapped in a
        DistributedOptimizer (with compression), its state restored. Every
        optimizer of keras.optimizers is wrapped (tf.keras.optimizers.legacy's
        with legacy_opts, tf_keras only); custom_optimizers adds classes."""
        if legacy_opts:
            legacy = getattr(keras.optimizers, "legacy", None)
            if legacy is None or not hasattr(legacy, "Optimizer"):
                raise ValueError("load_model: legacy_opts=True needs tf_keras "
                                 "(TF_USE_LEGACY_KERAS=1); Keras 3 has no legacy optimizers")
            subclasses = legacy.Optimizer.__subclasses__()
        else:
            subclasses = keras.optimizers.Optimizer.__subclasses__()
        settings = dict(name=None, device_dense="", device_sparse="", compression=compression,
                        sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                        backward_passes_per_step=1, average_aggregated_gradients=False,
                        groups=None, process_set=global_process_set, scale_local_gradients=True)
        objects = {}
        for cls in subclasses:
            if getattr(cls, "_plait_flavour", None):
                continue
            wrapped = distributed_class(cls, settings)
            objects[cls.__name__.lower()] = wrapped
            objects[cls.__name__] = wrapped
        for cls in custom_optimizers or ():
            objects[cls.__name__] = distributed_class(cls, settings)
        if custom_objects is not None:
            objects.update(custom_objects)
        return keras.models.load_model(filepath, custom_objects=objects)

    return dict(DistributedOptimizer=DistributedOptimizer,
                PartialDistributedOptimizer=PartialDistributedOptimizer,
                broadcast_global_variables=broadcast_global_variables,
                allreduce=allreduce, allgather=allgather, broadcast=broadcast,
                reducescatter=reducescatter, load_model=load_model)

