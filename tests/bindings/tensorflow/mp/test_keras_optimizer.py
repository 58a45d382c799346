"""plait.tensorflow.keras.DistributedOptimizer under plaitrun (2 and 3 ranks),
on Keras 3 and on tf_keras (TF_USE_LEGACY_KERAS=1, its own ctest entry):
fit trains to the weights of one process on the concatenated batch and
stays bit-identical across ranks; every option; the errors.

Run: plaitrun -np 2 <tf venv python> -m pytest -x tests/bindings/tensorflow/mp/test_keras_optimizer.py
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow import keras

import plait.tensorflow.keras as hvd
from keras_helpers import (B, KERAS3, LEGACY, assert_close, assert_identical_across_ranks,
                           dataset, dense_model, differ_across_ranks, init, reference_fit,
                           weights)

RANK, SIZE = init()


def fit(model, opt, x, y, epochs=1, callbacks=()):
    model.compile(optimizer=opt, loss="mse")
    return model.fit(x, y, batch_size=B, epochs=epochs, shuffle=False, verbose=0,
                     callbacks=list(callbacks))


# --------------------------------------------------------------------------
# Which Keras runs, and that it is the one asked for
# --------------------------------------------------------------------------

def test_keras_generation_is_the_one_asked_for():
    opt = keras.optimizers.SGD(0.1)
    from plait._keras.optimizer import is_keras3_optimizer
    assert is_keras3_optimizer(opt) == KERAS3, (type(opt).__mro__, LEGACY)


# --------------------------------------------------------------------------
# fit: same weights as one process on the concatenated batch, identical ranks
# --------------------------------------------------------------------------

@pytest.mark.parametrize("make_opt", [
    lambda: keras.optimizers.SGD(0.05),
    lambda: keras.optimizers.SGD(0.05, momentum=0.9),
    lambda: keras.optimizers.Adam(0.01),
], ids=["sgd", "momentum", "adam"])
def test_fit_matches_one_process_on_concatenated_batch(make_opt):
    x, y, xl, yl = dataset(steps=6)
    m = dense_model()
    fit(m, hvd.DistributedOptimizer(make_opt()), xl, yl, epochs=2)
    ref = reference_fit(dense_model, make_opt(), x, y, batch_size=B * SIZE, epochs=2)
    assert_close(weights(m), weights(ref))
    assert_identical_across_ranks(weights(m))
    # The loss over all the data went down (each rank's own loss need not).
    def global_loss(model):
        return float(np.mean((np.asarray(model(x)) - y) ** 2))
    assert global_loss(m) < global_loss(dense_model())
    # Without plait the ranks would have trained apart: the data differs per rank.
    solo = dense_model()
    fit(solo, make_opt(), xl, yl, epochs=2)
    assert differ_across_ranks(weights(solo))


def test_wrapped_optimizer_keeps_class_name_and_config():
    base = keras.optimizers.SGD(0.25, momentum=0.5)
    opt = hvd.DistributedOptimizer(base)
    assert type(opt).__name__ == "SGD"
    assert isinstance(opt, type(base))
    assert opt.get_config()["momentum"] == 0.5
    assert opt.get_config()["learning_rate"] == pytest.approx(0.25)


def test_iterations_count_every_step():
    x, y, xl, yl = dataset(steps=3)
    m = dense_model()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05))
    fit(m, opt, xl, yl)
    assert int(opt.iterations.numpy()) == 3


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------

@pytest.mark.parametrize("average", [True, False], ids=["averaged", "summed"])
def test_backward_passes_per_step(average):
    steps = 4
    x, y, xl, yl = dataset(steps=steps)
    m = dense_model()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05), backward_passes_per_step=2,
                                   average_aggregated_gradients=average)
    fit(m, opt, xl, yl)
    # Two passes of every rank make one step of one process on 2 * size * B rows;
    # summed instead of averaged over the passes is twice the learning rate.
    ref = reference_fit(dense_model, keras.optimizers.SGD(0.05 if average else 0.1), x, y,
                        batch_size=2 * B * SIZE)
    assert_close(weights(m), weights(ref))
    assert_identical_across_ranks(weights(m))
    assert int(opt.iterations.numpy()) == steps  # Horovod counts every backward pass


def test_backward_passes_between_boundaries_changes_nothing():
    x, y, xl, yl = dataset(steps=1)
    m = dense_model()
    before = weights(m)
    fit(m, hvd.DistributedOptimizer(keras.optimizers.SGD(0.05), backward_passes_per_step=2),
        xl, yl)
    assert_close(weights(m), before, rtol=0, atol=0)


def test_gradient_predivide_factor_same_average():
    x, y, xl, yl = dataset(steps=3)
    m = dense_model()
    fit(m, hvd.DistributedOptimizer(keras.optimizers.SGD(0.05), gradient_predivide_factor=4.0),
        xl, yl)
    ref = reference_fit(dense_model, keras.optimizers.SGD(0.05), x, y, batch_size=B * SIZE)
    assert_close(weights(m), weights(ref))
    assert_identical_across_ranks(weights(m))


def test_op_sum_is_size_times_average():
    x, y, xl, yl = dataset(steps=3)
    m = dense_model()
    fit(m, hvd.DistributedOptimizer(keras.optimizers.SGD(0.05), op=hvd.Sum), xl, yl)
    ref = reference_fit(dense_model, keras.optimizers.SGD(0.05 * SIZE), x, y,
                        batch_size=B * SIZE)
    assert_close(weights(m), weights(ref))


def test_compression_fp16():
    x, y, xl, yl = dataset(steps=3)
    m = dense_model()
    fit(m, hvd.DistributedOptimizer(keras.optimizers.SGD(0.05),
                                    compression=hvd.Compression.fp16), xl, yl)
    ref = reference_fit(dense_model, keras.optimizers.SGD(0.05), x, y, batch_size=B * SIZE)
    assert_close(weights(m), weights(ref), rtol=2e-3, atol=2e-3)
    assert_identical_across_ranks(weights(m))


@pytest.mark.parametrize("groups", ["int", "lists"])
def test_groups(groups):
    x, y, xl, yl = dataset(steps=3)
    m = dense_model()
    g = 2 if groups == "int" else [m.layers[0].trainable_weights, [m.layers[2].kernel]]
    fit(m, hvd.DistributedOptimizer(keras.optimizers.SGD(0.05), groups=g), xl, yl)
    ref = reference_fit(dense_model, keras.optimizers.SGD(0.05), x, y, batch_size=B * SIZE)
    assert_close(weights(m), weights(ref))
    assert_identical_across_ranks(weights(m))


def embedding_model():
    m = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(12, 4),
                          keras.layers.Flatten(), keras.layers.Dense(1)])
    rng = np.random.default_rng(5)
    m.set_weights([rng.normal(scale=0.5, size=w.shape).astype(w.dtype) for w in m.get_weights()])
    return m


def embedding_data(steps):
    n, r = SIZE, RANK
    rng = np.random.default_rng(21)
    x = rng.integers(0, 12, size=(steps * n * B, 3)).astype("int32")
    y = rng.normal(size=(steps * n * B, 1)).astype("float32")
    idx = np.concatenate([np.arange(k * n * B + r * B, k * n * B + (r + 1) * B)
                          for k in range(steps)])
    return x, y, x[idx], y[idx]


@pytest.mark.parametrize("sparse_as_dense", [False, True], ids=["allgathered", "dense"])
def test_sparse_gradients(sparse_as_dense):
    x, y, xl, yl = embedding_data(steps=3)
    m = embedding_model()
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(m(xl[:B]))
    assert isinstance(tape.gradient(loss, m.layers[0].trainable_weights[0]), tf.IndexedSlices)
    fit(m, hvd.DistributedOptimizer(keras.optimizers.SGD(0.05), sparse_as_dense=sparse_as_dense),
        xl, yl)
    ref = reference_fit(embedding_model, keras.optimizers.SGD(0.05), x, y, batch_size=B * SIZE)
    assert_close(weights(m), weights(ref))
    assert_identical_across_ranks(weights(m))


def test_sparse_with_backward_passes_needs_sparse_as_dense():
    x, y, xl, yl = embedding_data(steps=2)
    m = embedding_model()
    with pytest.raises(ValueError, match="IndexedSlices are not supported"):
        fit(m, hvd.DistributedOptimizer(keras.optimizers.SGD(0.05), backward_passes_per_step=2),
            xl, yl)
    m = embedding_model()
    fit(m, hvd.DistributedOptimizer(keras.optimizers.SGD(0.05), backward_passes_per_step=2,
                                    sparse_as_dense=True, average_aggregated_gradients=True),
        xl, yl)
    ref = reference_fit(embedding_model, keras.optimizers.SGD(0.05), x, y, batch_size=2 * B * SIZE)
    assert_close(weights(m), weights(ref))


def test_partial_distributed_optimizer_keeps_local_layer():
    x, y, xl, yl = dataset(steps=3)
    m = dense_model()
    local = m.layers[2]
    fit(m, hvd.PartialDistributedOptimizer(keras.optimizers.SGD(0.05), local_layers=local),
        xl, yl)
    shared = [np.asarray(w) for layer in m.layers[:2] for w in layer.get_weights()]
    assert_identical_across_ranks(shared)
    assert differ_across_ranks([np.asarray(w) for w in local.get_weights()])


def test_register_local_var_scales_local_gradient():
    # One step, SGD(1): a local variable moves by its own gradient / size
    # (scale_local_gradients), the others by the average.
    v_shared = tf.Variable([1.0, 2.0]) if LEGACY else keras.Variable([1.0, 2.0], name="shared")
    v_local = tf.Variable([3.0]) if LEGACY else keras.Variable([3.0], name="local")
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0))
    opt.register_local_var(v_local)
    g = float(RANK + 1)
    step(opt, lambda: g * tf.reduce_sum(v_shared) + g * tf.reduce_sum(v_local), [v_shared, v_local])
    mean = (SIZE + 1) / 2.0
    np.testing.assert_allclose(np.asarray(v_shared.numpy()), [1.0 - mean, 2.0 - mean], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(v_local.numpy()), [3.0 - g / SIZE], rtol=1e-6)


def step(opt, loss_fn, variables):
    """One optimizer step through the hook its Keras generation uses: Keras 3
    applies gradients (apply); tf_keras reduces them where it computes them
    (minimize)."""
    if LEGACY:
        opt.minimize(loss_fn, variables)
    else:
        with tf.GradientTape() as tape:
            loss = loss_fn()
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))


# --------------------------------------------------------------------------
# Errors (the same builtin classes as Horovod)
# --------------------------------------------------------------------------

def test_errors():
    sgd = keras.optimizers.SGD(0.1)
    with pytest.raises(ValueError, match="op currently only supports Average and Sum"):
        hvd.DistributedOptimizer(sgd, op=hvd.Adasum)
    with pytest.raises(ValueError, match="groups should be"):
        hvd.DistributedOptimizer(sgd, groups=0)
    with pytest.raises(ValueError, match="backward_passes_per_step must be > 0"):
        hvd.DistributedOptimizer(sgd, backward_passes_per_step=0)
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        hvd.DistributedOptimizer(sgd, gradient_predivide_factor=0.0)
    with pytest.raises(ValueError, match="is not registered"):
        hvd.DistributedOptimizer(sgd, process_set=hvd.ProcessSet([0]))
    with pytest.raises(TypeError, match="optimizer instance"):
        hvd.DistributedOptimizer(keras.optimizers.SGD)
    with pytest.raises(TypeError, match="Keras optimizer"):
        hvd.DistributedOptimizer(object())
    with pytest.raises(ValueError, match="already a DistributedOptimizer"):
        hvd.DistributedOptimizer(hvd.DistributedOptimizer(sgd))
    with pytest.raises(ValueError, match="local layers"):
        hvd.PartialDistributedOptimizer(sgd, local_layers=[object()])
