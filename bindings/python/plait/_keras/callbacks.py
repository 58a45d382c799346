"""Keras callbacks with Horovod 0.28's semantics (horovod._keras.callbacks),
written for Keras 3 and tf_keras alike. plait.tensorflow.keras.callbacks and
plait.keras.callbacks mix these into their Keras's Callback classes.

Keras 3 idioms: variables are told apart by path (var_key), values are read
and written through the variables themselves (assign, numpy) rather than
keras.backend.get_value/set_value, which Keras 3 no longer has.
"""

import warnings

import numpy as np
import tensorflow as tf

import plait.tensorflow as _ptf
from plait._keras.gradients import var_key
from plait.tensorflow.util import variables_of as _variables




def _label(var, index):
    label = getattr(var, "path", None) or getattr(var, "name", None) or "var"
    return "%d.%s" % (index, str(label).replace(":", "_"))


def broadcast_keras_variables(variables, root_rank, prefix):
    """Sets every variable in variables to its value on root_rank (Keras 3
    variables or tf.Variables; eager)."""
    for i, var in enumerate(variables):
        value = _ptf.broadcast(tf.convert_to_tensor(var), root_rank,
                               name="%s.%s" % (prefix, _label(var, i)))
        var.assign(value)


def get_value(x):
    """The Python number held by a variable, tensor or number."""
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy()).item()
    if isinstance(x, (int, float, np.number)):
        return float(x)
    return np.asarray(tf.keras.backend.get_value(x)).item()


def _settable(x):
    return hasattr(x, "assign")


class BroadcastGlobalVariablesCallbackImpl:
    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False
        self._local_vars = set()
        if local_variables is None:
            local_variables = []
        elif hasattr(local_variables, "assign"):
            local_variables = [local_variables]
        else:
            local_variables = list(local_variables)
        bad = [v for v in local_variables if not hasattr(v, "assign")]
        if bad:
            raise ValueError("All local variables must be of tf.Variable type (or Keras "
                             "variables); got %s" % type(bad[0]).__name__)
        for var in local_variables:
            self.register_local_var(var)

    def register_local_var(self, var):
        """var is not broadcast (it stays as this rank has it)."""
        self._local_vars.add(var_key(var))

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        # After the first batch, as Horovod: the optimizer's variables exist by then.
        with tf.device(self.device):
            if not tf.executing_eagerly():
                bcast = _ptf.broadcast_global_variables(self.root_rank)
                tf.compat.v1.keras.backend.get_session().run(bcast)
            else:
                model_vars = [v for v in self.model.variables
                              if var_key(v) not in self._local_vars]
                broadcast_keras_variables(model_vars, self.root_rank,
                                          "BroadcastGlobalVariablesCallback.model")
                opt = getattr(self.model, "optimizer", None)
                if opt is not None:
                    broadcast_keras_variables(_variables(opt), self.root_rank,
                                              "BroadcastGlobalVariablesCallback.optimizer")
        self.broadcast_done = True


class MetricAverageCallbackImpl:
    def __init__(self, device=""):
        super().__init__()
        self.device = device

    def _average_metrics_in_place(self, logs):
        if not logs:
            return
        reduced = {}
        # Sorted by name: the same order on every rank.
        with tf.device(self.device):
            for metric, value in sorted(logs.items()):
                t = _ptf.allreduce(tf.constant(value), name="MetricAverageCallback." + metric)
                reduced[metric] = t.numpy() if hasattr(t, "numpy") else \
                    tf.compat.v1.keras.backend.get_session().run(t)
        logs.update(reduced)

    def on_epoch_end(self, epoch, logs=None):
        self._average_metrics_in_place(logs)


class LearningRateScheduleCallbackImpl:
    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.initial_lr = initial_lr
        self.restore_momentum = None
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        if not callable(multiplier):
            # A constant multiplier is exponential decay from start_epoch.
            self.multiplier = lambda epoch: multiplier ** (epoch - start_epoch)
        else:
            self.multiplier = multiplier
        self._warned_momentum = False

    # The optimizer's learning rate: `learning_rate` (Keras 3, tf_keras), `lr` (older).
    def _lr_attr(self):
        opt = self.model.optimizer
        return "learning_rate" if hasattr(opt, "learning_rate") else "lr"

    def _get_lr(self):
        return get_value(getattr(self.model.optimizer, self._lr_attr()))

    def _set_lr(self, value):
        opt = self.model.optimizer
        current = getattr(opt, self._lr_attr())
        if _settable(current):
            current.assign(value)
        else:
            setattr(opt, self._lr_attr(), value)

    def _autodetect_steps_per_epoch(self):
        if self.params.get("steps"):
            return self.params["steps"]
        if self.params.get("samples") and self.params.get("batch_size"):
            return self.params["samples"] // self.params["batch_size"]
        raise ValueError("Could not autodetect the number of steps per epoch. Please specify "
                         "the steps_per_epoch parameter to the %s() or upgrade to the latest "
                         "version of Keras." % self.__class__.__name__)

    def _momentum_buffers(self):
        opt = self.model.optimizer
        for attr in ("momentums", "_momentums"):
            bufs = getattr(opt, attr, None)
            if isinstance(bufs, (list, tuple)) and bufs and all(_settable(b) for b in bufs):
                return list(bufs)
        return None

    def _correct_momentum(self, ratio):
        """Momentum correction (Goyal et al.): this step's momentum term is
        scaled by new_lr / old_lr."""
        opt = self.model.optimizer
        momentum = opt.momentum
        if _settable(momentum):
            # A variable (tf_keras's legacy optimizers): Horovod's way, restored after the batch.
            self.restore_momentum = get_value(momentum)
            momentum.assign(self.restore_momentum * ratio)
            return
        if not momentum:
            return
        iterations = getattr(opt, "iterations", None)
        if getattr(opt, "built", True) is False or \
                (iterations is not None and get_value(iterations) == 0):
            return  # no step yet: the momentum buffers are zero (or not made), nothing to scale
        # A Python float (Keras 3, tf_keras's optimizers): a compiled train step has it
        # as a constant, so scale what it multiplies, the momentum buffers, instead.
        bufs = self._momentum_buffers()
        if bufs is not None:
            for b in bufs:
                b.assign(b * tf.cast(ratio, b.dtype))
        elif not self._warned_momentum:
            self._warned_momentum = True
            warnings.warn("plait: momentum correction skipped: %s keeps its momentum as a "
                          "Python number and its momentum buffers were not found"
                          % type(opt).__name__)

    def _adjust_learning_rate(self, epoch):
        old_lr = self._get_lr()
        new_lr = self.initial_lr * self.multiplier(epoch)
        self._set_lr(new_lr)
        if hasattr(self.model.optimizer, "momentum") and self.momentum_correction and old_lr:
            self._correct_momentum(new_lr / old_lr)

    def _restore_momentum_if_needed(self):
        if self.restore_momentum:
            self.model.optimizer.momentum.assign(self.restore_momentum)
            self.restore_momentum = None

    def on_train_begin(self, logs=None):
        if self.initial_lr is None:
            self.initial_lr = self._get_lr()
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_batch_begin(self, batch, logs=None):
        if (self.current_epoch < self.start_epoch or
                (self.end_epoch is not None and self.current_epoch >= self.end_epoch)):
            return
        if self.staircase and batch == 0:
            self._adjust_learning_rate(self.current_epoch)
        elif not self.staircase:
            self._adjust_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_batch_end(self, batch, logs=None):
        self._restore_momentum_if_needed()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = self._get_lr()


class LearningRateWarmupCallbackImpl(LearningRateScheduleCallbackImpl):
    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None,
                 verbose=0):
        def multiplier(epoch):
            # Shifted by one batch so that each epoch ends on a round value.
            epoch += 1. / self.steps_per_epoch
            n = _ptf.size()
            return 1. / n * (epoch * (n - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and _ptf.rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g." %
                  (epoch + 1, self._get_lr()))


def make_callbacks(keras):
    """The callback classes on keras's Callback and ModelCheckpoint."""
    Callback = keras.callbacks.Callback

    class BroadcastGlobalVariablesCallback(BroadcastGlobalVariablesCallbackImpl, Callback):
        """Broadcasts the model's and the optimizer's variables from root_rank
        to every rank at the end of the first batch (so that all ranks train
        from the same weights, random or restored); local_variables stay."""

        def __init__(self, root_rank, device="", local_variables=None):
            super().__init__(root_rank, device, local_variables)

    class MetricAverageCallback(MetricAverageCallbackImpl, Callback):
        """Averages the epoch's metrics (logs) over all ranks at the end of
        each epoch. Put it before callbacks that read metrics
        (ReduceLROnPlateau, TensorBoard, checkpoints)."""

        def __init__(self, device=""):
            super().__init__(device)

    class LearningRateScheduleCallback(LearningRateScheduleCallbackImpl, Callback):
        """Sets the learning rate to initial_lr * multiplier(epoch) between
        start_epoch and end_epoch (exclusive): at the start of each epoch
        (staircase) or of each batch (epoch + batch / steps_per_epoch)."""

        def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None,
                     staircase=True, momentum_correction=True, steps_per_epoch=None):
            super().__init__(initial_lr, multiplier, start_epoch, end_epoch, staircase,
                             momentum_correction, steps_per_epoch)

    class LearningRateWarmupCallback(LearningRateWarmupCallbackImpl, Callback):
        """Gradual warmup: lr goes from initial_lr / size to initial_lr over
        warmup_epochs (Goyal et al., 'Accurate, Large Minibatch SGD')."""

        def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                     steps_per_epoch=None, verbose=0):
            super().__init__(initial_lr, warmup_epochs, momentum_correction, steps_per_epoch,
                             verbose)

    keras3 = not hasattr(keras.callbacks.ModelCheckpoint, "_save_model") or \
        "keras.src" in keras.callbacks.ModelCheckpoint.__module__

    class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
        """ModelCheckpoint that keeps the best model only (save_best_only);
        its filepath is set later (checkpoint.filepath = ...), before fit."""

        def __init__(self, monitor="val_loss", verbose=0, save_weights_only=False, mode="auto",
                     save_freq="epoch"):
            # Keras 3 checks the file suffix when constructed: give one, then forget it.
            placeholder = None
            if keras3:
                placeholder = "best.weights.h5" if save_weights_only else "best.keras"
            super().__init__(filepath=placeholder, monitor=monitor, verbose=verbose,
                             save_best_only=True, save_weights_only=save_weights_only,
                             mode=mode, save_freq=save_freq)
            self.filepath = None

        def on_train_begin(self, logs=None):
            if not self.filepath:
                raise ValueError("BestModelCheckpoint: set its filepath (checkpoint.filepath = "
                                 "'...') before training")
            if keras3:
                suffix = ".weights.h5" if self.save_weights_only else ".keras"
                if not str(self.filepath).endswith(suffix):
                    raise ValueError("BestModelCheckpoint: with save_weights_only=%s the "
                                     "filepath must end in %s (Keras 3), got %r"
                                     % (self.save_weights_only, suffix, self.filepath))
            parent = getattr(super(), "on_train_begin", None)
            if parent is not None:
                parent(logs)

    return {c.__name__: c for c in (BroadcastGlobalVariablesCallback, MetricAverageCallback,
                                     LearningRateScheduleCallback, LearningRateWarmupCallback,
                                     BestModelCheckpoint)}
