"""Loads plait's TensorFlow op library (bindings/tensorflow) and turns its
errors into plait's exception classes.

The op library links libplait. plait._core is imported first, so the
libplait that Python loaded (PLAIT_LIBRARY, the package's or the system's)
is already in the process and the op library binds to that same one: one
engine, and the transport plugins are found beside it as plait_init finds
them (PLAIT_PLUGIN_PATH, then libplait's folder).

The op library, libplait_tensorflow.so, is looked up as every native
library of plait is (plait.common.library): PLAIT_TENSORFLOW_LIBRARY; beside
the libplait in use; in the package's plait/_lib folder.
"""

import re

import tensorflow as tf
from tensorflow.python.eager import context

from plait import _core
from plait.common import library as _library
from plait.tensorflow import _interrupt

LIB, library_path = _library.load(
    "libplait_tensorflow.so", "PLAIT_TENSORFLOW_LIBRARY", tf.load_op_library,
    (tf.errors.NotFoundError, OSError), "plait.tensorflow",
    "Build plait with -DPLAIT_TF_PYTHON=<python with tensorflow %s> (ci/test does), "
    "or set PLAIT_TENSORFLOW_LIBRARY to the library's path (docs/tensorflow.md)."
    % tf.__version__, what="plait's TensorFlow op library", beside=_core.library_path)


def executing_eagerly():
    return context.executing_eagerly()


# --------------------------------------------------------------------------
# Errors: the op library's messages start with "plait: PLAIT_ERR_...: ".
# An eager call that fails raises an exception of TensorFlow's class for the
# status (what Horovod's TensorFlow ops raise: UnknownError for a lost rank,
# FailedPreconditionError for mismatched operations, InvalidArgumentError
# for bad arguments) that is also plait's class for the result code (a
# HorovodInternalError / RuntimeError, or a ValueError for bad arguments).
# --------------------------------------------------------------------------

_MARK = re.compile(r"plait: (PLAIT_[A-Z_]+): ")

_mixed = {}


def _mixed_class(tf_cls, plait_cls):
    key = (tf_cls, plait_cls)
    cls = _mixed.get(key)
    if cls is None:
        def __init__(self, node_def, op, message, code, error_code):
            # OpError's fields, set here: its __init__ chains to
            # Exception.__init__ through super(), which would reach plait's.
            Exception.__init__(self, message)
            self._node_def, self._op, self._message = node_def, op, message
            self._error_code = error_code
            self._experimental_payloads = {}
            self.code = code
            self.name = _core.RESULT_NAMES.get(code, "PLAIT_RESULT_UNKNOWN")

        def __reduce__(self):
            return (type(self), (self.node_def, self.op, self.message, self.code,
                                 self.error_code))
        cls = type(plait_cls.__name__, (tf_cls, plait_cls),
                   {"__init__": __init__, "__reduce__": __reduce__, "__module__": "plait"})
        _mixed[key] = cls
    return cls


def convert(e):
    """The exception to raise for a TensorFlow error e: e itself unless it
    came from plait, else plait's class for it (also e's TensorFlow class)."""
    if not isinstance(e, tf.errors.OpError):
        return e
    m = _MARK.search(e.message or "")
    if not m or m.group(1) not in _core.RESULTS:
        return e
    code = _core.RESULTS[m.group(1)]
    plait_cls = _core.ERRORS.get(code, _core.PlaitError)
    cls = _mixed_class(type(e), plait_cls)
    return cls(e.node_def, e.op, e.message, code, e.error_code)


def call(fn, *args, **kwargs):
    """fn(*args, **kwargs), raising plait's classes for plait's errors when
    run eagerly (in a graph, errors surface when the graph runs); eagerly,
    CancelledError when a signal abandoned the operation and its handler
    returned (plait.tensorflow._interrupt)."""
    watched = _interrupt._take is not None and context.executing_eagerly()
    if watched:
        _interrupt.forget()
    try:
        out = fn(*args, **kwargs)
    except tf.errors.OpError as e:
        converted = convert(e)
        if converted is e:
            raise
        raise converted from None
    if watched:
        _interrupt.raise_if_abandoned()
    return out
