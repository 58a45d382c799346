"""DistributedTrainer, DistributedOptimizer and broadcast_parameters: n ranks
training on their slices of a batch end with the parameters one process
gets on the whole batch."""

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

B = 4          # samples per rank
STEPS = 3


def _net(seed, in_units=5):
    mx.random.seed(seed)
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(gluon.nn.Dense(8, activation="tanh", in_units=in_units))
        net.add(gluon.nn.Dense(1, in_units=8))
    net.initialize(mx.init.Xavier())
    return net


def _data(n):
    rng = np.random.RandomState(42)
    x = rng.uniform(-1, 1, size=(STEPS, n * B, 5)).astype(np.float32)
    y = rng.uniform(-1, 1, size=(STEPS, n * B, 1)).astype(np.float32)
    return x, y


def _params(net):
    return [p.data().asnumpy() for _, p in sorted(net.collect_params().items())]


def _reference(n, optimizer_params):
    """One process, plain gluon.Trainer, the whole batch."""
    net = _net(seed=0)
    trainer = gluon.Trainer(net.collect_params(), "sgd", optimizer_params, kvstore=None)
    x, y = _data(n)
    loss_fn = gluon.loss.L2Loss()
    for s in range(STEPS):
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x[s])), mx.nd.array(y[s]))
        loss.backward()
        trainer.step(n * B)
    return _params(net)


@pytest.mark.parametrize("num_groups", [0, 2])
@pytest.mark.parametrize("gpf", [1.0, 2.0])
def test_distributed_trainer_matches_one_process(hvd, num_groups, gpf):
    n, r = hvd.size(), hvd.rank()
    opt = {"learning_rate": 0.5, "momentum": 0.9}
    net = _net(seed=100 + r)            # different on every rank ...
    hvd.broadcast_parameters(net.collect_params(), root_rank=0,
                             prefix="dt.%d.%g." % (num_groups, gpf))  # ... until broadcast
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", opt, num_groups=num_groups,
                                     gradient_predivide_factor=gpf,
                                     prefix="dt.%d.%g." % (num_groups, gpf))
    x, y = _data(n)
    loss_fn = gluon.loss.L2Loss()
    for s in range(STEPS):
        xs, ys = x[s][r * B:(r + 1) * B], y[s][r * B:(r + 1) * B]
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(xs)), mx.nd.array(ys))
        loss.backward()
        trainer.step(B)
    got = _params(net)
    # rank 0's init is the reference's (seed 0 on rank 0 ... after the broadcast)
    ref = _reference_from_rank0(hvd, n, opt, r)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # identical on every rank, bit for bit
    gathered = hvd.allgather_object([a.tobytes() for a in got], name="dt.same.%d.%g"
                                    % (num_groups, gpf))
    assert all(g == gathered[0] for g in gathered)


def _reference_from_rank0(hvd, n, opt, r):
    """The one-process reference starting from rank 0's initial values
    (seed 100)."""
    net = _net(seed=100)
    trainer = gluon.Trainer(net.collect_params(), "sgd", opt, kvstore=None)
    x, y = _data(n)
    loss_fn = gluon.loss.L2Loss()
    for s in range(STEPS):
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x[s])), mx.nd.array(y[s]))
        loss.backward()
        trainer.step(n * B)
    return _params(net)


@pytest.mark.parametrize("num_groups", [0, 2])
def test_distributed_optimizer_matches_one_process(hvd, num_groups):
    n, r = hvd.size(), hvd.rank()
    x, y = _data(n)
    loss_fn = gluon.loss.L2Loss()

    def run(net, updater, lo, hi, aggregate):
        params = [p for _, p in sorted(net.collect_params().items())]
        for s in range(STEPS):
            with autograd.record():
                loss = loss_fn(net(mx.nd.array(x[s][lo:hi])), mx.nd.array(y[s][lo:hi]))
            loss.backward()
            if aggregate:  # one update of every parameter (a list index)
                updater(list(range(len(params))), [p.grad() for p in params],
                        [p.data() for p in params])
            else:
                for i, p in enumerate(params):
                    updater(i, p.grad(), p.data())
        return [p.data().asnumpy() for p in params]

    inner = mx.optimizer.SGD(learning_rate=0.5, momentum=0.9, rescale_grad=1.0 / B)
    dopt = hvd.DistributedOptimizer(inner, num_groups=num_groups)
    net = _net(seed=200 + r)
    hvd.broadcast_parameters(net.collect_params(), root_rank=0, prefix="do.%d." % num_groups)
    got = run(net, mx.optimizer.get_updater(dopt), r * B, (r + 1) * B, num_groups > 0)

    ref_opt = mx.optimizer.SGD(learning_rate=0.5, momentum=0.9, rescale_grad=1.0 / (n * B))
    ref = run(_net(seed=200), mx.optimizer.get_updater(ref_opt), 0, n * B, False)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_broadcast_parameters_deferred_initialisation(hvd):
    r = hvd.rank()
    mx.random.seed(300 + r)
    net = gluon.nn.Dense(6)            # in_units unknown: initialisation is deferred
    net.initialize(mx.init.Uniform(1.0))
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0, prefix="deferred.")
    net(mx.nd.ones((2, 3)))            # initialises, then broadcasts
    mine = {k: p.data().asnumpy() for k, p in params.items()}
    weight = next(v for k, v in mine.items() if k.endswith("weight"))
    assert weight.shape == (6, 3)
    # the seeds differ, so the ranks' own initial weights differ: only the
    # broadcast after initialisation makes them equal
    root = hvd.broadcast_object(mine, root_rank=0, name="deferred.check")
    for k in mine:
        np.testing.assert_array_equal(mine[k], root[k])


def test_broadcast_parameters_dict_and_bad_type(hvd):
    r = hvd.rank()
    d = {"a": mx.nd.ones((3,)) * r, "b": mx.nd.arange(4) + r}
    hvd.broadcast_parameters(d, root_rank=hvd.size() - 1, prefix="dict.")
    np.testing.assert_array_equal(d["a"].asnumpy(), hvd.size() - 1)
    np.testing.assert_array_equal(d["b"].asnumpy(), np.arange(4) + hvd.size() - 1)
    with pytest.raises(ValueError, match="invalid params"):
        hvd.broadcast_parameters([mx.nd.ones(1)])


def test_broadcast_and_allgather_object(hvd):
    n, r = hvd.size(), hvd.rank()
    obj = hvd.broadcast_object({"rank": r, "x": [1, 2, 3]} if r == 0 else None, root_rank=0,
                               name="obj")
    assert obj == {"rank": 0, "x": [1, 2, 3]}
    got = hvd.allgather_object(("r", r, "x" * r), name="gobj")
    assert got == [("r", q, "x" * q) for q in range(n)]


def test_trainer_unwraps_distributed_optimizer(hvd):
    net = _net(seed=1)
    dopt = hvd.DistributedOptimizer(mx.optimizer.SGD(learning_rate=0.1))
    with pytest.warns(UserWarning, match="unwrapped"):
        hvd.DistributedTrainer(net.collect_params(), dopt)


def test_distributed_trainer_fp16_compression(hvd):
    """Compression.fp16: the float32 gradients travel as float16 and are cast
    back; the result is the one-process one within float16's precision."""
    n, r = hvd.size(), hvd.rank()
    opt = {"learning_rate": 0.5, "momentum": 0.9}
    net = _net(seed=100 + r)
    hvd.broadcast_parameters(net.collect_params(), root_rank=0, prefix="fp16.")
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", opt,
                                     compression=hvd.Compression.fp16, prefix="fp16.")
    x, y = _data(n)
    loss_fn = gluon.loss.L2Loss()
    for s in range(STEPS):
        xs, ys = x[s][r * B:(r + 1) * B], y[s][r * B:(r + 1) * B]
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(xs)), mx.nd.array(ys))
        loss.backward()
        trainer.step(B)
    got = _params(net)
    ref = _reference_from_rank0(hvd, n, opt, r)
    for a, b in zip(got, ref):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-3)
    gathered = hvd.allgather_object([a.tobytes() for a in got], name="fp16.same")
    assert all(g == gathered[0] for g in gathered)
