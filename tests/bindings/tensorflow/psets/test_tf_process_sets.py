"""plait.tensorflow's operations, gradients, DistributedGradientTape, Keras
DistributedOptimizer and broadcast_variables on process sets, eagerly and
in tf.function (through the op library), at 3 ranks: A = [0, 1], B = [1, 2]
(conftest.py), and a set added and removed while the job runs.

Run: HOROVOD_DYNAMIC_PROCESS_SETS=1 plaitrun -np 3 <tf venv python> -m pytest -x tests/bindings/tensorflow/psets
"""

import threading

import numpy as np
import pytest
import tensorflow as tf

MODES = pytest.mark.parametrize("mode", ["eager", "function"])


def run(mode, fn):
    return fn() if mode == "eager" else tf.function(fn)()


def mine(sets):
    return [(k, ps) for k, ps in sorted(sets.items()) if ps.included()]


def test_ids_ranks_and_queries(hvd, sets):
    r = hvd.rank()
    assert [sets["A"].process_set_id, sets["B"].process_set_id] == [1, 2]
    for key, ps in sets.items():
        assert ps.size() == 2
        assert int(hvd.size_op(process_set_id=ps.process_set_id)) == 2
        assert int(hvd.process_set_included_op(ps.process_set_id)) == int(r in ps.ranks)
        if r in ps.ranks:
            assert ps.rank() == ps.ranks.index(r)
    assert int(hvd.size_op()) == 3 and int(hvd.process_set_included_op(0)) == 1


@MODES
def test_every_operation_on_each_set(hvd, sets, mode):
    r = hvd.rank()
    for key, ps in mine(sets):
        k = ps.rank()

        def ops():
            x = tf.fill([2], float(r + 1))
            return dict(
                sum=hvd.allreduce(x, op=hvd.Sum, name="ps.sum." + key, process_set=ps),
                avg=hvd.allreduce(x, name="ps.avg." + key, process_set=ps),
                grouped=hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, name="ps.g." + key,
                                              process_set=ps),
                gather=hvd.allgather(tf.fill([k + 1, 2], float(r)), name="ps.ag." + key,
                                     process_set=ps),
                bcast=hvd.broadcast(x, root_rank=ps.ranks[-1], name="ps.bc." + key,
                                    process_set=ps),
                a2a=hvd.alltoall(tf.constant([[float(r)], [float(r)], [float(r)]]),
                                 splits=[1, 2] if k == 0 else [2, 1], name="ps.a2a." + key,
                                 process_set=ps),
                rs=hvd.reducescatter(tf.fill([2, 1], float(r + 1)), op=hvd.Sum,
                                     name="ps.rs." + key, process_set=ps))
        out = run(mode, ops)
        total = float(sum(q + 1 for q in ps.ranks))
        assert out["sum"].numpy().tolist() == [total] * 2
        assert out["avg"].numpy().tolist() == [total / 2] * 2
        assert [g.numpy().tolist() for g in out["grouped"]] == [[total] * 2, [2 * total] * 2]
        want = np.concatenate([np.full((i + 1, 2), float(q)) for i, q in enumerate(ps.ranks)])
        np.testing.assert_array_equal(out["gather"].numpy(), want)
        assert out["bcast"].numpy().tolist() == [float(ps.ranks[-1] + 1)] * 2
        got, rsplits = out["a2a"]
        first, second = ps.ranks
        want_rows = [first] * (1 if k == 0 else 2) + [second] * (2 if k == 0 else 1)
        assert got.numpy().reshape(-1).tolist() == [float(q) for q in want_rows]
        assert rsplits.numpy().tolist() == ([1, 2] if k == 0 else [2, 1])
        assert out["rs"].numpy().tolist() == [[total]]
        hvd.barrier(process_set=ps)


def test_same_names_on_two_sets_at_once(hvd, sets):
    """Rank 1 is in A and B: the same names in flight on both sets at once
    (one tf.function per set, run from two threads), each set matching its
    own. (One graph cannot hold two nodes of one name: TensorFlow would
    rename the second.)"""
    r = hvd.rank()
    results, errors = {}, []

    def run_set(key, ps):
        @tf.function
        def eight():
            return [hvd.allreduce(tf.fill([3], float((r + 1) * (i + 1))), op=hvd.Sum,
                                  name="same.%d" % i, process_set=ps) for i in range(8)]
        try:
            results[key] = [t.numpy() for t in eight()]
        except Exception as e:  # reported below, on the test's thread
            errors.append(e)
    threads = [threading.Thread(target=run_set, args=kp) for kp in mine(sets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for key, outs in results.items():
        ps = sets[key]
        for i, t in enumerate(outs):
            assert t.tolist() == [float(sum((q + 1) * (i + 1) for q in ps.ranks))] * 3


def test_outside_the_set_is_refused_by_name(hvd, sets):
    r = hvd.rank()
    for key, ps in sorted(sets.items()):
        if ps.included():
            continue
        with pytest.raises(ValueError, match="rank %d is not a member of process set %d"
                           % (r, ps.process_set_id)):
            hvd.allreduce(tf.ones([2]), name="outside." + key, process_set=ps)
        with pytest.raises(ValueError, match="not a member"):
            hvd.barrier(process_set=ps)
        # From a graph, TensorFlow's class only (as every error there).
        with pytest.raises(tf.errors.InvalidArgumentError, match="not a member"):
            tf.function(lambda: hvd.allgather(tf.ones([1]), process_set=ps))()
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(tf.ones([1]), name="unregistered", process_set=hvd.ProcessSet([0]))
    with pytest.raises(TypeError, match="must be a ProcessSet"):
        hvd.allreduce(tf.ones([1]), name="list", process_set=[0])


@MODES
def test_gradients_stay_in_the_set(hvd, sets, mode):
    r = hvd.rank()
    for key, ps in mine(sets):
        x = tf.Variable([1.0, 2.0])

        def grads():
            with tf.GradientTape() as tape:
                y = hvd.allreduce(x * float(r + 1), op=hvd.Sum, name="grad.ar." + key,
                                  process_set=ps)
                g = hvd.allgather(tf.reshape(x, [1, 2]) * float(r + 1), name="grad.ag." + key,
                                  process_set=ps)
                loss = tf.reduce_sum(y) + tf.reduce_sum(g * g)
            return tape.gradient(loss, x)
        got = run(mode, grads).numpy()
        # allreduce (Sum): the incoming ones summed over the set, times this
        # rank's factor; allgather: this rank's rows of the averaged gradient
        # 2 * g, times the factor.
        f = float(r + 1)
        want = ps.size() * f + 2 * f * f * np.array([1.0, 2.0])
        np.testing.assert_allclose(got, want, rtol=1e-6)


@MODES
def test_distributed_gradient_tape_on_a_set(hvd, sets, mode):
    """Gradients are averaged over B's ranks only; rank 0, outside B, keeps
    its own (Horovod: the allreduce is skipped there)."""
    ps, r = sets["B"], hvd.rank()
    x = tf.Variable([1.0, 1.0])

    def grads():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(x) * float(r + 1)
        return hvd.DistributedGradientTape(tape, process_set=ps).gradient(loss, [x])[0]
    got = run(mode, grads).numpy()
    want = np.mean([q + 1 for q in ps.ranks]) if ps.included() else float(r + 1)
    np.testing.assert_allclose(got, [want, want], rtol=1e-6)


def test_keras_distributed_optimizer_on_a_set(hvd, sets):
    import plait.tensorflow.keras as hk
    from keras_vars import make_var
    ps, r = sets["B"], hvd.rank()
    v = make_var([1.0], "ps_keras")
    opt = hk.DistributedOptimizer(tf.keras.optimizers.SGD(1.0), process_set=ps)
    with tf.GradientTape() as tape:
        loss = float(r + 1) * tf.reduce_sum(v)
    opt.apply_gradients(zip(tape.gradient(loss, [v]), [v]))
    want = np.mean([q + 1 for q in ps.ranks]) if ps.included() else float(r + 1)
    np.testing.assert_allclose(np.asarray(v.numpy()), [1.0 - want], rtol=1e-6)


def test_broadcast_variables_on_a_set(hvd, sets):
    ps, r = sets["B"], hvd.rank()
    v = tf.Variable([float(r)] * 2)
    if ps.included():
        hvd.broadcast_variables([v], root_rank=2, process_set=ps)
    assert v.numpy().tolist() == [2.0 if ps.included() else float(r)] * 2
    obj = hvd.broadcast_object({"from": r}, root_rank=1, process_set=ps) \
        if ps.included() else None
    if ps.included():
        assert obj == {"from": 1}


@MODES
def test_dynamic_add_use_remove(hvd, mode):
    r = hvd.rank()
    ps = hvd.add_process_set([0, 2])
    assert ps.process_set_id == 3 and ps.size() == 2
    if ps.included():
        out = run(mode, lambda: hvd.allreduce(tf.fill([2], float(r + 1)), op=hvd.Sum,
                                              name="dyn." + mode, process_set=ps))
        assert out.numpy().tolist() == [4.0, 4.0]
    hvd.barrier()
    assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(tf.ones([1]), name="removed", process_set=ps)
    # The id is free again; a new set takes it and works.
    again = hvd.add_process_set([0, 2])
    try:
        assert again.process_set_id == 3
        if again.included():
            out = hvd.allreduce(tf.ones([1]), op=hvd.Sum, name="again", process_set=again)
            assert out.numpy().tolist() == [2.0]
    finally:
        hvd.barrier()
        hvd.remove_process_set(again)
