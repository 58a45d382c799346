"""plait.tensorflow.keras.callbacks: horovod.tensorflow.keras.callbacks on
tf.keras (Keras 3, or tf_keras with TF_USE_LEGACY_KERAS=1)."""

from tensorflow import keras as _keras

from plait._keras.callbacks import make_callbacks as _make

globals().update(_make(_keras))
__all__ = ["BroadcastGlobalVariablesCallback", "MetricAverageCallback",
           "LearningRateScheduleCallback", "LearningRateWarmupCallback", "BestModelCheckpoint"]
