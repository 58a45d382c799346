"""broadcast_parameters, broadcast_optimizer_state, broadcast_object and
allgather_object as in Horovod 0.28 (horovod/torch/functions.py). Every rank
starts from its own values and recomputes locally what the root holds."""

import pytest
import torch


def make_model(seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                            torch.nn.Linear(4, 2))
    with torch.no_grad():
        m[1].running_mean.normal_()
        m[1].num_batches_tracked.fill_(seed)
    return m


def roots(hvd):
    return sorted({0, hvd.size() - 1})


@pytest.mark.parametrize("form", ["state_dict", "named_list", "tensor_list"])
def test_broadcast_parameters(hvd, form):
    me = hvd.rank()
    for root in roots(hvd):
        model, expected = make_model(10 + me), make_model(10 + root)
        if form == "state_dict":
            hvd.broadcast_parameters(model.state_dict(), root_rank=root)
            got, want = model.state_dict(), expected.state_dict()
            assert list(got) == list(want)
            assert all(torch.equal(got[k], want[k]) for k in got)
        else:
            params = list(model.named_parameters())
            if form == "tensor_list":
                params = [p for _, p in params]
            hvd.broadcast_parameters(params, root_rank=root)
            for p, q in zip(model.parameters(), expected.parameters()):
                assert torch.equal(p, q)
            # Buffers were not part of it.
            assert torch.equal(model[1].running_mean, make_model(10 + me)[1].running_mean)


def test_broadcast_parameters_invalid_type(hvd):
    with pytest.raises(ValueError):
        hvd.broadcast_parameters(3, root_rank=0)


def optimizer_for(model, kind, me):
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.1 * (me + 1), momentum=0.9,
                               nesterov=bool(me % 2 == 0), weight_decay=0.0)
    return torch.optim.Adam(model.parameters(), lr=0.01 * (me + 1), betas=(0.8 + 0.01 * me, 0.99),
                            amsgrad=True)


def train_once(model, opt, seed):
    torch.manual_seed(seed)
    model(torch.randn(5, 3)).sum().backward()
    opt.step()


def assert_same_optimizer(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert len(sa["param_groups"]) == len(sb["param_groups"])
    for ga, gb in zip(sa["param_groups"], sb["param_groups"]):
        for k in ga:
            if k != "params":
                assert ga[k] == gb[k] and type(ga[k]) is type(gb[k]), (k, ga[k], gb[k])
    assert sorted(sa["state"]) == sorted(sb["state"])
    for pid in sa["state"]:
        for k, v in sa["state"][pid].items():
            w = sb["state"][pid][k]
            if torch.is_tensor(v):
                assert torch.equal(v, w), k
            else:
                assert v == w, k


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_broadcast_optimizer_state_after_training(hvd, kind):
    me = hvd.rank()
    for root in roots(hvd):
        model = make_model(1)
        opt = optimizer_for(model, kind, me)
        train_once(model, opt, 20 + me)
        ref_model = make_model(1)
        ref = optimizer_for(ref_model, kind, root)
        train_once(ref_model, ref, 20 + root)
        hvd.broadcast_optimizer_state(opt, root_rank=root)
        assert_same_optimizer(opt, ref)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "distributed"])
def test_broadcast_optimizer_state_before_any_step(hvd, kind, wrapped):
    # No gradients yet: Horovod takes a zero-gradient step to create the
    # state, then broadcasts it. The usual script calls it right after
    # wrapping the optimizer in DistributedOptimizer.
    me = hvd.rank()
    model = make_model(2)
    opt = optimizer_for(model, kind, me)
    if wrapped:
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    before = [p.detach().clone() for p in model.parameters()]
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == optimizer_for(make_model(2), kind, 0).param_groups[0]["lr"]
    ref_model = make_model(2)
    ref = optimizer_for(ref_model, kind, 0)
    for p in ref_model.parameters():
        p.grad = torch.zeros_like(p)
    ref.step()
    assert_same_optimizer(opt, ref)
    # The zero-gradient step moved nothing.
    for p, q in zip(model.parameters(), before):
        assert torch.equal(p.detach(), q)
    if wrapped:
        # And the optimizer still trains.
        opt.zero_grad()
        model(torch.ones(2, 3) * me).sum().backward()
        opt.step()
        w = hvd.allgather(model[0].weight.detach().reshape(1, -1), name="bos.wrapped." + kind)
        assert all(torch.equal(w[0], w[r]) for r in range(hvd.size()))


def test_broadcast_optimizer_state_frozen_parameter(hvd):
    # A parameter without requires_grad gets no zero gradient and no state.
    me = hvd.rank()
    model = make_model(3)
    model[0].bias.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (me + 1))
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.01
    assert model[0].bias.grad is None
    assert model[0].bias not in opt.state


def test_broadcast_optimizer_state_lbfgs_refused(hvd):
    model = make_model(0)
    with pytest.raises(ValueError):
        hvd.broadcast_optimizer_state(torch.optim.LBFGS(model.parameters()), root_rank=0)


def test_broadcast_object(hvd):
    me = hvd.rank()
    for root in roots(hvd):
        obj = {"rank": me, "list": list(range(me + 1)), "nested": (me, None, "x" * me)}
        got = hvd.broadcast_object(obj, root_rank=root)
        assert got == {"rank": root, "list": list(range(root + 1)),
                       "nested": (root, None, "x" * root)}


def test_broadcast_object_named_none_on_others(hvd):
    # With a name, the other ranks may pass anything (here None).
    me = hvd.rank()
    got = hvd.broadcast_object({"cfg": 1} if me == 0 else None, root_rank=0, name="cfg")
    assert got == {"cfg": 1}
    assert hvd.broadcast_object(me, root_rank=0) == 0


def test_broadcast_object_tensor_and_function(hvd):
    # cloudpickle: tensors and lambdas travel too.
    me = hvd.rank()
    t, f = hvd.broadcast_object((torch.arange(3.0) + me, lambda v: v * 10 + me), root_rank=0)
    assert torch.equal(t, torch.arange(3.0)) and f(1) == 10


def test_allgather_object(hvd):
    n, me = hvd.size(), hvd.rank()
    got = hvd.allgather_object({"rank": me, "payload": "y" * (100 * me)})
    assert got == [{"rank": r, "payload": "y" * (100 * r)} for r in range(n)]
    assert hvd.allgather_object(me * 2, name="ints") == [2 * r for r in range(n)]


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_broadcast_optimizer_state_leaves_zero_gradients(hvd, kind):
    # Horovod's initialisation step gives every trainable parameter without
    # a gradient a zero gradient, and leaves it there: scripts use p.grad.
    model = make_model(4)
    model[0].bias.requires_grad_(False)
    opt = optimizer_for(model, kind, hvd.rank())
    assert all(p.grad is None for p in model.parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for name, p in model.named_parameters():
        if not p.requires_grad:
            assert p.grad is None, name
            continue
        assert p.grad is not None, name
        assert p.grad.shape == p.shape and not p.grad.is_sparse, name
        assert torch.count_nonzero(p.grad) == 0, name
