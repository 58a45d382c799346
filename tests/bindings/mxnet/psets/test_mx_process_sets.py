"""plait.mxnet on process sets: Horovod 0.28's process_set= on every
operation, DistributedTrainer and DistributedOptimizer, on a set without
rank 0 and on overlapping sets; dynamic sets; the errors (a rank outside the
set, a removed set) raised at the call and leaving the ranks in step."""

import mxnet as mx
import pytest


def _mine(sets):
    return [(k, ps) for k, ps in sorted(sets.items()) if ps.included()]


def test_every_operation_on_each_set(hvd, sets):
    r = hvd.rank()
    for key, ps in _mine(sets):
        m, me, members = ps.size(), ps.rank(), ps.ranks
        x = mx.nd.array([float(r), 1.0])
        out = hvd.allreduce(x, name="ops.avg." + key, process_set=ps)
        assert out.asnumpy().tolist() == [sum(members) / m, 1.0]
        y = x.copy()
        hvd.allreduce_(y, op=hvd.Sum, name="ops.ip." + key, process_set=ps)
        assert y.asnumpy().tolist() == [float(sum(members)), float(m)]
        outs = hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, name="ops.g." + key,
                                     process_set=ps)
        assert outs[1].asnumpy().tolist() == [2.0 * sum(members), 2.0 * m]
        g = hvd.allgather(mx.nd.full((me + 1, 2), float(r)), name="ops.ag." + key,
                          process_set=ps)
        assert g[:, 0].asnumpy().tolist() == [float(q) for i, q in enumerate(members)
                                              for _ in range(i + 1)]
        gg = hvd.grouped_allgather([mx.nd.full((1,), float(r))] * 2, name="ops.gag." + key,
                                   process_set=ps)
        assert [a.asnumpy().tolist() for a in gg] == [[float(q) for q in members]] * 2
        root = members[-1]  # a rank of the job, as in Horovod
        b = hvd.broadcast(mx.nd.array([float(r)]), root, name="ops.bc." + key, process_set=ps)
        assert b.asnumpy().tolist() == [float(root)]
        a2a, got = hvd.alltoall(mx.nd.arange(m) + 10 * r, splits=[1] * m,
                                name="ops.a2a." + key, process_set=ps)
        assert a2a.asnumpy().tolist() == [10.0 * q + me for q in members]
        assert got.asnumpy().tolist() == [1] * m
        rs = hvd.reducescatter(mx.nd.ones((m, 2)) * (r + 1), op=hvd.Sum, name="ops.rs." + key,
                               process_set=ps)
        assert rs.asnumpy().tolist() == [[float(sum(q + 1 for q in members))] * 2]
        hvd.barrier(process_set=ps)


def test_unnamed_operations_count_per_set(hvd, sets):
    """Unnamed operations on overlapping sets (rank 1 is in both), in an
    order that differs between the sets' members, and on the global set."""
    r = hvd.rank()
    for _ in range(3):
        for key, ps in _mine(sets):
            out = hvd.allreduce(mx.nd.ones((2,)), op=hvd.Sum, process_set=ps)
            assert out.asnumpy().tolist() == [float(ps.size())] * 2
            a = hvd.alltoall(mx.nd.ones((ps.size(),)) * r, process_set=ps)
            assert a.asnumpy().tolist() == [float(q) for q in ps.ranks]
        assert hvd.allgather(mx.nd.ones((1,))).shape == (hvd.size(),)


def test_distributed_trainer_and_optimizer_on_a_set(hvd, sets):
    """Gradients are averaged over the set's ranks only; a rank outside it
    runs no allreduce and keeps its own gradient, scaled by 1/set size all
    the same (Horovod's, which scales in the framework on every rank)."""
    ps = sets["B"]
    r = hvd.rank()
    net = mx.gluon.nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(mx.init.One())
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 1.0},
                                     process_set=ps)
    with mx.autograd.record():
        loss = net(mx.nd.array([[float(r + 1), 0.0]])).sum()
    loss.backward()
    trainer.step(1)
    w = net.weight.data().asnumpy().tolist()
    if ps.included():
        mean = sum(q + 1 for q in ps.ranks) / ps.size()
        assert w == [[1.0 - mean, 1.0]]
    else:
        assert w == [[1.0 - (r + 1) / ps.size(), 1.0]]
    opt = hvd.DistributedOptimizer(mx.optimizer.SGD(learning_rate=1.0), process_set=ps)
    weight, grad = mx.nd.ones((2,)), mx.nd.array([float(r + 1), 0.0])
    opt.update(0, weight, grad, None)
    if ps.included():
        mean = sum(q + 1 for q in ps.ranks) / ps.size()
        assert weight.asnumpy().tolist() == [1.0 - mean, 1.0]
    else:
        assert weight.asnumpy().tolist() == [1.0 - (r + 1) / ps.size(), 1.0]


def test_outside_the_set_is_refused_at_the_call(hvd, sets):
    r = hvd.rank()
    for key, ps in sorted(sets.items()):
        if ps.included():
            continue
        calls = [
            lambda: hvd.allreduce(mx.nd.ones((2,)), process_set=ps),
            lambda: hvd.allreduce_(mx.nd.ones((2,)), process_set=ps),
            lambda: hvd.grouped_allreduce([mx.nd.ones((2,))], process_set=ps),
            lambda: hvd.broadcast(mx.nd.ones((2,)), ps.ranks[0], process_set=ps),
            lambda: hvd.allgather(mx.nd.ones((2,)), process_set=ps),
            lambda: hvd.alltoall(mx.nd.ones((2,)), process_set=ps),
            lambda: hvd.reducescatter(mx.nd.ones((2,)), process_set=ps),
            lambda: hvd.barrier(process_set=ps),
        ]
        for call in calls:
            with pytest.raises(ValueError, match="rank %d is not a member of process set %d"
                               % (r, ps.process_set_id)) as err:
                call()
            assert isinstance(err.value, mx.base.MXNetError) or "barrier" in str(err.value)
    # a root outside the set, refused at the call on its members
    for key, ps in _mine(sets):
        outside = [q for q in range(hvd.size()) if q not in ps.ranks][0]
        with pytest.raises(ValueError, match="root_rank %d is not a member" % outside):
            hvd.broadcast(mx.nd.ones((2,)), outside, process_set=ps)
    # the unnamed operations refused above consumed nothing: the sets go on
    for key, ps in _mine(sets):
        assert hvd.allreduce(mx.nd.ones((1,)), op=hvd.Sum, process_set=ps) \
            .asnumpy().tolist() == [float(ps.size())]
    with pytest.raises(TypeError, match="must be a ProcessSet"):
        hvd.allreduce(mx.nd.ones((1,)), process_set=[0])


def test_dynamic_add_use_remove(hvd, sets):
    n, r = hvd.size(), hvd.rank()
    ps = hvd.add_process_set([n - 1, 0])
    assert ps.process_set_id == len(sets) + 1 and ps.ranks == [0, n - 1]
    if ps.included():
        out = hvd.allreduce(mx.nd.ones((1,)), op=hvd.Sum, name="dyn.ar", process_set=ps)
        assert out.asnumpy().tolist() == [2.0]
        g = hvd.allgather(mx.nd.ones((1,)) * r, name="dyn.ag", process_set=ps)
        assert g.asnumpy().tolist() == [0.0, float(n - 1)]
    hvd.barrier()
    assert hvd.remove_process_set(ps) is True
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(mx.nd.ones((1,)), name="dyn.removed", process_set=ps)
    with pytest.raises(ValueError, match="not registered"):
        hvd.allgather(mx.nd.ones((1,)), process_set=ps)
    assert hvd.remove_process_set(ps) is False
    again = hvd.add_process_set([0, n - 1])  # the freed id is given again
    assert again.process_set_id == len(sets) + 1
    if again.included():
        out = hvd.allreduce(mx.nd.ones((1,)), op=hvd.Sum, name="dyn.again", process_set=again)
        assert out.asnumpy().tolist() == [2.0]
    hvd.barrier()
    assert hvd.remove_process_set(again) is True
