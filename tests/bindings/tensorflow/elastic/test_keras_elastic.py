"""plait.tensorflow.keras.elastic (and plait.keras.elastic) under plaitrun
-np 2, on Keras 3 and on tf_keras (TF_USE_LEGACY_KERAS=1): KerasState's
sync, commit and restore of a model and its optimizer, the callbacks that
commit every N batches and keep state.batch and state.epoch, and a fit that
fails once inside run and goes on from the last commit.

Run: plaitrun -np 2 <tf venv python> -m pytest -x tests/bindings/tensorflow/elastic
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow import keras

import plait.tensorflow as ptf
import plait.tensorflow.keras as hvd
from plait.common.exceptions import HorovodInternalError
from keras_helpers import B, LEGACY, dataset, dense_model, init
from elastic_helpers import (assert_differ_across_ranks, assert_same_on_every_rank,
                             assert_values, tensors_submitted, values)

RANK, SIZE = init()
el = hvd.elastic


def opt_vars(opt):
    v = opt.variables
    return list(v() if callable(v) else v)


def trained(seed, steps=2, lr=0.05):
    """A model and Adam optimizer after `steps` local steps on this rank's
    data: weights and optimizer slots differ across ranks."""
    _, _, xl, yl = dataset(steps=steps, seed=seed + RANK)
    m = dense_model(seed=seed + RANK)
    m.compile(optimizer=keras.optimizers.Adam(lr), loss="mse")
    m.fit(xl, yl, batch_size=B, shuffle=False, verbose=0)
    return m


class CountingState(el.KerasState):
    """A KerasState that remembers what each commit saved."""

    def __init__(self, *args, **kwargs):
        self.commits = []
        super().__init__(*args, **kwargs)

    def commit(self):
        self.commits.append((self.epoch, self.batch, values(self.model.variables)))
        super().commit()


def test_states_and_callbacks_are_made_without_collectives():
    m = dense_model()
    before = tensors_submitted()
    for _ in range(1 + RANK):                   # not the same number on every rank
        s = el.KerasState(m, keras.optimizers.SGD(0.1), epoch=0, batch=0)
        el.CommitStateCallback(s, batches_per_commit=2)
        el.UpdateBatchStateCallback(s)
        el.UpdateEpochStateCallback(s)
        ptf.elastic.TensorFlowKerasState(m, keras.optimizers.SGD(0.1))
    assert tensors_submitted() == before


def test_keras_state_sync_makes_every_rank_hold_rank0s_model_and_optimizer():
    m = trained(seed=30)
    state = el.KerasState(m, epoch=5 + RANK)
    assert len(opt_vars(m.optimizer)) > 1
    assert_differ_across_ranks(values(m.variables), "ks.model.before")
    assert_differ_across_ranks(values(opt_vars(m.optimizer))[1:], "ks.opt.before")
    state.sync()
    assert state.epoch == 5
    assert_same_on_every_rank(values(m.variables), "ks.model.after")
    assert_same_on_every_rank(values(opt_vars(m.optimizer)), "ks.opt.after")
    assert_values(m.variables, state._saved_model_state)


def test_keras_state_builds_the_optimizer_so_a_new_worker_syncs_its_slots():
    # Rank 0 has trained (Adam slots exist); the others have a fresh optimizer,
    # as a worker that joins: its slots are made by the state, then synced.
    m = trained(seed=40) if RANK == 0 else dense_model(seed=99)
    opt = m.optimizer if RANK == 0 else keras.optimizers.Adam(0.05)
    state = el.KerasState(m, opt)
    state.sync()
    assert_same_on_every_rank(values(m.variables), "new.model")
    assert_same_on_every_rank(values(opt_vars(opt)), "new.opt")


@pytest.mark.skipif(not LEGACY, reason="keras.optimizers.legacy is tf_keras's")
def test_keras_state_with_a_legacy_optimizer_of_tf_keras():
    m = dense_model(seed=80 + RANK)
    opt = keras.optimizers.legacy.Adam(0.05)
    assert opt_vars(opt) == []
    state = el.KerasState(m, opt)
    assert len(opt_vars(opt)) == 1 + 2 * len(m.trainable_variables)   # iterations, m, v
    state.sync()
    assert_same_on_every_rank(values(m.variables), "legacy.model")
    assert_same_on_every_rank(values(opt_vars(opt)), "legacy.opt")


def test_keras_state_commit_and_restore():
    _, _, xl, yl = dataset(steps=4, seed=50)
    m = dense_model()
    m.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    state = el.KerasState(m, epoch=0, batch=0)
    state.sync()
    m.fit(xl[:2 * B], yl[:2 * B], batch_size=B, shuffle=False, verbose=0)
    state.epoch = 1
    state.commit()
    model_at_commit, opt_at_commit = values(m.variables), values(opt_vars(m.optimizer))
    m.fit(xl[2 * B:], yl[2 * B:], batch_size=B, shuffle=False, verbose=0)
    state.epoch = 2
    assert not np.array_equal(values(m.variables)[0], model_at_commit[0])
    state.restore()
    assert state.epoch == 1
    assert_values(m.variables, model_at_commit)
    assert_values(opt_vars(m.optimizer), opt_at_commit)


def test_keras_state_bad_arguments():
    unbuilt = keras.Sequential([keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="Model must be built first"):
        el.KerasState(unbuilt, keras.optimizers.SGD(0.1))
    with pytest.raises(ValueError, match="no optimizer"):
        el.KerasState(dense_model())
    with pytest.raises(ValueError, match="batches_per_commit"):
        el.CommitStateCallback(el.KerasState(dense_model(), keras.optimizers.SGD(0.1)), 0)
    with pytest.raises(ValueError, match="elastic State"):
        el.CommitStateCallback(None)
    with pytest.raises(ValueError, match="no property 'epoch'"):
        el.UpdateEpochStateCallback(el.KerasState(dense_model(), keras.optimizers.SGD(0.1)))


class BatchRecorder(keras.callbacks.Callback):
    def __init__(self, state):
        super().__init__()
        self.state = state
        self.batches = []

    def on_batch_end(self, batch, logs=None):
        self.batches.append(self.state.batch)


def test_callbacks_commit_every_n_batches_and_keep_batch_and_epoch():
    _, _, xl, yl = dataset(steps=5, seed=60)
    m = dense_model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
    state = CountingState(m, epoch=3, batch=0)
    rec = BatchRecorder(state)
    m.fit(xl, yl, batch_size=B, epochs=2, shuffle=False, verbose=0,
          callbacks=[el.UpdateBatchStateCallback(state), el.UpdateEpochStateCallback(state),
                     el.CommitStateCallback(state, batches_per_commit=2), rec])
    assert rec.batches == [0, 1, 2, 3, 4] * 2
    # Every 2nd batch, counted across epochs (Horovod's), and at every epoch's
    # end (after UpdateEpochStateCallback, before it: the order of callbacks).
    assert [(e, b) for e, b, _ in state.commits] == [(3, 1), (3, 3), (4, 0),
                                                     (4, 0), (4, 2), (4, 4), (5, 0)]
    assert (state.epoch, state.batch) == (5, 0)
    final = values(m.variables)
    assert_values(m.variables, state.commits[-1][2])
    m.variables[0].assign(tf.zeros_like(m.variables[0]))
    state.restore()
    assert_values(m.variables, final)
    assert_same_on_every_rank(final, "callbacks.final")


def test_elastic_fit_fails_once_and_resumes_from_the_last_commit(elastic_job):
    epochs, steps = 3, 4
    x, y, xl, yl = dataset(steps=steps, seed=70)
    m = dense_model(seed=71 + RANK)            # synced from rank 0 by the first sync
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
    state = CountingState(m, epoch=0, batch=0)
    resets = []
    # reset() runs before the callbacks: the traced functions are gone by then.
    state.register_reset_callbacks([lambda: resets.append((hvd.size(), m.train_function))])
    calls = []

    class FailOnce(keras.callbacks.Callback):
        def on_batch_end(self, batch, logs=None):
            if len(calls) == 1 and state.epoch == 1 and batch == 2:
                raise HorovodInternalError("a rank was lost (raised by the test)")

    class StepsSeen(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            steps_seen.append(self.params.get("steps"))

    steps_seen = []

    @el.run
    def train(state):
        calls.append((state.epoch, state.batch, values(m.variables)))
        m.fit(xl, yl, batch_size=B, epochs=epochs - state.epoch, shuffle=False, verbose=0,
              callbacks=[el.UpdateBatchStateCallback(state), StepsSeen(),
                         el.UpdateEpochStateCallback(state),
                         el.CommitStateCallback(state, batches_per_commit=2), FailOnce()])
        return state.epoch

    assert train(state) == epochs
    assert len(calls) == 2 and resets == [(SIZE, None)]
    # The first epoch after the reset is told it has the batches not done yet
    # (Horovod's UpdateBatchStateCallback): 4 - 1; then 4 again.
    assert steps_seen == [steps, steps, steps - 1, steps]
    # The second call started from the commit after batch 1 of epoch 1.
    epoch, batch, weights = calls[1]
    assert (epoch, batch) == (1, 1)
    committed = [c for c in state.commits if c[:2] == (1, 1)][0][2]
    for got, want in zip(weights, committed):
        np.testing.assert_array_equal(got, want)
    assert_same_on_every_rank(values(m.variables), "fit.final")
    assert_same_on_every_rank(values(opt_vars(m.optimizer)), "fit.final.opt")


@pytest.mark.skipif(LEGACY, reason="plait.keras is `import keras`: Keras 3 models only")
def test_plait_keras_elastic_on_keras3():
    import keras as k3
    import plait.keras as hk
    m = k3.Sequential([k3.Input((3,)), k3.layers.Dense(2)])
    m.layers[0].kernel.assign(np.full((3, 2), float(RANK), np.float32))
    state = hk.elastic.KerasState(m, k3.optimizers.SGD(0.1), epoch=RANK)
    state.sync()
    assert state.epoch == 0
    np.testing.assert_array_equal(m.layers[0].kernel.numpy(), np.zeros((3, 2)))
    assert issubclass(hk.elastic.CommitStateCallback, k3.callbacks.Callback)
