"""DistributedOptimizer on 2 and 3 ranks against single-process training.

Every rank trains the same small float64 model on its shard of a global
batch and also trains a reference copy, alone, on the whole batch: with
equal shards, the average over ranks of the per-shard mean losses is the
mean loss over the whole batch, so the two must agree to rounding. The
distributed parameters must moreover be bitwise identical on all ranks.
"""

import copy
import warnings

import pytest
import torch

FEATURES, OUTPUTS, PER_RANK = 4, 2, 3


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 5), torch.nn.Tanh(),
                               torch.nn.Linear(5, OUTPUTS)).double()


def global_batch(step, n, per_rank=PER_RANK):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(n * per_rank, FEATURES, generator=g, dtype=torch.float64)
    y = torch.randn(n * per_rank, OUTPUTS, generator=g, dtype=torch.float64)
    return x, y


def shard(hvd, t):
    per = t.shape[0] // hvd.size()
    return t[hvd.rank() * per:(hvd.rank() + 1) * per]


def mse(model, x, y):
    return ((model(x) - y) ** 2).mean()


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def adam(params):
    return torch.optim.Adam(params, lr=0.05)


def train_pair(hvd, opt_factory, steps=3, loss_scale=1.0, **kwargs):
    """(distributed model, reference model) after `steps` steps."""
    model = make_model()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(opt_factory(model.parameters()),
                                   named_parameters=model.named_parameters(), **kwargs)
    ref_opt = opt_factory(ref.parameters())
    for s in range(steps):
        step_pair(hvd, s, model, opt, ref, ref_opt, loss_scale)
    return model, ref


def step_pair(hvd, s, model, opt, ref, ref_opt, loss_scale=1.0):
    """Step s: the distributed model on this rank's shard of the global
    batch, the reference on the whole batch."""
    x, y = global_batch(s, hvd.size())
    opt.zero_grad()
    mse(model, shard(hvd, x), shard(hvd, y)).backward()
    opt.step()
    ref_opt.zero_grad()
    (loss_scale * mse(ref, x, y)).backward()
    ref_opt.step()


def assert_identical_on_all_ranks(hvd, model, tag):
    for name, p in model.named_parameters():
        lo = hvd.allreduce(p.detach(), op=hvd.Min, name="check.%s.min.%s" % (tag, name))
        hi = hvd.allreduce(p.detach(), op=hvd.Max, name="check.%s.max.%s" % (tag, name))
        assert torch.equal(lo, p.detach()) and torch.equal(hi, p.detach()), name


def assert_close_models(model, ref, tol=1e-10):
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=tol, atol=tol, msg=name)


def assert_differs(model, ref):
    assert any(not torch.allclose(p, q) for p, q in zip(model.parameters(), ref.parameters()))


# ----------------------------------------------------------------------------


@pytest.mark.parametrize("factory", [sgd, adam], ids=["sgd_momentum", "adam"])
def test_matches_single_process(hvd, factory):
    model, ref = train_pair(hvd, factory)
    assert_close_models(model, ref)
    assert_identical_on_all_ranks(hvd, model, factory.__name__)
    # The comparison can fail: the untrained model is far from both.
    assert_differs(make_model(), ref)


def test_is_the_wrapped_optimizers_class_and_state(hvd):
    model = make_model()
    base = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # State the optimizer holds before wrapping is kept (Horovod loses it).
    x, y = global_batch(0, hvd.size())
    mse(model, x, y).backward()
    base.step()
    base.zero_grad()
    buffers = [base.state[p]['momentum_buffer'].clone() for p in model.parameters()]
    opt = hvd.DistributedOptimizer(base, named_parameters=model.named_parameters())
    assert isinstance(opt, torch.optim.SGD) and type(opt).__name__ == "SGD"
    assert opt.param_groups is base.param_groups and opt.state is base.state
    for b, p in zip(buffers, model.parameters()):
        assert torch.equal(opt.state[p]['momentum_buffer'], b)
    sd = opt.state_dict()
    assert set(sd) == {'state', 'param_groups'} and len(sd['state']) == 4
    opt.load_state_dict(sd)
    # A learning-rate scheduler accepts it and steps it.
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    mse(model, shard(hvd, x), shard(hvd, y)).backward()
    opt.step()
    sched.step()
    assert opt.param_groups[0]['lr'] == pytest.approx(0.05)
    assert_identical_on_all_ranks(hvd, model, "wrapped")


def test_scheduler_made_before_wrapping(hvd):
    # The scheduler's step counter on the old optimizer must not replace the
    # wrapper's step() (which would then skip the allreduce).
    model = make_model()
    ref = copy.deepcopy(model)
    base = sgd(model.parameters())
    sched = torch.optim.lr_scheduler.StepLR(base, step_size=1, gamma=0.5)
    opt = hvd.DistributedOptimizer(base, named_parameters=model.named_parameters())
    ref_opt = sgd(ref.parameters())
    ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=1, gamma=0.5)
    for s in range(2):
        step_pair(hvd, s, model, opt, ref, ref_opt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()"
            sched.step()
        ref_sched.step()
    assert opt.param_groups[0]['lr'] == pytest.approx(0.025)
    assert_close_models(model, ref)


def test_op_sum(hvd):
    # Sum over ranks of the shard means = size * (mean over the whole batch).
    model, ref = train_pair(hvd, sgd, op=hvd.Sum, loss_scale=hvd.size())
    assert_close_models(model, ref)


def test_without_named_parameters(hvd):
    model = make_model()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(sgd(model.parameters()))
    ref_opt = sgd(ref.parameters())
    for s in range(2):
        x, y = global_batch(s, hvd.size())
        opt.zero_grad()
        mse(model, shard(hvd, x), shard(hvd, y)).backward()
        # An unnamed allreduce of the user's while the gradients are in
        # flight: its automatic name must not clash with theirs.
        hvd.allreduce(torch.ones(1))
        opt.step()
        ref_opt.zero_grad()
        mse(ref, x, y).backward()
        ref_opt.step()
    assert_close_models(model, ref)


def test_backward_passes_per_step(hvd):
    model = make_model()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(sgd(model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    ref_opt = sgd(ref.parameters())
    for s in range(2):
        opt.zero_grad()
        ref_opt.zero_grad()
        for micro in range(2):
            x, y = global_batch(10 * s + micro, hvd.size())
            mse(model, shard(hvd, x), shard(hvd, y)).backward()
            mse(ref, x, y).backward()  # accumulates, as the ranks do locally
        opt.step()
        ref_opt.step()
    assert_close_models(model, ref)
    assert_identical_on_all_ranks(hvd, model, "bpps")


def test_too_many_backward_passes_raises(hvd):
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    x, y = global_batch(0, hvd.size())
    for _ in range(2):
        mse(model, x, y).backward()
    with pytest.raises(AssertionError, match="more than backward_passes_per_step"):
        mse(model, x, y).backward()
    opt.synchronize()  # what was submitted completes; the ranks stay matched
    opt.zero_grad()


@pytest.mark.parametrize("groups", ["int2", "num_groups3", "lists"])
def test_groups(hvd, groups):
    model = make_model()
    l1, l2 = model[0], model[2]
    kwargs = {"int2": {"groups": 2}, "num_groups3": {"num_groups": 3},
              "lists": {"groups": [[l1.weight, l2.weight], [l1.bias]]}}[groups]
    ref = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        opt = hvd.DistributedOptimizer(adam(model.parameters()),
                                       named_parameters=model.named_parameters(), **kwargs)
    ref_opt = adam(ref.parameters())
    units = opt._plait_units
    expected = {"int2": [2, 2], "num_groups3": [2, 1, 1], "lists": [2, 1, 1]}[groups]
    assert [len(u) for u in units] == expected
    for s in range(3):
        step_pair(hvd, s, model, opt, ref, ref_opt)
    assert_close_models(model, ref)
    assert_identical_on_all_ranks(hvd, model, "groups_" + groups)


def test_gradient_predivide_factor(hvd):
    model, ref = train_pair(hvd, sgd, gradient_predivide_factor=4.0)
    assert_close_models(model, ref)


def test_fp16_compression(hvd):
    model, ref = train_pair(hvd, sgd, compression=hvd.Compression.fp16)
    assert_close_models(model, ref, tol=2e-3)
    assert_identical_on_all_ranks(hvd, model, "fp16")
    for p in model.parameters():
        assert p.dtype == torch.float64 and p.grad.dtype == torch.float64


def test_argument_errors(hvd):
    model = make_model()
    named = list(model.named_parameters())
    opt = lambda: sgd(model.parameters())  # noqa: E731
    with pytest.raises(ValueError, match="unique.*0.weight"):
        hvd.DistributedOptimizer(opt(), named_parameters=[named[0], ("0.weight", named[1][1])]
                                 + named[2:])
    with pytest.raises(ValueError, match=r"1 parameter\(s\) of the optimizer are not named.*"
                                         r"param_groups\[0\]\['params'\]\[3\]"):
        hvd.DistributedOptimizer(opt(), named_parameters=named[:3])
    with pytest.raises(ValueError, match="tuples"):
        hvd.DistributedOptimizer(opt(), named_parameters=[p for _, p in named])
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.DistributedOptimizer(opt(), op=hvd.Adasum)
    with pytest.raises(ValueError, match="op != Average"):
        hvd.DistributedOptimizer(opt(), op=hvd.Sum, gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        hvd.DistributedOptimizer(opt(), backward_passes_per_step=0)
    with pytest.raises(ValueError, match="once in groups"):
        hvd.DistributedOptimizer(opt(), groups=[[named[0][1]], [named[0][1]]])
    with pytest.raises(ValueError, match="not a parameter of the optimizer"):
        hvd.DistributedOptimizer(opt(), groups=[[torch.zeros(2, requires_grad=True)]])
    with pytest.raises(ValueError, match="positive int"):
        hvd.DistributedOptimizer(opt(), groups=-1)
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        hvd.DistributedOptimizer(model)
    dist = hvd.DistributedOptimizer(opt())
    with pytest.raises(ValueError, match="already a DistributedOptimizer"):
        hvd.DistributedOptimizer(dist)


def test_named_parameters_beyond_the_optimizer(hvd):
    # As in Horovod: an optimizer over part of the model (frozen layers left
    # out) with the whole model's named_parameters trains that part.
    model = make_model()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(sgd(model[2].parameters()),
                                   named_parameters=model.named_parameters())
    ref_opt = sgd(ref[2].parameters())
    x, y = global_batch(0, hvd.size())
    mse(model, shard(hvd, x), shard(hvd, y)).backward()
    opt.step()
    mse(ref, x, y).backward()
    ref_opt.step()
    assert_close_models(model[2], ref[2])


class Branchy(torch.nn.Module):
    """A model whose `extra` layer is used only when asked to."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.body = torch.nn.Linear(FEATURES, OUTPUTS)
        self.extra = torch.nn.Linear(OUTPUTS, OUTPUTS)
        self.double()

    def forward(self, x, use_extra):
        h = self.body(x)
        return self.extra(h) if use_extra else h


def test_unused_parameters_are_filled_with_zeros(hvd):
    # Step 0: only rank 0 uses `extra` (the others have no gradient for it);
    # step 1: no rank does; step 2: all do. Reference: the mean over ranks of each shard's
    # loss, each shard with its rank's forward.
    n = hvd.size()
    model = Branchy()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for s in range(3):
        x, y = global_batch(s, n)
        uses = [s == 0 and r == 0 or s == 2 for r in range(n)]
        opt.zero_grad()
        loss = ((model(shard(hvd, x), uses[hvd.rank()]) - shard(hvd, y)) ** 2).mean()
        loss.backward()
        opt.step()
        ref_opt.zero_grad()
        ref_loss = sum(((ref(x[r * PER_RANK:(r + 1) * PER_RANK], uses[r])
                         - y[r * PER_RANK:(r + 1) * PER_RANK]) ** 2).mean()
                       for r in range(n)) / n
        ref_loss.backward()
        # Horovod's semantics: a gradient that no rank computed is reduced
        # as zeros (so momentum still moves it, even where zero_grad() set
        # gradients to None).
        for p in ref.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        ref_opt.step()
    assert_close_models(model, ref)
    assert_identical_on_all_ranks(hvd, model, "branchy")


def test_synchronize_clip_skip_synchronize(hvd):
    model = make_model()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(sgd(model.parameters()),
                                   named_parameters=model.named_parameters())
    ref_opt = sgd(ref.parameters())
    for s in range(2):
        x, y = global_batch(s, hvd.size())
        opt.zero_grad()
        mse(model, shard(hvd, x), shard(hvd, y)).backward()
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "step() after synchronize()" warning
            with opt.skip_synchronize():
                opt.step()
        ref_opt.zero_grad()
        mse(ref, x, y).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.1)
        ref_opt.step()
    assert_close_models(model, ref)


def test_step_after_synchronize_warns(hvd):
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model.parameters()),
                                   named_parameters=model.named_parameters())
    x, y = global_batch(0, hvd.size())
    mse(model, shard(hvd, x), shard(hvd, y)).backward()
    opt.synchronize()
    with pytest.warns(UserWarning, match="skip_synchronize"):
        opt.step()  # reduces the already reduced gradients once more
    assert_identical_on_all_ranks(hvd, model, "warns")


def test_zero_grad_while_in_flight_raises(hvd):
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model.parameters()),
                                   named_parameters=model.named_parameters())
    x, y = global_batch(0, hvd.size())
    mse(model, shard(hvd, x), shard(hvd, y)).backward()
    assert len(opt._plait_handles) == 4  # every allreduce started during backward
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.synchronize()
    opt.zero_grad()


class Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.emb = torch.nn.Embedding(10, 3, sparse=True).double()

    def forward(self, idx):
        return self.emb(idx).sum(1)


def local_sparse_grads(n, idx, target, per):
    """Every rank's own (unreduced) sparse gradient of Bag's embedding."""
    grads = []
    for k in range(n):
        m = Bag()
        sl = slice(k * per, (k + 1) * per)
        ((m(idx[sl]) - target[sl]) ** 2).mean().backward()
        grads.append(m.emb.weight.grad)
    return grads


def test_sparse_gradients_as_horovod(hvd):
    """Without sparse_as_dense, Horovod allgathers every rank's indices and
    values (values / size for Average) and p.grad becomes that sparse sum."""
    n, r = hvd.size(), hvd.rank()
    g = torch.Generator().manual_seed(7)
    idx = torch.randint(0, 10, (n * 2, 4), generator=g)
    target = torch.randn(n * 2, 3, generator=g, dtype=torch.float64)
    mine = slice(r * 2, r * 2 + 2)
    for op in ("Average", "Sum"):
        model = Bag()
        ref = copy.deepcopy(model)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                       named_parameters=model.named_parameters(),
                                       op=getattr(hvd, op))
        ((model(idx[mine]) - target[mine]) ** 2).mean().backward()
        opt.step()
        grad = model.emb.weight.grad
        assert grad.is_sparse
        local = local_sparse_grads(n, idx, target, 2)
        values = torch.cat([t._values() for t in local])
        if op == "Average":
            values = values / n
        want = torch.sparse_coo_tensor(torch.cat([t._indices() for t in local], 1), values,
                                       grad.shape)
        torch.testing.assert_close(grad.to_dense(), want.to_dense(), rtol=0, atol=0)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
        loss = ((ref(idx) - target) ** 2).mean()
        (loss * (n if op == "Sum" else 1)).backward()
        ref_opt.step()
        assert_close_models(model, ref)


def test_sparse_gradients_in_a_group_refused(hvd):
    model = Bag()
    lin = torch.nn.Linear(3, 1).double()
    params = list(model.parameters()) + list(lin.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.5), groups=[params])
    idx = torch.zeros(1, 4, dtype=torch.int64)
    with pytest.raises(ValueError, match="sparse gradient.*in a group"):
        lin(model(idx)).sum().backward()
    opt._plait_reset()


def test_sparse_gradients_as_dense(hvd):
    n = hvd.size()
    g = torch.Generator().manual_seed(7)
    idx = torch.randint(0, 10, (n * 2, 4), generator=g)
    target = torch.randn(n * 2, 3, generator=g, dtype=torch.float64)
    mine = slice(hvd.rank() * 2, hvd.rank() * 2 + 2)
    model = Bag()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                   named_parameters=model.named_parameters(),
                                   sparse_as_dense=True)
    ((model(idx[mine]) - target[mine]) ** 2).mean().backward()
    opt.step()
    assert model.emb.weight.grad.is_sparse
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    ((ref(idx) - target) ** 2).mean().backward()
    ref_opt.step()
    assert_close_models(model, ref)
