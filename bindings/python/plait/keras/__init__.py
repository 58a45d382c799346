"""plait.keras: a drop-in for horovod.keras (0.28), Horovod's API for
standalone Keras (`import keras`, Keras 3 with the TensorFlow backend here).
The same functions as plait.tensorflow.keras, bound to `keras`.

    import plait.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))

Unlike Horovod 0.28, DistributedOptimizer really allreduces under Keras 3
and BroadcastGlobalVariablesCallback works there (docs/tensorflow.md).
"""

import keras as _keras

from plait.tensorflow import (  # noqa: F401
    init, shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, mpi_threads_supported, mpi_enabled, mpi_built,
    gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built, cuda_built, rocm_built,
    Average, Sum, Adasum, Compression, ProcessSet, global_process_set, add_process_set,
    remove_process_set,
)
from plait._keras import make_api as _make_api
from plait.keras import callbacks, elastic  # noqa: F401

globals().update(_make_api(_keras, Compression.none, horovod_keras_order=True))
