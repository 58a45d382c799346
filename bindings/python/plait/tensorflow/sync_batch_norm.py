"""SyncBatchNormalization: batch normalization whose batch statistics are
averaged over all ranks (horovod.tensorflow.SyncBatchNormalization).

As Horovod: each rank computes its batch mean and E[X^2], one allreduce (Sum)
of the two, divided by size, gives the global mean and variance
(Var = E[X^2] - E[X]^2), so every rank's batch counts the same. Works on
Keras 3's BatchNormalization (tf.keras in TF 2.16+) and on tf_keras's.
"""

import inspect

import tensorflow as tf

from plait.tensorflow.mpi_ops import Sum, _allreduce, size


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """Batch normalization with statistics over every rank's batch."""

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError('SyncBatchNormalization does not support fused=True.')
        if not kwargs.get('name', None):
            kwargs['name'] = 'sync_batch_normalization'
        base = tf.keras.layers.BatchNormalization.__init__
        if "fused" in inspect.signature(base).parameters:
            super().__init__(fused=fused, **kwargs)   # tf_keras (Keras 2)
        else:
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
