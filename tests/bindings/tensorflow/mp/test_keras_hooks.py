"""The hooks of Horovod's Keras DistributedOptimizer wrapper
(horovod._keras.create_distributed_optimizer) that custom training loops
call, on Keras 3 and on tf_keras (TF_USE_LEGACY_KERAS=1, its own ctest
entry): _compute_gradients / compute_gradients (with and without a tape),
minimize, get_gradients, _aggregate_gradients, _allreduce, variables(),
_agg_helper, with backward_passes_per_step and local variables, as Horovod
0.28.1's test_tensorflow2_keras.py uses them.

Run: plaitrun -np 2 <tf venv python> -m pytest -x tests/bindings/tensorflow/mp/test_keras_hooks.py
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow import keras

import plait.tensorflow.keras as hvd
from keras_helpers import (B, LEGACY, assert_close, assert_identical_across_ranks, dataset,
                           dense_model, init, reference_fit, weights)

RANK, SIZE = init()
MEAN = (SIZE + 1) / 2.0  # the average of rank + 1 over the ranks


def var(value, name):
    """A variable the optimizer of the Keras in use updates."""
    return tf.Variable(value, name=name) if LEGACY else keras.Variable(value, name=name)


def value(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


# --------------------------------------------------------------------------
# _compute_gradients + apply_gradients in a tf.function, backward passes
# (Horovod's test_gradient_aggregation)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("average", [True, False], ids=["averaged", "summed"])
def test_compute_gradients_in_tf_function_with_backward_passes(average):
    passes = 4
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), backward_passes_per_step=passes,
                                   average_aggregated_gradients=average, sparse_as_dense=True)
    x = var([0.0], "hooks_x")
    y = var([1.0, 2.0], "hooks_y")

    def loss():
        # d/dx = rank + 1 (averaged: MEAN); d/dy = [-1, 0] through a gather
        # (IndexedSlices, made dense by sparse_as_dense).
        return float(RANK + 1) * tf.reduce_sum(x) - tf.reduce_sum(tf.gather(y, [0]))

    @tf.function
    def train_step():
        grads_and_vars = opt._compute_gradients(loss, var_list=[x, y])
        opt.apply_gradients(grads_and_vars, experimental_aggregate_gradients=False)

    for i in range(10):
        train_step()
        steps = (i + 1) // passes
        per_step = 1.0 if average else float(passes)
        np.testing.assert_allclose(value(x), [-steps * per_step * MEAN], rtol=1e-6)
        np.testing.assert_allclose(value(y), [1.0 + steps * per_step, 2.0], rtol=1e-6)
        assert int(opt.iterations.numpy()) == i + 1
        assert int(opt._agg_helper.counter.numpy()) == (i + 1) % passes


def test_compute_gradients_with_inf_gradient_then_finite():
    # Horovod's test_grad_aggregation_with_inf_grad: an infinite gradient in
    # the first aggregation cycle is gone after it (the accumulators restart at 0).
    passes = 2
    count = tf.Variable(0, trainable=False, dtype=tf.int32)
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(), backward_passes_per_step=passes,
                                   sparse_as_dense=True)
    x = var(0.0, "hooks_inf_x")

    def loss():
        count.assign_add(1)
        return tf.cond(count > 1, lambda: tf.identity(x), lambda: x * float("inf"))

    for _ in range(2 * passes):
        grads_and_vars = opt._compute_gradients(loss=loss, var_list=[x])
        opt.apply_gradients(grads_and_vars)
    assert bool(tf.math.is_finite(grads_and_vars[0][0]))


# --------------------------------------------------------------------------
# A recorded tape, local layers (Horovod's test_partial_distributed_optimizer)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("num_local_layers", [0, 1, 2])
def test_compute_gradients_of_a_recorded_tape_with_local_layers(num_local_layers):
    m = dense_model()
    # Each rank's weights differ, so averaged gradients differ from local ones.
    m.set_weights([w + RANK for w in m.get_weights()])
    x, yv, _, _ = dataset(steps=1)
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_mean((m(x) - yv) ** 2)
    local_grads = tape.gradient(loss, m.trainable_weights)
    local_layers = m.layers[:num_local_layers]
    opt = hvd.PartialDistributedOptimizer(keras.optimizers.Adam(), sparse_as_dense=True,
                                          local_layers=local_layers)
    got = opt._compute_gradients(loss, m.trainable_weights, tape=tape)
    local_ids = {id(v) for layer in local_layers for v in layer.trainable_weights}
    for (g, v), mine in zip(got, local_grads):
        assert v is not None
        if id(v) in local_ids:
            np.testing.assert_allclose(value(g) * SIZE, value(mine), rtol=1e-5)
        else:
            mean = hvd.allreduce(value(mine), op=hvd.Average, name="hooks.mean." + v.name)
            np.testing.assert_allclose(value(g), value(mean), rtol=1e-5, atol=1e-7)
            assert_identical_across_ranks([value(g)])


# --------------------------------------------------------------------------
# minimize, compute_gradients, get_gradients: reduced once, whatever the op
# --------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Average", "Sum"])
def test_minimize_reduces_once(op):
    v = var([1.0], "hooks_min")
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), op=getattr(hvd, op))
    opt.minimize(lambda: float(RANK + 1) * tf.reduce_sum(v), [v])
    total = MEAN * (1 if op == "Average" else SIZE)
    np.testing.assert_allclose(value(v), [1.0 - total], rtol=1e-6)


@pytest.mark.parametrize("op", ["Average", "Sum"])
def test_compute_gradients_then_apply_gradients_reduces_once(op):
    v = var([1.0], "hooks_cg")
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), op=getattr(hvd, op))
    with tf.GradientTape() as tape:
        loss = float(RANK + 1) * tf.reduce_sum(v)
    grads_and_vars = opt.compute_gradients(loss, [v], tape=tape)
    total = MEAN * (1 if op == "Average" else SIZE)
    np.testing.assert_allclose(value(grads_and_vars[0][0]), [total], rtol=1e-6)
    opt.apply_gradients(grads_and_vars)
    np.testing.assert_allclose(value(v), [1.0 - total], rtol=1e-6)


def test_get_gradients_in_a_graph():
    base = keras.optimizers.legacy.SGD(1.0) if LEGACY else keras.optimizers.SGD(1.0)
    opt = hvd.DistributedOptimizer(base)
    v = var([1.0, 2.0], "hooks_gg")

    @tf.function
    def grads():
        return opt.get_gradients(float(RANK + 1) * tf.reduce_sum(v * v), [v])
    np.testing.assert_allclose(value(grads()[0]), [2.0 * MEAN, 4.0 * MEAN], rtol=1e-6)


# --------------------------------------------------------------------------
# The other attributes and hooks scripts use
# --------------------------------------------------------------------------

def test_wrapper_attributes():
    v = var([1.0], "hooks_attr")
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0))
    assert opt._agg_helper is None
    opt.minimize(lambda: tf.reduce_sum(v), [v])
    assert opt._aggregated_gradients is True
    assert list(opt.variables()) == list(opt.variables) and len(opt.variables) >= 1
    pairs = [(tf.constant([1.0]), v)]
    out = opt._aggregate_gradients(pairs)
    np.testing.assert_allclose(value(out[0][0] if isinstance(out[0], tuple) else out[0]), [1.0])
    reduced = opt._allreduce([tf.constant([float(RANK + 1)]), None], [v, v])
    np.testing.assert_allclose(value(reduced[0]), [MEAN], rtol=1e-6)
    assert reduced[1] is None
    opt.register_local_var(v)
    assert len(opt._local_vars) == 1
    assert hvd.DistributedOptimizer(keras.optimizers.SGD(1.0),
                                    backward_passes_per_step=2)._agg_helper is not None


def test_fit_with_legacy_optimizer():
    if not LEGACY:
        pytest.skip("Keras 3 has no legacy optimizers")
    x, y, xl, yl = dataset(steps=3)
    m = dense_model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.legacy.SGD(0.05)), loss="mse")
    m.fit(xl, yl, batch_size=B, epochs=1, shuffle=False, verbose=0)
    ref = reference_fit(dense_model, keras.optimizers.legacy.SGD(0.05), x, y,
                        batch_size=B * SIZE)
    assert_close(weights(m), weights(ref))
    assert_identical_across_ranks(weights(m))
