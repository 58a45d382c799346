"""broadcast_parameters, broadcast_optimizer_state, broadcast_object and
allgather_object on 2 and 3 ranks. Each rank starts from different values
(seeded by its rank) and recomputes locally what the root holds, as the
expected result."""

import pytest
import torch


def make_model(seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                            torch.nn.Linear(4, 2))
    # Rank-specific buffers too (running stats, num_batches_tracked).
    with torch.no_grad():
        m[1].running_mean.normal_()
        m[1].num_batches_tracked.fill_(seed + 1)
    return m


def roots(hvd):
    return sorted({0, hvd.size() - 1})


def assert_same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("form", ["state_dict", "named_parameters", "parameters"])
def test_broadcast_parameters(hvd, form):
    for root in roots(hvd):
        model = make_model(10 + hvd.rank())
        expected = make_model(10 + root)
        if form == "state_dict":
            hvd.broadcast_parameters(model.state_dict(), root_rank=root)
            assert_same_state(model, expected)
        else:
            params = model.named_parameters() if form == "named_parameters" \
                else list(model.parameters())
            hvd.broadcast_parameters(params, root_rank=root)
            for p, q in zip(model.parameters(), expected.parameters()):
                assert torch.equal(p, q)
            # Buffers were not part of it: still this rank's.
            assert torch.equal(model[1].running_mean,
                               make_model(10 + hvd.rank())[1].running_mean)
            assert model[0].weight.requires_grad


def test_broadcast_parameters_errors(hvd):
    model = make_model(0)
    with pytest.raises(ValueError, match="invalid params of type int"):
        hvd.broadcast_parameters(3, root_rank=0)
    with pytest.raises(TypeError, match="'x' is a float, not a tensor"):
        hvd.broadcast_parameters({"x": 1.0}, root_rank=0)
    with pytest.raises(ValueError, match="root_rank 7 is not a rank"):
        hvd.broadcast_parameters(model.state_dict(), root_rank=7)
    with pytest.raises(ValueError, match="'w' appears twice"):
        hvd.broadcast_parameters([("w", model[0].weight), ("w", model[0].bias)], root_rank=0)


def stepped_adam(seed, lr, steps=2):
    """A model and Adam after `steps` steps on data seeded by `seed`."""
    model = make_model(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.8, 0.9 + seed * 0.001))
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(5, 3, generator=g)).pow(2).mean().backward()
        opt.step()
    return model, opt


def assert_same_optimizer_state(opt, expected):
    for group, egroup in zip(opt.param_groups, expected.param_groups):
        assert {k: v for k, v in group.items() if k != 'params'} == \
               {k: v for k, v in egroup.items() if k != 'params'}
        for p, q in zip(group['params'], egroup['params']):
            st, est = opt.state[p], expected.state[q]
            assert set(st) == set(est)
            for key in st:
                if torch.is_tensor(est[key]):
                    assert torch.is_tensor(st[key]) and torch.equal(st[key], est[key]), key
                else:
                    assert type(st[key]) is type(est[key]) and st[key] == est[key], key


def test_broadcast_optimizer_state_adam(hvd):
    root = hvd.size() - 1
    r = hvd.rank()
    model, opt = stepped_adam(20 + r, lr=0.01 * (r + 1), steps=1 + r)
    before = [p.detach().clone() for p in model.parameters()]
    hvd.broadcast_optimizer_state(opt, root_rank=root)
    _, expected = stepped_adam(20 + root, lr=0.01 * (root + 1), steps=1 + root)
    assert_same_optimizer_state(opt, expected)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.01 * (root + 1))
    # The parameters are not the optimizer's state: untouched.
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p, b)


def test_broadcast_optimizer_state_int_step(hvd):
    # Older torch keeps Adam's 'step' as an int; here the root has ints and
    # the other ranks tensors (or the reverse for root 1): the root's wins.
    for root in roots(hvd):
        r = hvd.rank()
        model, opt = stepped_adam(30, lr=0.01)
        for i, p in enumerate(model.parameters()):
            if r == root:
                opt.state[p]['step'] = 100 * (root + 1) + i
            else:
                opt.state[p]['step'] = torch.tensor(float(r))
        hvd.broadcast_optimizer_state(opt, root_rank=root)
        for i, p in enumerate(model.parameters()):
            step = opt.state[p]['step']
            assert type(step) is int and step == 100 * (root + 1) + i


def test_broadcast_optimizer_state_fresh_sgd(hvd):
    # A fresh optimizer gets its state from Horovod's zero-gradient step,
    # which leaves its zero gradients (as Horovod's); here that step moves
    # no parameter even with weight decay.
    r = hvd.rank()
    model = make_model(40 + r)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.5 + 0.1 * r,
                          weight_decay=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.1)
    assert opt.param_groups[0]['momentum'] == pytest.approx(0.5)
    assert opt.param_groups[0]['weight_decay'] == pytest.approx(0.1)
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p, b) and torch.equal(p.grad, torch.zeros_like(p))
        assert torch.equal(opt.state[p]['momentum_buffer'], torch.zeros_like(p))


def test_broadcast_optimizer_state_only_root_has_state(hvd):
    # Resuming: the root loaded a checkpoint, the others start fresh.
    r = hvd.rank()
    if r == 0:
        model, opt = stepped_adam(50, lr=0.02)
    else:
        model = make_model(50)
        opt = torch.optim.Adam(model.parameters(), lr=0.5, betas=(0.8, 0.99))
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    _, expected = stepped_adam(50, lr=0.02)
    assert_same_optimizer_state(opt, expected)


def test_broadcast_optimizer_state_distributed_optimizer(hvd):
    # On a fresh DistributedOptimizer the initializing step must not
    # allreduce (a rank-local path); training afterwards stays in step.
    model = make_model(60 + hvd.rank())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1)),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.01)
    g = torch.Generator().manual_seed(hvd.rank())
    opt.zero_grad()
    model(torch.randn(4, 3, generator=g)).pow(2).mean().backward()
    opt.step()
    for name, p in model.named_parameters():
        hi = hvd.allreduce(p.detach(), op=hvd.Max, name="check.dopt." + name)
        assert torch.equal(hi, p.detach()), name


def test_broadcast_optimizer_state_errors(hvd):
    model = make_model(0)
    with pytest.raises(ValueError, match="LBFGS"):
        hvd.broadcast_optimizer_state(torch.optim.LBFGS(model.parameters()), root_rank=0)
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        hvd.broadcast_optimizer_state(model, root_rank=0)


def test_broadcast_object(hvd):
    for root in roots(hvd):
        mine = {"rank": hvd.rank(), "tensor": torch.arange(hvd.rank() + 2),
                "text": "x" * (100 * hvd.rank())} if hvd.rank() == root else None
        got = hvd.broadcast_object(mine, root_rank=root)
        assert got["rank"] == root and got["text"] == "x" * (100 * root)
        assert torch.equal(got["tensor"], torch.arange(root + 2))
    # A named one.
    assert hvd.broadcast_object((1, 2.5, None), root_rank=0, name="tuple") == (1, 2.5, None)


def test_allgather_object(hvd):
    n, r = hvd.size(), hvd.rank()
    got = hvd.allgather_object({"rank": r, "items": list(range(r * 50))})
    assert got == [{"rank": i, "items": list(range(i * 50))} for i in range(n)]
    got = hvd.allgather_object(None if r % 2 else "rank%d" % r, name="mixed")
    assert got == [None if i % 2 else "rank%d" % i for i in range(n)]


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("this object cannot be pickled")


def test_an_object_that_cannot_be_pickled_raises_on_every_rank(hvd):
    """One rank's object cannot be pickled: that rank raises the reason, the
    others a ValueError naming it, rather than waiting for ever for its
    bytes; and the ranks stay in step."""
    n, r = hvd.size(), hvd.rank()
    root = n - 1
    if r == root:
        with pytest.raises(TypeError, match="cannot be pickled"):
            hvd.broadcast_object(_Unpicklable(), root_rank=root, name="unpicklable")
    else:
        with pytest.raises(ValueError, match="root rank %d could not pickle" % root):
            hvd.broadcast_object(None, root_rank=root, name="unpicklable")
    if r == 0:
        with pytest.raises(TypeError, match="cannot be pickled"):
            hvd.allgather_object(_Unpicklable(), name="unpicklable")
    else:
        with pytest.raises(ValueError, match="rank 0 could not pickle"):
            hvd.allgather_object(r, name="unpicklable")
    assert hvd.broadcast_object(r, root_rank=root) == root
    assert hvd.allgather_object(r) == list(range(n))


def test_broadcast_optimizer_state_groups_that_differ_raise_on_every_rank(hvd):
    """The last rank's optimizer has one parameter fewer than the root's:
    it raises naming both shapes, and the root (and every other rank)
    raises too rather than waiting for ever in the state's broadcasts."""
    n, r = hvd.size(), hvd.rank()
    model = make_model(0)
    params = list(model.parameters())
    if r == n - 1:
        params = params[:-1]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="param groups"):
        hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert hvd.broadcast_object(r, root_rank=0, name="after.groups") == 0
