"""plait.tensorflow.elastic: horovod.tensorflow.elastic's run,
TensorFlowKerasState and TensorFlowState (Horovod 0.28.1's semantics; the
common machinery, State, ObjectState and run_fn, is plait.common.elastic).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0)
    train(state)

A state saves its values to host memory at commit (numpy copies), puts them
back at restore (after a failed collective), and broadcasts rank 0's at
sync (before the function runs, and after every reset). Making a state runs
no collective: the first one is the sync inside the wrapped function.

Where plait differs from Horovod 0.28.1 (docs/tensorflow.md):
- TensorFlowState broadcasts its variables at sync in eager mode too (Horovod
  broadcasts them once, when the state is made, and never at sync);
- a TensorFlow error that did not come from a collective leaves the wrapped
  function as it is (Horovod's wrapper returns None for an UnknownError that
  names none of its operations);
- TensorFlowKerasState builds the optimizer's variables when it is made, so
  that a worker that joins later broadcasts the same variables as the others,
  and after a reset drops the model's traced train/test/predict functions, so
  they are traced again for the new number of ranks;
- a state whose variables changed in number since the commit is refused at
  restore (ValueError) rather than restored in part.
"""

import contextlib
import functools

import numpy as np
import tensorflow as tf

from plait.common.elastic import ObjectState, run_fn
from plait.tensorflow import _lib
from plait.tensorflow.functions import broadcast_object, broadcast_object_fn, broadcast_variables
from plait.tensorflow.mpi_ops import init, rank, shutdown
from plait.tensorflow.util import variables_of

__all__ = ["TensorFlowKerasState", "TensorFlowState", "run"]


def run(func):
    """Horovod's decorator for elastic training: func(state, ...) runs after
    state.sync(); a failed collective restores the last commit, a change of
    hosts keeps the state as it is, and in both cases the job is formed
    again (shutdown and init) and func runs again. Errors of plait's
    operations inside a tf.function (Keras's fit) or a TF1 graph arrive as
    TensorFlow errors: they leave func as plait's classes (a lost rank, a
    mismatch: HorovodInternalError, also of their TensorFlow class). No
    collective may run before func does."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        with _plait_errors():
            return func(state, *args, **kwargs)
    return run_fn(wrapper, _reset)


@contextlib.contextmanager
def _plait_errors():
    """A TensorFlow error of one of plait's operations (in a tf.function or
    a graph) leaves as plait's class for it, which is also its TensorFlow
    class: a lost rank or a mismatch is then a HorovodInternalError, which
    run recovers from. Other errors leave as they are."""
    try:
        yield
    except tf.errors.OpError as e:
        converted = _lib.convert(e)
        if converted is e:
            raise
        raise converted from e


def _reset():
    shutdown()
    init()


def _executing_eagerly():
    return _lib.executing_eagerly()


def _build_optimizer(optimizer, var_list):
    """Creates optimizer's variables (slots, iterations) for var_list if they
    do not exist yet: Keras 3 (built), tf_keras (_built), tf_keras's legacy
    optimizers (_create_all_weights). Local: no collective."""
    if hasattr(optimizer, "built"):
        if not optimizer.built:
            optimizer.build(var_list)
    elif hasattr(optimizer, "_create_all_weights"):
        optimizer._create_all_weights(var_list)
    elif hasattr(optimizer, "build"):
        if not getattr(optimizer, "_built", False):
            optimizer.build(var_list)


def _host_copy(var):
    return np.array(var.numpy(), copy=True)


def _assign_all(variables, values, what):
    if len(variables) != len(values):
        raise ValueError("plait.tensorflow.elastic: cannot restore the %s: it has %d variables "
                         "now and had %d at the last commit" % (what, len(variables), len(values)))
    for var, value in zip(variables, values):
        var.assign(value)


def _run_in(session, op):
    with _plait_errors():
        session.run(op)


def _global_variables():
    return tf.compat.v1.global_variables()


class _VariablesState(ObjectState):
    """ObjectState plus variables: _save_model, _load_model and _broadcast
    (rank 0's variables everywhere) are the subclass's."""

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        self._load_model()
        super().restore()

    def sync(self):
        self._broadcast()
        self._save_model()
        super().sync()


class TensorFlowKerasState(_VariablesState):
    """The elastic state of a Keras model and its optimizer (Keras 3 or
    tf_keras), plus the keyword properties (picklable objects, attributes of
    the state).

    Args:
        model: a built Keras model.
        optimizer: its optimizer; by default the one compiled into model.
        backend: the Keras backend; used in TF1 graph mode for the session.
        kwargs: properties to commit, restore and sync with the model.
    """

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        if model is None:
            raise ValueError("plait.tensorflow.elastic.TensorFlowKerasState: model is None")
        if hasattr(model, "build") and not model.built:
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        if self.optimizer is None:
            raise ValueError("plait.tensorflow.elastic.TensorFlowKerasState: no optimizer: pass "
                             "optimizer= or compile the model with one first")
        self.backend = backend
        self._graph = not _executing_eagerly()
        if self._graph:
            if backend is None:
                raise ValueError("plait.tensorflow.elastic.TensorFlowKerasState: in graph mode "
                                 "(TF1), pass backend= (the Keras backend, for its session)")
            session = backend.get_session()
            # Built once, as Horovod: a graph grows with every op made.
            bcast_op = broadcast_variables(_global_variables(), root_rank=0)
            self._broadcast = lambda: _run_in(session, bcast_op)
            bcast_object = broadcast_object_fn(session=session)
        else:
            _build_optimizer(self.optimizer, model.trainable_variables)
            self._broadcast = self._broadcast_eager
            bcast_object = broadcast_object
        self._save_model()
        super().__init__(bcast_object, rank, **kwargs)

    def _model_variables(self):
        return list(self.model.variables)

    def _optimizer_variables(self):
        return variables_of(self.optimizer)

    def _broadcast_eager(self):
        with _plait_errors():
            broadcast_variables(self._model_variables() + self._optimizer_variables(),
                                root_rank=0)

    def reset(self):
        """After a reset: Keras traces train/test/predict again at the next
        fit, for the job's new size."""
        for attr in ("train_function", "test_function", "predict_function"):
            if getattr(self.model, attr, None) is not None:
                setattr(self.model, attr, None)
        super().reset()

    def _save_model(self):
        if self._graph:
            self._saved_model_state = self.model.get_weights()
            self._saved_optimizer_state = self.optimizer.get_weights()
        else:
            self._saved_model_state = [_host_copy(v) for v in self._model_variables()]
            self._saved_optimizer_state = [_host_copy(v) for v in self._optimizer_variables()]

    def _load_model(self):
        if self._graph:
            self.model.set_weights(self._saved_model_state)
            self.optimizer.set_weights(self._saved_optimizer_state)
        else:
            _assign_all(self._model_variables(), self._saved_model_state, "model")
            _assign_all(self._optimizer_variables(), self._saved_optimizer_state, "optimizer")


class TensorFlowState(_VariablesState):
    """The elastic state of a list of TensorFlow variables, plus the keyword
    properties.

    Args:
        variables: the tf.Variables to track. Required in eager mode (TF2: it
            has no collection of global variables; [] tracks only the
            properties); in graph mode (TF1), tf.compat.v1.global_variables()
            by default.
        session: TF1 only: the session that holds the variables (default: the
            default session). A ValueError in eager mode.
        kwargs: properties to commit, restore and sync with the variables.
    """

    def __init__(self, variables=None, session=None, **kwargs):
        eager = _executing_eagerly()
        if eager and session is not None:
            raise ValueError("plait.tensorflow.elastic.TensorFlowState: session= is for TF1 "
                             "graph mode; eager execution (TF2) has no session: leave it out")
        if variables is None:
            if eager:
                raise ValueError("plait.tensorflow.elastic.TensorFlowState: pass variables= (a "
                                 "list of tf.Variable): eager execution has no global variable "
                                 "collection to default to ([] tracks only the properties)")
            variables = _global_variables()
        variables = list(variables)
        bad = [v for v in variables if not hasattr(v, "assign")]
        if bad:
            raise ValueError("plait.tensorflow.elastic.TensorFlowState: variables must be "
                             "tf.Variable objects, got %s" % type(bad[0]).__name__)
        self.variables = variables
        self._eager = eager
        if eager:
            self.session = None
            bcast_object = broadcast_object
        else:
            self.session = session or tf.compat.v1.get_default_session()
            if self.session is None:
                raise ValueError("plait.tensorflow.elastic.TensorFlowState: in graph mode, pass "
                                 "session= or make the state inside a default session")
            self._bcast_op = broadcast_variables(self.variables, root_rank=0)
            bcast_object = broadcast_object_fn(session=self.session)
        self._save_model()
        super().__init__(bcast_object, rank, **kwargs)

    def _broadcast(self):
        if self._eager:
            if self.variables:
                with _plait_errors():
                    broadcast_variables(self.variables, root_rank=0)
        else:
            _run_in(self.session, self._bcast_op)

    def _save_model(self):
        if self._eager:
            self._values = [_host_copy(v) for v in self.variables]
        else:
            self._values = [v.eval(self.session) for v in self.variables]

    def _load_model(self):
        if self._eager:
            _assign_all(self.variables, self._values, "variables")
        else:
            for var, value in zip(self.variables, self._values):
                var.load(value, self.session)
