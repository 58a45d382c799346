"""SyncBatchNormalization: batch normalization whose batch statistics are
averaged over all ranks (horovod.tensorflow.SyncBatchNormalization).

As Horovod: each rank computes its batch mean and E[X^2], one allreduce (Sum)
of the two, divided by size, gives the global mean and variance
(Var = E[X^2] - E[X]^2), so every rank's batch counts the same. Works on
Keras 3's BatchNormalization (tf.keras in TF 2.16+) and on tf_keras's.
"""

import inspect
import warnings

import tensorflow as tf

from plait.tensorflow.mpi_ops import Sum, _allreduce, size

_fused_ignored_said = False


class _Unset(int):
    """fused's default: False (Horovod's default, and what signatures show),
    told apart from a fused=False the caller wrote."""

    def __repr__(self):
        return "False"

    __str__ = __repr__


_FUSED_DEFAULT = _Unset(0)


def _say_fused_ignored():
    """Once per process: Keras 3 has no fused kernel, so fused=False means
    nothing there (Horovod-era scripts pass it)."""
    global _fused_ignored_said
    if not _fused_ignored_said:
        _fused_ignored_said = True
        warnings.warn("SyncBatchNormalization: fused=False is ignored: Keras 3's "
                      "BatchNormalization has no fused kernel (nor a fused argument)",
                      UserWarning, stacklevel=3)


def _takes_fused(cls):
    """Whether cls's constructor, or one it passes **kwargs to, has fused
    (tf_keras's BatchNormalization passes it on to BatchNormalizationBase)."""
    for c in cls.__mro__:
        init = c.__dict__.get("__init__")
        if init is not None and "fused" in inspect.signature(init).parameters:
            return True
    return False


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """Batch normalization with statistics over every rank's batch.

    fused: as Horovod, only False (True and None, which may pick the fused
    kernel, raise ValueError). tf_keras's BatchNormalization takes it; Keras
    3's has none, so there it is ignored, with a warning the first time."""

    def __init__(self, fused=_FUSED_DEFAULT, **kwargs):
        if fused in (True, None):
            raise ValueError('SyncBatchNormalization does not support fused=True.')
        if not kwargs.get('name', None):
            kwargs['name'] = 'sync_batch_normalization'
        if _takes_fused(tf.keras.layers.BatchNormalization):
            # tf_keras (Keras 2): fused=False keeps it off its fused kernel,
            # which never calls _moments (statistics of this rank only).
            super().__init__(fused=bool(fused), **kwargs)
        else:
            if fused is not _FUSED_DEFAULT:
                _say_fused_ignored()
            super().__init__(**kwargs)                # Keras 3 has no fused argument

    def _moments(self, inputs, *args, **kwargs):
        worker_mean, worker_variance = super()._moments(inputs, *args, **kwargs)
        if size() <= 1:
            return worker_mean, worker_variance
        worker_mean_of_square = worker_variance + tf.math.square(worker_mean)
        group = _allreduce(tf.stack([worker_mean, worker_mean_of_square]), op=Sum)
        group /= size()
        group_mean, group_mean_of_square = tf.unstack(group)
        return group_mean, group_mean_of_square - tf.math.square(group_mean)
