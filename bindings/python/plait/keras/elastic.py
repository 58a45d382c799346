"""plait.keras.elastic: horovod.keras.elastic on `import keras` (Keras 3):
KerasState, CommitStateCallback, UpdateBatchStateCallback,
UpdateEpochStateCallback and run (plait._keras.elastic)."""

import keras as _keras

from plait._keras.elastic import make_elastic as _make

globals().update(_make(_keras))
__all__ = ["KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback", "TensorFlowKerasState", "run"]
