"""DistributedOptimizer as Horovod 0.28 defines it: gradients allreduced
(Average by default) in backward hooks, waited on in step() or
synchronize(); with and without named_parameters, op=Sum,
backward_passes_per_step, gradient_predivide_factor, fp16 compression,
groups, skip_synchronize, parameters without a gradient, and its errors.
Gradients are integers here, so every expected value is exact."""

import warnings

import pytest
import torch

import hvd_expected as hn

LR = 0.5


def make_model():
    m = torch.nn.Linear(3, 2)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]))
        m.bias.copy_(torch.tensor([0.125, -2.0]))
    return m


def data(r, k=0):
    x = torch.tensor([[1.0, 2.0, -1.0], [float(r), 1.0, float(k)]])
    c = torch.tensor([[1.0, -2.0], [3.0 + r, 1.0 + k]])
    return x, c


def loss_of(model, r, k=0):
    x, c = data(r, k)
    return (model(x) * c).sum()


def local_grads(r, ks=(0,)):
    m = make_model()
    for k in ks:
        loss_of(m, r, k).backward()
    return [m.weight.grad.clone(), m.bias.grad.clone()]


def expected_grads(hvd, op=None, ks=(0,), pre=1.0, post=1.0, dtype=None):
    op = hvd.Average if op is None else op
    per_rank = [local_grads(r, ks) for r in range(hvd.size())]
    out = []
    for i in range(2):
        gs = [g[i] for g in per_rank]
        if dtype is not None:
            gs = [g.to(dtype) for g in gs]
        out.append(hn.allreduce(hvd, gs, op, pre, post).float())
    return out


def check_step(model, p0, grads):
    for p, q, g in zip(model.parameters(), p0, grads):
        assert torch.equal(p.grad, g), (p.grad, g)
        assert torch.equal(p.detach(), q.add(g, alpha=-LR)), (p, q, g)


def run(hvd, steps_ks=((0,),), **kwargs):
    model = make_model()
    named = kwargs.pop("named", True)
    if named:
        kwargs["named_parameters"] = model.named_parameters()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR), **kwargs)
    p0 = [p.detach().clone() for p in model.parameters()]
    for ks in steps_ks:
        opt.zero_grad()
        for k in ks:
            loss_of(model, hvd.rank(), k).backward()
        opt.step()
    return model, opt, p0


@pytest.mark.parametrize("named", [True, False], ids=["named", "unnamed"])
def test_average(hvd, named):
    model, _, p0 = run(hvd, named=named)
    check_step(model, p0, expected_grads(hvd))


def test_sum(hvd):
    model, _, p0 = run(hvd, op=hvd.Sum)
    check_step(model, p0, expected_grads(hvd, hvd.Sum))


def test_backward_passes_per_step(hvd):
    # Two backward passes accumulate locally; one allreduce at step().
    model, _, p0 = run(hvd, steps_ks=((0, 1),), backward_passes_per_step=2)
    check_step(model, p0, expected_grads(hvd, ks=(0, 1)))


def test_set_backward_passes_per_step(hvd):
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    opt.set_backward_passes_per_step(2)
    assert opt.backward_passes_per_step == 2
    p0 = [p.detach().clone() for p in model.parameters()]
    loss_of(model, hvd.rank(), 0).backward()
    loss_of(model, hvd.rank(), 1).backward()
    opt.step()
    check_step(model, p0, expected_grads(hvd, ks=(0, 1)))


def test_gradient_predivide_factor(hvd):
    # prescale 1 / f, postscale f / size.
    model, _, p0 = run(hvd, gradient_predivide_factor=2.0)
    check_step(model, p0, expected_grads(hvd, pre=0.5, post=2.0))


def test_compression_fp16(hvd):
    model, _, p0 = run(hvd, compression=hvd.Compression.fp16)
    check_step(model, p0, expected_grads(hvd, dtype=torch.float16))


@pytest.mark.parametrize("groups", ["one-list", "count"])
def test_groups(hvd, groups):
    model = make_model()
    g = [list(model.parameters())] if groups == "one-list" else 1
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters(), groups=g)
    p0 = [p.detach().clone() for p in model.parameters()]
    loss_of(model, hvd.rank()).backward()
    opt.step()
    check_step(model, p0, expected_grads(hvd))


def test_several_steps(hvd):
    model, _, _ = run(hvd, steps_ks=((0,), (1,), (2,)))
    w = hvd.allgather(model.weight.detach().reshape(1, -1), name="opt.steps.w")
    assert all(torch.equal(w[0], w[r]) for r in range(hvd.size()))


def test_unused_parameter_gets_zero_gradient(hvd):
    # A parameter no rank computed a gradient for is reduced as zeros: after
    # step() its .grad is a zero tensor, not None.
    model = torch.nn.Sequential(make_model(), torch.nn.Linear(2, 2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    loss_of(model[0], hvd.rank()).backward()
    opt.step()
    assert model[1].weight.grad is not None
    assert torch.equal(model[1].weight.grad, torch.zeros(2, 2))


def test_gradient_on_some_ranks_only(hvd):
    # Only rank 0 uses the second layer; the others contribute zeros.
    n, me = hvd.size(), hvd.rank()
    model = torch.nn.Sequential(make_model(), torch.nn.Linear(2, 1))
    with torch.no_grad():
        model[1].weight.copy_(torch.tensor([[1.0, -1.0]]))
        model[1].bias.zero_()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    x, _ = data(me)
    if me == 0:
        model(x).sum().backward()
    else:
        model[0](x).sum().backward()
    g0 = model[1].weight.grad.clone() if me == 0 else None
    g0 = hvd.broadcast_object(g0, root_rank=0, name="opt.some.g0")
    opt.step()
    expected = hn.allreduce(hvd, [g0] + [torch.zeros(1, 2)] * (n - 1), hvd.Average)
    assert torch.equal(model[1].weight.grad, expected)


def test_skip_synchronize(hvd):
    # The gradient clipping pattern: synchronize(), change the gradients,
    # step() without synchronizing again.
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    p0 = [p.detach().clone() for p in model.parameters()]
    loss_of(model, hvd.rank()).backward()
    opt.synchronize()
    expected = expected_grads(hvd)
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), expected))
    with opt.skip_synchronize():
        opt.step()
    check_step(model, p0, expected)


def test_step_after_synchronize_warns(hvd):
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    loss_of(model, hvd.rank()).backward()
    opt.synchronize()
    with pytest.warns(UserWarning):
        opt.step()


def test_zero_grad_before_step_refused(hvd):
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    p0 = [p.detach().clone() for p in model.parameters()]
    loss_of(model, hvd.rank()).backward()
    with pytest.raises(AssertionError):
        opt.zero_grad()
    opt.step()
    check_step(model, p0, expected_grads(hvd))
    opt.zero_grad()


def test_too_many_backward_passes_refused(hvd):
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    loss_of(model, hvd.rank()).backward()
    with pytest.raises(AssertionError):
        loss_of(model, hvd.rank()).backward()
    opt.synchronize()


def test_wraps_the_optimizer_class(hvd):
    model = make_model()
    base = torch.optim.Adam(model.parameters(), lr=0.1)
    opt = hvd.DistributedOptimizer(base, named_parameters=model.named_parameters())
    assert isinstance(opt, torch.optim.Adam)
    assert type(opt).__name__ == "Adam"
    assert opt.param_groups[0]["lr"] == 0.1


def test_state_dict_round_trip(hvd):
    model, opt, _ = run(hvd)
    state = opt.state_dict()
    opt.load_state_dict(state)
    p1 = [p.detach().clone() for p in model.parameters()]
    opt.zero_grad()
    loss_of(model, hvd.rank()).backward()
    opt.step()
    per_rank = []
    for r in range(hvd.size()):
        m = make_model()
        with torch.no_grad():
            for p, q in zip(m.parameters(), p1):
                p.copy_(q)
        loss_of(m, r).backward()
        per_rank.append([m.weight.grad, m.bias.grad])
    for p, q, i in zip(model.parameters(), p1, range(2)):
        g = hn.allreduce(hvd, [pr[i] for pr in per_rank], hvd.Average)
        assert torch.equal(p.detach(), q.add(g, alpha=-LR))


def test_process_set_global(hvd):
    model, _, p0 = run(hvd, process_set=hvd.global_process_set)
    check_step(model, p0, expected_grads(hvd))


def test_errors(hvd):
    model = make_model()

    def sgd():
        return torch.optim.SGD(model.parameters(), lr=LR)

    named = list(model.named_parameters())
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(sgd(), named_parameters=named, backward_passes_per_step=0)
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(sgd(), named_parameters=named, op=hvd.Sum,
                                 gradient_predivide_factor=2.0)
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(sgd(), named_parameters=[("w", model.weight),
                                                          ("w", model.bias)])
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(sgd(), named_parameters=[("w", model.weight)])
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(sgd(), named_parameters=[model.weight, model.bias])
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(sgd(), named_parameters=named, groups=[[1.0]])
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(sgd(), named_parameters=named,
                                 groups=[[model.weight], [model.weight]])


@pytest.mark.differs("adasum")
def test_adasum(hvd, impl):
    # Neither runs Adasum here: plait has none; Horovod's needs MPI (a Gloo
    # build fails the operation) and a power-of-two number of ranks.
    n = hvd.size()
    model = make_model()
    if impl == "plait":
        with pytest.raises(NotImplementedError):
            hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                     named_parameters=model.named_parameters(), op=hvd.Adasum)
        with pytest.raises(NotImplementedError):
            hvd.allreduce(torch.ones(2), op=hvd.Adasum, name="adasum")
    elif n & (n - 1):
        with pytest.raises(NotImplementedError):
            hvd.allreduce(torch.ones(2), op=hvd.Adasum, name="adasum")
    else:
        with pytest.raises(hvd.HorovodInternalError, match="No Adasum operation enabled"):
            hvd.allreduce(torch.ones(2), op=hvd.Adasum, name="adasum")


def _horovod_parameter_names(opt, named_parameters=None):
    """Horovod 0.28.1's rule (horovod/torch/optimizer.py), written out."""
    if named_parameters is None:
        named_parameters = [(f'allreduce.noname.{i}.{j}', v)
                            for i, param_group in enumerate(opt.param_groups)
                            for j, v in enumerate(param_group['params'])]
    return [(id(v), k) for k, v in sorted(named_parameters, key=lambda kv: kv[0])]


def test_parameter_names_without_named_parameters(hvd):
    # Two groups, twelve parameters in the first (names then sort as
    # strings: 'allreduce.noname.0.10' before '...0.2'), a frozen one too.
    layers = [torch.nn.Linear(2, 2) for _ in range(7)]
    layers[1].bias.requires_grad_(False)
    first = [p for layer in layers[:6] for p in layer.parameters()]
    opt = torch.optim.SGD([{"params": first}, {"params": list(layers[6].parameters())}],
                          lr=LR)
    opt = hvd.DistributedOptimizer(opt)
    got = [(id(p), name) for p, name in opt._parameter_names.items()]
    assert got == _horovod_parameter_names(opt)


def test_parameter_names_with_named_parameters(hvd):
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
    frozen_out = model[1].weight  # named, but not in the optimizer
    opt = torch.optim.SGD([p for p in model.parameters() if p is not frozen_out], lr=LR)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    got = [(id(p), name) for p, name in opt._parameter_names.items()]
    assert got == _horovod_parameter_names(opt, list(model.named_parameters()))
