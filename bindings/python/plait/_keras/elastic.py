"""Elastic Keras training (horovod._keras.elastic, Horovod 0.28.1's
semantics): KerasState and the callbacks that commit the state and keep its
epoch and batch, for one Keras module. make_elastic(keras) gives the classes
bound to it: plait.tensorflow.keras.elastic (tf.keras: Keras 3, or tf_keras
with TF_USE_LEGACY_KERAS=1) and plait.keras.elastic (`import keras`).

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.CommitStateCallback(state, batches_per_commit=10),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state)]

    @hvd.elastic.run
    def train(state):
        model.fit(dataset, steps_per_epoch=..., epochs=epochs - state.epoch,
                  callbacks=callbacks)
"""

from plait.tensorflow.elastic import TensorFlowKerasState, run as _tf_run


def _check_state(state, what, attribute=None):
    if not callable(getattr(state, "commit", None)):
        raise ValueError("%s: state must be an elastic State (plait.common.elastic.State, e.g. "
                         "KerasState), got %s" % (what, type(state).__name__))
    if attribute is not None and not hasattr(state, attribute):
        raise ValueError("%s: the state has no property %r: make it with %s=0 (e.g. "
                         "KerasState(model, %s=0)) so that it is committed and synced"
                         % (what, attribute, attribute, attribute))


class CommitStateCallbackImpl:
    """Commits state every batches_per_commit batches and at the end of every
    epoch; the count starts again at every fit (after every reset)."""

    def __init__(self, backend, state, batches_per_commit=1):
        super().__init__()
        _check_state(state, "CommitStateCallback")
        if isinstance(batches_per_commit, bool) or not isinstance(batches_per_commit, int) \
                or batches_per_commit <= 0:
            raise ValueError("CommitStateCallback: batches_per_commit must be an int > 0, got %r"
                             % (batches_per_commit,))
        self.backend = backend
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        # Every rank starts counting again after a reset, so they commit together.
        self.batches_remaining = self.batches_per_commit

    def on_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.commit()

    def commit(self):
        self.state.commit()


class UpdateBatchStateCallbackImpl:
    """Keeps state.batch: the index of the last batch done in this epoch (0
    at its end). With a known number of steps per epoch, the first epoch
    after a reset has params['steps'] = steps - state.batch (Horovod's
    formula; what callbacks are told, not what Keras runs)."""

    def __init__(self, backend, state):
        super().__init__()
        _check_state(state, "UpdateBatchStateCallback", "batch")
        self.backend = backend
        self.state = state
        self.steps_per_epoch = None

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        params = self.params if isinstance(getattr(self, "params", None), dict) else {}
        if params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = params["steps"]
            params["steps"] = self.steps_per_epoch - self.state.batch

    def on_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallbackImpl:
    """Keeps state.epoch: the number of epochs done over the whole run, across
    resets (Keras counts from 0 at every fit)."""

    def __init__(self, backend, state):
        super().__init__()
        _check_state(state, "UpdateEpochStateCallback", "epoch")
        self.backend = backend
        self.state = state
        self.initial_epoch = self.state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        # + 1: the epoch is done; a reset after state.batch went back to 0
        # must not repeat it.
        self.state.epoch = self.initial_epoch + epoch + 1


def make_elastic(keras):
    """KerasState, the three callbacks and run, bound to the Keras module keras."""
    Callback = keras.callbacks.Callback
    keras_backend = keras.backend

    class KerasState(TensorFlowKerasState):
        """The elastic state of a Keras model and optimizer (by default the
        one compiled into the model), plus the keyword properties."""

        def __init__(self, model, optimizer=None, backend=None, **kwargs):
            super().__init__(model, optimizer=optimizer,
                             backend=backend if backend is not None else keras_backend,
                             **kwargs)

    class CommitStateCallback(CommitStateCallbackImpl, Callback):
        """Commits state every batches_per_commit batches (default 1) and at
        the end of each epoch."""

        def __init__(self, state, batches_per_commit=1):
            super().__init__(keras_backend, state, batches_per_commit)

    class UpdateBatchStateCallback(UpdateBatchStateCallbackImpl, Callback):
        """Sets state.batch to the current batch at the end of each batch, and
        back to 0 at the end of each epoch."""

        def __init__(self, state):
            super().__init__(keras_backend, state)

    class UpdateEpochStateCallback(UpdateEpochStateCallbackImpl, Callback):
        """Sets state.epoch at the end of each epoch, counting across resets."""

        def __init__(self, state):
            super().__init__(keras_backend, state)

    return dict(KerasState=KerasState, TensorFlowKerasState=TensorFlowKerasState, run=_tf_run,
                CommitStateCallback=CommitStateCallback,
                UpdateBatchStateCallback=UpdateBatchStateCallback,
                UpdateEpochStateCallback=UpdateEpochStateCallback)
