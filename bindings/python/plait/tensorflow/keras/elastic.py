"""plait.tensorflow.keras.elastic: horovod.tensorflow.keras.elastic on
tf.keras (Keras 3, or tf_keras with TF_USE_LEGACY_KERAS=1): KerasState,
CommitStateCallback, UpdateBatchStateCallback, UpdateEpochStateCallback and
run (plait._keras.elastic)."""

from tensorflow import keras as _keras

from plait._keras.elastic import make_elastic as _make

globals().update(_make(_keras))
__all__ = ["KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback", "TensorFlowKerasState", "run"]
