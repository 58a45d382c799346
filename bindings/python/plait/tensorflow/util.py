"""Helpers shared by plait.tensorflow's modules (horovod.tensorflow.util)."""

import tensorflow as tf

from plait.tensorflow._lib import executing_eagerly

_executing_eagerly = executing_eagerly


def _make_subgraph(f):
    return tf.function(f)


def _cache(f):
    """Memoizes f on its arguments and on whether TensorFlow runs eagerly."""
    cache = {}

    def wrapper(*args):
        key = (args, executing_eagerly())
        if key not in cache:
            cache[key] = f(*args)
        return cache[key]
    return wrapper


def variables_of(obj):
    """obj.variables as a list: a property in Keras 3 (and tf.Module), a
    method in tf_keras's optimizers; [] when obj has none."""
    v = getattr(obj, "variables", None)
    if v is None:
        return []
    if callable(v) and not isinstance(v, (list, tuple)):
        v = v()
    return list(v)


def _key(var):
    """A hashable identity for a variable (tf.Variable, a Keras 3 variable, a
    tensor). Horovod uses var.ref(), which Keras 3 variables lack; the
    object's identity works for both (the caller keeps the variable alive)."""
    return id(var)


def vars_to_refs(vars):
    """Horovod's: a hashable stand-in for a (nested) list of variables."""
    if isinstance(vars, list):
        return tuple(vars_to_refs(v) for v in vars)
    return _Ref(vars)


def refs_to_vars(refs):
    if isinstance(refs, tuple):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()


class _Ref:
    """Hashable by identity, like tf.Variable.ref(), for any variable."""
    __slots__ = ("_var",)

    def __init__(self, var):
        self._var = var

    def deref(self):
        return self._var

    def __hash__(self):
        return id(self._var)

    def __eq__(self, other):
        return isinstance(other, _Ref) and other._var is self._var
