"""plait.tensorflow.SyncBatchNormalization's Horovod-era arguments, on Keras 3
and on tf_keras (TF_USE_LEGACY_KERAS=1, its own ctest entry): fused=False is
taken where BatchNormalization has it (tf_keras) and ignored with one warning
per process where it has none (Keras 3); fused=True or None raise as in
Horovod.

Run: plaitrun -np 2 <tf venv python> -m pytest -x tests/bindings/tensorflow/mp/test_keras_layers.py
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import plait.tensorflow as hvd
from plait.tensorflow import sync_batch_norm
from keras_helpers import LEGACY, init

RANK, SIZE = init()


def _fused_warnings(caught):
    return [w for w in caught if "fused" in str(w.message)]


def test_sync_batch_normalization_fused_false():
    sync_batch_norm._fused_ignored_said = False  # as in a fresh process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layers = [hvd.SyncBatchNormalization(fused=False, axis=-1, epsilon=1e-3)
                  for _ in range(2)]
        plain = hvd.SyncBatchNormalization(axis=-1)
    if LEGACY:
        assert not _fused_warnings(caught)
        assert layers[0].fused is False and plain.fused is False
    else:
        assert len(_fused_warnings(caught)) == 1, [str(w.message) for w in caught]
        assert "ignored" in str(_fused_warnings(caught)[0].message)
    # Each rank normalizes with every rank's batch statistics, on images
    # (NHWC, axis=-1) too, where tf_keras would pick its fused kernel (which
    # never calls _moments: statistics of this rank only) unless told fused=False.
    for layer, shape in ((layers[0], (4, 5)), (layers[1], (4, 3, 3, 2)), (plain, (4, 3, 3, 2))):
        rng = np.random.default_rng(3)
        full = rng.standard_normal((shape[0] * SIZE,) + shape[1:]).astype(np.float32) * 3 + 1
        mine = slice(shape[0] * RANK, shape[0] * (RANK + 1))
        got = layer(tf.constant(full[mine]), training=True).numpy()
        want = tf.keras.layers.BatchNormalization(axis=-1, epsilon=layer.epsilon)(
            tf.constant(full), training=True).numpy()[mine]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(shape))


def test_sync_batch_normalization_without_fused_does_not_warn():
    sync_batch_norm._fused_ignored_said = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hvd.SyncBatchNormalization(axis=-1)
        hvd.SyncBatchNormalization.from_config(hvd.SyncBatchNormalization().get_config())
    assert not _fused_warnings(caught)


@pytest.mark.parametrize("fused", [True, None])
def test_sync_batch_normalization_fused_true_or_none_refused(fused):
    with pytest.raises(ValueError, match="does not support fused=True"):
        hvd.SyncBatchNormalization(fused=fused)
