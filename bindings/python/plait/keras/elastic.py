"""plait.keras.elastic: horovod.keras.elastic's names,
refused when used (plait has no elastic mode; plait.common.elastic)."""

import keras as _keras

from plait._keras.elastic import make_elastic as _make

globals().update(_make(_keras))
__all__ = ["KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback", "TensorFlowKerasState", "run"]
