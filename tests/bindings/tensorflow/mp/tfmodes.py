"""Runs a TensorFlow computation in each of the three modes Horovod scripts
use: eagerly, inside tf.function, and in a tf.compat.v1 graph and session."""

import numpy as np
import tensorflow as tf

MODES = ["eager", "function", "graph"]


def run(mode, fn, *inputs):
    """fn(*tensors) in mode; inputs are numpy arrays; returns numpy results
    (the same structure fn returns)."""
    if mode == "eager":
        out = fn(*[tf.constant(x) for x in inputs])
        return tf.nest.map_structure(lambda t: t.numpy(), out)
    if mode == "function":
        out = tf.function(fn)(*[tf.constant(x) for x in inputs])
        return tf.nest.map_structure(lambda t: t.numpy(), out)
    assert mode == "graph", mode
    with tf.Graph().as_default():
        holders = [tf.compat.v1.placeholder(tf.as_dtype(x.dtype), x.shape) for x in inputs]
        out = fn(*holders)
        with tf.compat.v1.Session() as sess:
            return sess.run(out, feed_dict=dict(zip(holders, inputs)))


def np_dtype(tf_dtype):
    return tf.as_dtype(tf_dtype).as_numpy_dtype


def same(got, want, what):
    """Exact equality, dtype and shape included."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, "%s: dtype %s, want %s" % (what, got.dtype, want.dtype)
    assert got.shape == want.shape, "%s: shape %s, want %s" % (what, got.shape, want.shape)
    g = got.view(np.uint8) if got.dtype.kind not in "biufc" else got
    w = want.view(np.uint8) if want.dtype.kind not in "biufc" else want
    assert np.array_equal(g, w), "%s:\n got %r\nwant %r" % (what, got, want)
