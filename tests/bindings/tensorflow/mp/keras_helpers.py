"""Helpers of the Keras tests (test_keras*.py), run under plaitrun at 2 and 3
ranks in the TensorFlow venv, with Keras 3 (tf.keras) and with tf_keras
(TF_USE_LEGACY_KERAS=1): data split so that a step of every rank together
is one step of a single process on the concatenated batch, models with
fixed weights, and the checks."""

import os

import numpy as np
import tensorflow as tf
from tensorflow import keras

import plait.tensorflow as ptf
import plait.tensorflow.keras as hvd

LEGACY = os.environ.get("TF_USE_LEGACY_KERAS", "0") not in ("", "0", "false", "False")
KERAS3 = not LEGACY

B = 4          # rows per rank per step
FEATURES = 6


def init():
    hvd.init()
    return hvd.rank(), hvd.size()


def dataset(steps, seed=11):
    """The global data of `steps` steps (steps * size * B rows), and this
    rank's rows: step k of rank r is rows [k*size*B + r*B, ... + B)."""
    n, r = hvd.size(), hvd.rank()
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(steps * n * B, FEATURES)).astype("float32")
    y = (x @ rng.normal(size=(FEATURES, 1)) + 0.1).astype("float32")
    idx = np.concatenate([np.arange(k * n * B + r * B, k * n * B + (r + 1) * B)
                          for k in range(steps)])
    return x, y, x[idx], y[idx]


def dense_model(seed=3):
    """A small MLP with weights fixed by seed (the same on every rank)."""
    m = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(5, activation="tanh"),
                          keras.layers.Dense(3), keras.layers.Dense(1)])
    rng = np.random.default_rng(seed)
    m.set_weights([rng.normal(scale=0.5, size=w.shape).astype(w.dtype) for w in m.get_weights()])
    return m


def weights(model):
    return [np.asarray(w) for w in model.get_weights()]


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg="weight %d" % i)


def assert_identical_across_ranks(arrays):
    """Every rank holds bit-identical arrays (compared as bytes, allgathered)."""
    flat = np.concatenate([np.asarray(a, dtype=np.float32).reshape(-1) for a in arrays])
    bits = flat.view(np.int32).reshape(1, -1)
    everyone = ptf.allgather(tf.constant(bits), name="test.identical.%d" % flat.size).numpy()
    for r in range(everyone.shape[0]):
        assert np.array_equal(everyone[r], everyone[0]), \
            "rank %d's weights differ from rank 0's (%d of %d values)" % (
                r, int((everyone[r] != everyone[0]).sum()), flat.size)


def differ_across_ranks(arrays):
    flat = np.concatenate([np.asarray(a, dtype=np.float32).reshape(-1) for a in arrays])
    everyone = ptf.allgather(tf.constant(flat.reshape(1, -1)),
                             name="test.differ.%d" % flat.size).numpy()
    return any(not np.array_equal(everyone[r], everyone[0]) for r in range(everyone.shape[0]))


def reference_fit(make_model, optimizer, x, y, batch_size, epochs=1):
    """A single process's fit on the global data (no plait)."""
    m = make_model()
    m.compile(optimizer=optimizer, loss="mse")
    m.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    return m
