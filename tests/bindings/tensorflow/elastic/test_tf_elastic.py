"""plait.tensorflow.elastic under plaitrun -np 2: TensorFlowState (eager),
run's restore after a failed collective and its reset (shutdown and init of
the same ranks), errors of plait's operations arriving as TensorFlow errors,
and the bad arguments.

Run: plaitrun -np 2 <tf venv python> -m pytest -x tests/bindings/tensorflow/elastic
"""

import numpy as np
import pytest
import tensorflow as tf

import plait.tensorflow as hvd
from plait.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from elastic_helpers import (assert_differ_across_ranks, assert_same_on_every_rank,
                             assert_values, tensors_submitted, values)

hvd.init()                      # idempotent: the session fixture keeps the job
RANK, SIZE = hvd.rank(), hvd.size()


def rank_variables():
    """Two variables whose values differ on every rank."""
    return [tf.Variable(np.full((3,), RANK + 1.0, dtype=np.float32)),
            tf.Variable(np.arange(4, dtype=np.int64).reshape(2, 2) * (RANK + 1))]


def test_tensorflow_state_is_made_without_collectives():
    before = tensors_submitted()
    states = [hvd.elastic.TensorFlowState(rank_variables(), epoch=RANK) for _ in range(1 + RANK)]
    assert tensors_submitted() == before
    assert states[0].epoch == RANK


def test_tensorflow_state_sync_broadcasts_rank0():
    v = rank_variables()
    state = hvd.elastic.TensorFlowState(v, epoch=10 + RANK, note="from %d" % RANK)
    assert_differ_across_ranks(values(v), "tfstate.before")
    state.sync()
    assert_values(v, [np.full((3,), 1.0, np.float32), np.arange(4).reshape(2, 2)])
    assert (state.epoch, state.note) == (10, "from 0")
    assert_same_on_every_rank(values(v), "tfstate.after")


def test_tensorflow_state_commit_and_restore():
    v = rank_variables()
    state = hvd.elastic.TensorFlowState(v, epoch=0)
    v[0].assign([5.0, 6.0, 7.0])
    state.epoch = 3
    state.commit()                       # a collective: every rank commits
    committed = values(v)
    v[0].assign([-1.0, -1.0, -1.0])
    v[1].assign([[9, 9], [9, 9]])
    state.epoch = 4
    state.restore()
    assert_values(v, committed)
    assert state.epoch == 3


def test_tensorflow_state_without_variables_tracks_properties():
    state = hvd.elastic.TensorFlowState([], step=RANK)
    state.sync()
    assert state.step == 0


def test_tensorflow_state_bad_arguments():
    with pytest.raises(ValueError, match="session= is for TF1"):
        hvd.elastic.TensorFlowState(rank_variables(), session=object())
    with pytest.raises(ValueError, match="pass variables="):
        hvd.elastic.TensorFlowState()
    with pytest.raises(ValueError, match="must be tf.Variable"):
        hvd.elastic.TensorFlowState([tf.constant(1.0)])


def test_run_restores_the_last_commit_after_a_failed_collective(elastic_job):
    v = rank_variables()
    state = hvd.elastic.TensorFlowState(v, epoch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    seen = []

    @hvd.elastic.run
    def train(state, step):
        seen.append((state.epoch, values(v)))
        if len(seen) == 1:
            v[0].assign_add(tf.fill((3,), step))
            state.epoch = 1
            state.commit()
            v[0].assign_add(tf.fill((3,), 100.0))     # not committed: lost
            state.epoch = 2
            raise HorovodInternalError("a rank was lost (raised by the test)")
        # A collective after the reset: the job was formed again.
        total = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, name="elastic_test.after_reset")
        return float(total.numpy()[0])

    assert train(state, 0.5) == SIZE
    assert len(seen) == 2 and resets == [SIZE]
    # The first call saw rank 0's variables (sync before it runs).
    np.testing.assert_array_equal(seen[0][1][0], np.full((3,), 1.0))
    # The second call saw the commit: rank 0's + 0.5, without the +100.
    assert seen[1][0] == 1
    np.testing.assert_array_equal(seen[1][1][0], np.full((3,), 1.5))
    assert hvd.is_initialized()
    assert_same_on_every_rank(values(v), "run.restore")


def test_run_turns_plait_errors_of_tensorflow_ops_into_horovod_internal_error(elastic_job):
    v = [tf.Variable([float(RANK)])]
    state = hvd.elastic.TensorFlowState(v)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        if len(calls) == 1:
            v[0].assign([42.0])
            # What a collective inside a tf.function (Keras's fit) raises.
            raise tf.errors.UnknownError(None, None, "plait: PLAIT_ERR_PEER_LOST: rank 1 was "
                                         "lost (raised by the test)")
        return v[0].numpy()[0]

    assert train(state) == 0.0
    assert len(calls) == 2


def test_run_recovers_from_a_real_collective_failure_inside_a_tf_function(elastic_job):
    # Shapes that differ across ranks: plait refuses the allreduce on every
    # rank (a mismatch); from a tf.function it is a TensorFlow error, which
    # run turns into plait's MismatchError (a HorovodInternalError).
    v = [tf.Variable([float(RANK)])]
    state = hvd.elastic.TensorFlowState(v)
    errors = []

    @tf.function
    def mismatched():
        return hvd.allreduce(tf.zeros([RANK + 1]), name="elastic_test.mismatch")

    @hvd.elastic.run
    def train(state):
        if not errors:
            v[0].assign([5.0])
            try:
                mismatched()
            except Exception as e:          # noqa: BLE001 - recorded, then raised again
                errors.append(e)
                raise
        return v[0].numpy()[0]

    assert train(state) == 0.0               # rank 0's value at the first sync
    assert len(errors) == 1
    assert isinstance(errors[0], tf.errors.FailedPreconditionError)
    assert not isinstance(errors[0], HorovodInternalError)


def test_run_on_fixed_ranks_raises_a_failed_collective():
    # Not elastic (plaitrun -np 2): no rank can come back; the error goes to
    # the caller and the values stay as they were when it happened.
    v = [tf.Variable([1.0])]
    state = hvd.elastic.TensorFlowState(v)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        v[0].assign([2.0])
        raise HorovodInternalError("a rank was lost (raised by the test)")

    with pytest.raises(HorovodInternalError, match="raised by the test"):
        train(state)
    assert calls == [1]
    assert v[0].numpy()[0] == 2.0


def test_run_leaves_other_errors_alone():
    state = hvd.elastic.TensorFlowState([tf.Variable([1.0])])

    @hvd.elastic.run
    def train(state):
        raise tf.errors.UnknownError(None, None, "not a collective's error")

    with pytest.raises(tf.errors.UnknownError, match="not a collective"):
        train(state)

    @hvd.elastic.run
    def bad(state):
        raise KeyError("user's bug")

    with pytest.raises(KeyError):
        bad(state)


def test_run_after_hosts_updated_keeps_uncommitted_values():
    v = [tf.Variable([float(RANK)])]
    state = hvd.elastic.TensorFlowState(v)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(values(v)[0][0])
        if len(calls) == 1:
            v[0].assign([7.0 + RANK])          # uncommitted; kept, then rank 0's synced
            raise HostsUpdatedInterrupt(False)
        return True

    assert train(state)
    assert calls == [0.0, 7.0]


def traced_op_types(fn, *specs):
    return {op.type for op in fn.get_concrete_function(*specs).graph.get_operations()}


@pytest.mark.parametrize("variable", ["PLAIT_ELASTIC_DRIVER", "HOROVOD_ELASTIC"])
def test_elastic_mode_reads_the_size_when_a_traced_step_runs(monkeypatch, variable):
    # A step traced at one size runs on after the job changed size: in
    # elastic mode (plaitrun's elastic driver sets PLAIT_ELASTIC_DRIVER; or
    # Horovod's HOROVOD_ELASTIC=1) Average of sparse gradients divides by
    # the size read when it runs, as Horovod under HOROVOD_ELASTIC.
    def step(x):
        sparse = tf.IndexedSlices(x, tf.constant([RANK]), tf.constant([SIZE, 2]))
        return tf.convert_to_tensor(hvd.allreduce(sparse, op=hvd.Average,
                                                  name="elastic_test.sparse"))

    spec = tf.TensorSpec([1, 2], tf.float32)
    assert "PlaitQuery" not in traced_op_types(tf.function(step), spec)
    monkeypatch.setenv(variable, "127.0.0.1:1" if variable == "PLAIT_ELASTIC_DRIVER" else "1")
    f = tf.function(step)
    assert "PlaitQuery" in traced_op_types(f, spec)
    got = f(tf.constant([[RANK + 1.0, 2.0]])).numpy()
    np.testing.assert_allclose(got, [[(r + 1.0) / SIZE, 2.0 / SIZE] for r in range(SIZE)])
