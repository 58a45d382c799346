"""Elastic Keras training's names (horovod.tensorflow.keras.elastic and
horovod.keras.elastic), refused when used, as plait.common.elastic: plait
has no elastic mode. The names import, so a script that only mentions them
loads; making a state or a callback, or calling a function wrapped by run,
raises NotImplementedError saying what is missing."""

from plait.common.elastic import refuse
from plait.tensorflow.elastic import TensorFlowKerasState, run as _tf_run


def make_elastic(keras):
    Callback = keras.callbacks.Callback

    class KerasState(TensorFlowKerasState):
        """Horovod's elastic state of a Keras model and optimizer; refused."""

        def __init__(self, model, optimizer=None, **kwargs):
            raise refuse("elastic.KerasState")

    class CommitStateCallback(Callback):
        """Horovod's callback committing the elastic state; refused."""

        def __init__(self, state, batches_per_commit=1):
            raise refuse("elastic.CommitStateCallback")

    class UpdateBatchStateCallback(Callback):
        """Horovod's callback recording state.batch; refused."""

        def __init__(self, state):
            raise refuse("elastic.UpdateBatchStateCallback")

    class UpdateEpochStateCallback(Callback):
        """Horovod's callback recording state.epoch; refused."""

        def __init__(self, state):
            raise refuse("elastic.UpdateEpochStateCallback")

    return dict(KerasState=KerasState, TensorFlowKerasState=TensorFlowKerasState, run=_tf_run,
                CommitStateCallback=CommitStateCallback,
                UpdateBatchStateCallback=UpdateBatchStateCallback,
                UpdateEpochStateCallback=UpdateEpochStateCallback)
