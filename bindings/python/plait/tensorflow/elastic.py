"""plait.tensorflow.elastic: horovod.tensorflow.elastic's names (run,
TensorFlowKerasState, TensorFlowState), refused with NotImplementedError when
used: plait has no elastic mode yet (plait.common.elastic says what is
missing). `@hvd.elastic.run` may decorate a function (the script loads);
calling it, or making a state, raises.
"""

from plait.common.elastic import ObjectState, refuse, run_fn
from plait.common.basics import init, shutdown

__all__ = ["TensorFlowKerasState", "TensorFlowState", "run"]


def run(func):
    """Horovod's decorator for elastic training; the wrapped function raises
    NotImplementedError when called."""
    return run_fn(func, _reset)


def _reset():
    shutdown()
    init()


class TensorFlowKerasState(ObjectState):
    """Horovod's TensorFlowKerasState(model, optimizer=None, backend=None,
    **kwargs); raises NotImplementedError when made."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        raise refuse("plait.tensorflow.elastic.TensorFlowKerasState")


class TensorFlowState(ObjectState):
    """Horovod's TensorFlowState(variables=None, session=None, **kwargs);
    raises NotImplementedError when made."""

    def __init__(self, variables=None, session=None, **kwargs):
        raise refuse("plait.tensorflow.elastic.TensorFlowState")
