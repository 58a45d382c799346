"""plait.tensorflow.keras callbacks, load_model, value-level operations,
elastic names and plait.keras under plaitrun (2 and 3 ranks), on Keras 3
and on tf_keras (TF_USE_LEGACY_KERAS=1).

Run: plaitrun -np 2 <tf venv python> -m pytest -x tests/bindings/tensorflow/mp/test_keras_callbacks.py
"""

import inspect
import os
import shutil
import tempfile

import numpy as np
import pytest
import tensorflow as tf
from tensorflow import keras

import plait.tensorflow.keras as hvd
from keras_helpers import (B, LEGACY, assert_close, assert_identical_across_ranks, dataset,
                           dense_model, init, weights)

RANK, SIZE = init()
cbs = hvd.callbacks


@pytest.fixture
def tmpdir_rank():
    d = tempfile.mkdtemp(prefix="plait-keras-%d-" % RANK)
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Recorder(keras.callbacks.Callback):
    """Copies what it sees: epoch logs, and the learning rate at each batch."""

    def __init__(self):
        super().__init__()
        self.epoch_logs = []
        self.batch_lr = []

    def on_batch_begin(self, batch, logs=None):
        lr = self.model.optimizer.learning_rate
        self.batch_lr.append(float(np.asarray(lr.numpy() if hasattr(lr, "numpy") else lr)))

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_logs.append(dict(logs or {}))


def lr_of(opt):
    lr = opt.learning_rate
    return float(np.asarray(lr.numpy() if hasattr(lr, "numpy") else lr))


# --------------------------------------------------------------------------
# BroadcastGlobalVariablesCallback
# --------------------------------------------------------------------------

def test_broadcast_makes_every_rank_start_from_root():
    x, y, xl, yl = dataset(steps=3)
    m = dense_model(seed=100 + RANK)          # different weights on every rank
    root_initial = weights(dense_model(seed=100))
    # Rank 0's learning rate is 0: once its variables are everywhere, nothing
    # moves any more. Keras 3 counts the learning rate among the optimizer's
    # variables, so it is broadcast too; tf_keras does not (nor does Horovod
    # broadcast it there): there every rank has 0.
    lr = 0.0 if RANK == 0 or LEGACY else 0.5
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(lr))
    m.compile(optimizer=opt, loss="mse")
    m.fit(xl, yl, batch_size=B, shuffle=False, verbose=0,
          callbacks=[cbs.BroadcastGlobalVariablesCallback(0)])
    assert_close(weights(m), root_initial, rtol=0, atol=0)
    assert lr_of(opt) == 0.0
    assert int(opt.iterations.numpy()) == 3


def test_broadcast_from_another_root_and_local_variables():
    x, y, xl, yl = dataset(steps=2)
    m = dense_model(seed=200 + RANK)
    local = m.layers[2].kernel
    own_local = np.asarray(local.numpy())
    root = SIZE - 1
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.0)), loss="mse")
    m.fit(xl, yl, batch_size=B, shuffle=False, verbose=0,
          callbacks=[cbs.BroadcastGlobalVariablesCallback(root, local_variables=[local])])
    want = weights(dense_model(seed=200 + root))
    got = weights(m)
    for i, w in enumerate(m.weights):
        if w is local:
            np.testing.assert_array_equal(got[i], own_local)
        else:
            np.testing.assert_array_equal(got[i], want[i])


def test_broadcast_callback_rejects_non_variables():
    with pytest.raises(ValueError, match="local variables must be of tf.Variable type"):
        cbs.BroadcastGlobalVariablesCallback(0, local_variables=[np.zeros(2)])


# --------------------------------------------------------------------------
# MetricAverageCallback
# --------------------------------------------------------------------------

def test_metric_average_callback():
    x, y, xl, yl = dataset(steps=2)
    before, after = Recorder(), Recorder()
    m = dense_model()
    m.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse", metrics=["mae"])  # per-rank losses
    h = m.fit(xl, yl, batch_size=B, epochs=2, shuffle=False, verbose=0,
              callbacks=[before, cbs.MetricAverageCallback(), after])
    for epoch in range(2):
        mine = np.array([[before.epoch_logs[epoch]["loss"], before.epoch_logs[epoch]["mae"]]],
                        dtype=np.float32)
        everyone = hvd.allgather(mine).numpy()
        assert not np.allclose(everyone[0], everyone[-1])  # the ranks saw different data
        np.testing.assert_allclose(after.epoch_logs[epoch]["loss"], everyone[:, 0].mean(),
                                   rtol=1e-6)
        np.testing.assert_allclose(after.epoch_logs[epoch]["mae"], everyone[:, 1].mean(),
                                   rtol=1e-6)
        np.testing.assert_allclose(h.history["loss"][epoch], everyone[:, 0].mean(), rtol=1e-6)


# --------------------------------------------------------------------------
# LearningRateScheduleCallback and LearningRateWarmupCallback
# --------------------------------------------------------------------------

def test_lr_schedule_staircase():
    x, y, xl, yl = dataset(steps=2)
    m = dense_model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.2)), loss="mse")
    rec = Recorder()
    h = m.fit(xl, yl, batch_size=B, epochs=4, shuffle=False, verbose=0,
              callbacks=[cbs.LearningRateScheduleCallback(initial_lr=0.1, multiplier=0.5,
                                                          start_epoch=1, end_epoch=3,
                                                          momentum_correction=False), rec])
    np.testing.assert_allclose(h.history["lr"], [0.2, 0.1, 0.05, 0.05], rtol=1e-6)
    np.testing.assert_allclose(rec.batch_lr, [0.2, 0.2, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05],
                               rtol=1e-6)


def test_lr_schedule_smooth_with_function():
    x, y, xl, yl = dataset(steps=4)
    m = dense_model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.2)), loss="mse")
    rec = Recorder()
    m.fit(xl, yl, batch_size=B, epochs=2, shuffle=False, verbose=0,
          callbacks=[cbs.LearningRateScheduleCallback(initial_lr=0.1,
                                                      multiplier=lambda e: 1.0 / (1.0 + e),
                                                      staircase=False,
                                                      momentum_correction=False), rec])
    want = [0.1 / (1.0 + e + b / 4.0) for e in range(2) for b in range(4)]
    np.testing.assert_allclose(rec.batch_lr, want, rtol=1e-6)


def test_lr_warmup():
    x, y, xl, yl = dataset(steps=2)
    m = dense_model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.4)), loss="mse")
    rec = Recorder()
    m.fit(xl, yl, batch_size=B, epochs=3, shuffle=False, verbose=0,
          callbacks=[cbs.LearningRateWarmupCallback(initial_lr=0.4, warmup_epochs=2,
                                                    momentum_correction=False), rec])
    steps = 2

    def warm(e):
        e += 1.0 / steps
        return 0.4 / SIZE * (e * (SIZE - 1) / 2 + 1)
    want = [warm(e + b / steps) for e in range(2) for b in range(steps)]
    want += [want[-1]] * steps                      # after the warmup: unchanged
    np.testing.assert_allclose(rec.batch_lr, want, rtol=1e-6)
    # Horovod's shift by one batch: the warmup ends exactly on initial_lr.
    assert want[-1] == pytest.approx(0.4, rel=1e-9)


def test_momentum_correction_scales_this_step_momentum():
    """Horovod's correction multiplies the momentum of the step after a
    learning-rate change by new_lr / old_lr. Checked against that update
    computed by hand (SGD with momentum: v = m v - lr g; w += v)."""
    x, y, xl, yl = dataset(steps=1)
    m = dense_model()
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    m.compile(optimizer=opt, loss="mse")
    m.fit(xl, yl, batch_size=B, shuffle=False, verbose=0)   # builds the momentum buffers
    w_before = weights(m)
    # The velocity after one step from zero is -lr * g0; keep it to predict the next step.
    loss_fn = keras.losses.MeanSquaredError()
    with tf.GradientTape() as tape:
        loss = loss_fn(yl[:B], m(xl[:B]))
    g = [np.asarray(t) for t in tape.gradient(loss, m.trainable_variables)]
    cb = cbs.LearningRateScheduleCallback(initial_lr=0.1, multiplier=0.5, staircase=True)
    cb.set_model(m)
    cb.on_train_begin()
    cb.on_epoch_begin(1)
    velocity_ratio = 0.5   # new_lr / old_lr
    if LEGACY and not hasattr(opt, "momentums"):
        pytest.skip("tf_keras optimizer without momentum buffers")
    bufs = [np.asarray(b.numpy()) for b in opt.momentums]
    cb.on_batch_begin(0)                                        # lr 0.1 -> 0.05
    assert lr_of(opt) == pytest.approx(0.05)
    # Apply the step by hand through the optimizer and compare with the formula.
    opt.apply_gradients(zip([tf.constant(t) for t in g], m.trainable_variables))
    cb.on_batch_end(0)
    for w0, b, gi, w1 in zip(w_before, bufs, g, weights(m)):
        v = 0.9 * velocity_ratio * b - 0.05 * gi
        np.testing.assert_allclose(w1, w0 + v, rtol=1e-5, atol=1e-6)


def test_lr_schedule_needs_initial_lr():
    with pytest.raises(ValueError, match="initial_lr"):
        cbs.LearningRateScheduleCallback(initial_lr=None, multiplier=0.5)


# --------------------------------------------------------------------------
# BestModelCheckpoint
# --------------------------------------------------------------------------

def test_best_model_checkpoint(tmpdir_rank):
    x, y, xl, yl = dataset(steps=2)
    m = dense_model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
    ckpt = cbs.BestModelCheckpoint(monitor="loss")
    assert ckpt.save_best_only
    with pytest.raises(ValueError, match="filepath"):
        m.fit(xl, yl, batch_size=B, verbose=0, callbacks=[ckpt])
    ckpt.filepath = os.path.join(tmpdir_rank, "best.keras")
    m.fit(xl, yl, batch_size=B, epochs=2, shuffle=False, verbose=0, callbacks=[ckpt])
    assert os.path.exists(ckpt.filepath)


# --------------------------------------------------------------------------
# load_model
# --------------------------------------------------------------------------

def test_load_model_wraps_optimizer_and_keeps_its_state(tmpdir_rank):
    x, y, xl, yl = dataset(steps=4, seed=31)
    first = dataset(steps=2, seed=31)
    m = dense_model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)),
              loss="mse")
    m.fit(first[2], first[3], batch_size=B, shuffle=False, verbose=0)
    path = os.path.join(tmpdir_rank, "model.keras")
    m.save(path)
    loaded = hvd.load_model(path)
    opt = loaded.optimizer
    assert type(opt).__name__ == "SGD" and hasattr(opt, "_plait")
    assert int(opt.iterations.numpy()) == 2
    assert_close(weights(loaded), weights(m), rtol=0, atol=0)
    # Go on training on new data: as one process continuing from the same file.
    second = dataset(steps=2, seed=32)
    loaded.fit(second[2], second[3], batch_size=B, shuffle=False, verbose=0)
    ref = keras.models.load_model(path)
    assert not hasattr(ref.optimizer, "_plait")
    ref.fit(second[0], second[1], batch_size=B * SIZE, shuffle=False, verbose=0)
    assert_close(weights(loaded), weights(ref))
    assert_identical_across_ranks(weights(loaded))


def test_load_model_custom_optimizer(tmpdir_rank):
    base = keras.optimizers.SGD

    class MySGD(base):
        pass
    m = dense_model()
    m.compile(optimizer=MySGD(0.05), loss="mse")
    x, y, xl, yl = dataset(steps=1)
    m.fit(xl, yl, batch_size=B, verbose=0)
    path = os.path.join(tmpdir_rank, "custom.keras")
    m.save(path)
    loaded = hvd.load_model(path, custom_optimizers=[MySGD])
    assert type(loaded.optimizer).__name__ == "MySGD" and hasattr(loaded.optimizer, "_plait")


# --------------------------------------------------------------------------
# Value-level operations, broadcast_global_variables, elastic, plait.keras
# --------------------------------------------------------------------------

def test_value_level_operations():
    r = float(RANK)
    np.testing.assert_allclose(np.asarray(hvd.allreduce([r, 2 * r])), [(SIZE - 1) / 2.0,
                                                                         SIZE - 1.0])
    np.testing.assert_allclose(np.asarray(hvd.allreduce([r], op=hvd.Sum)),
                               [SIZE * (SIZE - 1) / 2.0])
    np.testing.assert_array_equal(np.asarray(hvd.allgather([[RANK]])),
                                  [[i] for i in range(SIZE)])
    np.testing.assert_array_equal(np.asarray(hvd.broadcast([RANK + 10], root_rank=SIZE - 1)),
                                  [SIZE - 1 + 10])
    rows = np.arange(SIZE * 2, dtype=np.float32).reshape(SIZE * 2, 1) * (RANK + 1)
    got = np.asarray(hvd.reducescatter(rows, op=hvd.Sum))
    total = np.arange(SIZE * 2, dtype=np.float32).reshape(SIZE * 2, 1) * (SIZE * (SIZE + 1) / 2)
    np.testing.assert_allclose(got, total[2 * RANK:2 * RANK + 2])


def test_broadcast_global_variables_refused_eagerly():
    with pytest.raises(RuntimeError, match="does not support eager execution"):
        hvd.broadcast_global_variables(0)


def test_elastic_names():
    # What they do: tests/bindings/tensorflow/elastic.
    from plait.tensorflow.keras import elastic
    for name in ("KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
                 "UpdateEpochStateCallback", "TensorFlowKerasState", "run"):
        assert hasattr(elastic, name)
    assert issubclass(elastic.CommitStateCallback, keras.callbacks.Callback)
    assert issubclass(elastic.KerasState, elastic.TensorFlowKerasState)


def test_horovod_signatures():
    params = list(inspect.signature(hvd.DistributedOptimizer).parameters)
    assert params == ["optimizer", "name", "device_dense", "device_sparse", "compression",
                      "sparse_as_dense", "gradient_predivide_factor", "op",
                      "backward_passes_per_step", "average_aggregated_gradients", "num_groups",
                      "groups", "process_set", "scale_local_gradients"]
    assert list(inspect.signature(hvd.load_model).parameters) == [
        "filepath", "custom_optimizers", "custom_objects", "compression", "legacy_opts"]
    for name in ("init", "shutdown", "size", "rank", "local_rank", "Average", "Sum",
                 "Compression", "broadcast_global_variables", "allreduce", "allgather",
                 "broadcast", "reducescatter", "load_model", "callbacks", "elastic",
                 "PartialDistributedOptimizer", "global_process_set"):
        assert hasattr(hvd, name), name
    import plait.keras as hk
    assert list(inspect.signature(hk.DistributedOptimizer).parameters)[:10] == [
        "optimizer", "name", "device_dense", "device_sparse", "compression", "sparse_as_dense",
        "gradient_predivide_factor", "op", "num_groups", "groups"]


def test_num_groups_is_deprecated_groups():
    with pytest.warns(DeprecationWarning, match="num_groups"):
        hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), num_groups=2)


def test_plait_keras_alias_on_keras3():
    import keras as k3
    import plait.keras as hk
    x, y, xl, yl = dataset(steps=3)

    def model():
        m = k3.Sequential([k3.Input((x.shape[1],)), k3.layers.Dense(3), k3.layers.Dense(1)])
        rng = np.random.default_rng(9)
        m.set_weights([rng.normal(size=w.shape).astype(w.dtype) for w in m.get_weights()])
        return m
    m = model()
    m.compile(optimizer=hk.DistributedOptimizer(k3.optimizers.SGD(0.02)), loss="mse")
    m.fit(xl, yl, batch_size=B, shuffle=False, verbose=0,
          callbacks=[hk.callbacks.BroadcastGlobalVariablesCallback(0),
                     hk.callbacks.MetricAverageCallback()])
    ref = model()
    ref.compile(optimizer=k3.optimizers.SGD(0.02), loss="mse")
    ref.fit(x, y, batch_size=B * SIZE, shuffle=False, verbose=0)
    assert_close(weights(m), weights(ref))
    assert_identical_across_ranks(weights(m))
