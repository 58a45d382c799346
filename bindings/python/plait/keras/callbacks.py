"""plait.keras.callbacks: horovod.keras.callbacks on
`import keras` (Keras 3)."""

import keras as _keras

from plait._keras.callbacks import make_callbacks as _make

globals().update(_make(_keras))
__all__ = ["BroadcastGlobalVariablesCallback", "MetricAverageCallback",
           "LearningRateScheduleCallback", "LearningRateWarmupCallback", "BestModelCheckpoint"]
