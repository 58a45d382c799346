"""plait.tensorflow.keras: a drop-in for horovod.tensorflow.keras (0.28) on
tf.keras, which is Keras 3 in TensorFlow 2.16+ and tf_keras (Keras 2) with
TF_USE_LEGACY_KERAS=1.

    import plait.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])

Unlike Horovod 0.28, DistributedOptimizer really allreduces under Keras 3
and BroadcastGlobalVariablesCallback works there (docs/tensorflow.md).
"""

from tensorflow import keras as _keras

from plait.tensorflow import (  # noqa: F401
    init, shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, mpi_threads_supported, mpi_enabled, mpi_built,
    gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built, cuda_built, rocm_built,
    Average, Sum, Adasum, Compression, ProcessSet, global_process_set, add_process_set,
    remove_process_set,
)
from plait._keras import make_api as _make_api
from plait.tensorflow.keras import callbacks, elastic  # noqa: F401

globals().update(_make_api(_keras, Compression.none))
