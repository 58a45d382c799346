"""SyncBatchNorm on 2 and 3 ranks against torch's BatchNorm on the whole
batch: each rank holds a slice of one global batch (equal, unequal, or with
an empty slice) and recomputes the single-process result locally."""

import pytest
import torch

import plait.torch as hvd_module

C = 3
TOL = dict(rtol=1e-9, atol=1e-10)


def slices(kind, n):
    """Rows of the global batch held by each rank."""
    counts = {"equal": [4] * n,
              "unequal": [2 + 3 * r for r in range(n)],
              "one_empty": [0] + [3] * (n - 1)}[kind]
    starts = [sum(counts[:r]) for r in range(n)]
    return [slice(s, s + c) for s, c in zip(starts, counts)], sum(counts)


def reference_bn(dims, **kwargs):
    cls = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d}[dims]
    return cls(C, **kwargs).double()


def init_affine(*modules):
    g = torch.Generator().manual_seed(5)
    w = torch.rand(C, generator=g, dtype=torch.float64) + 0.5
    b = torch.randn(C, generator=g, dtype=torch.float64)
    for m in modules:
        if m.weight is not None:
            with torch.no_grad():
                m.weight.copy_(w)
                m.bias.copy_(b)


def batch(step, rows, dims):
    g = torch.Generator().manual_seed(100 + step)
    shape = (rows, C) + {2: (), 3: (5,), 4: (2, 3)}[dims]
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 2 + 3
    # A fixed random weighting of the outputs, so that the input gradient
    # is not trivially zero (as it would be for a plain sum).
    w = torch.randn(shape, generator=g, dtype=torch.float64)
    return x, w


@pytest.mark.parametrize("dims", [2, 3, 4])
@pytest.mark.parametrize("kind", ["equal", "unequal", "one_empty"])
def test_matches_batch_norm_on_the_whole_batch(hvd, kind, dims):
    mine, rows = slices(kind, hvd.size())
    mine = mine[hvd.rank()]
    sbn = hvd.SyncBatchNorm(C).double()
    ref = reference_bn(dims)
    init_affine(sbn, ref)
    for step in range(2):
        x, w = batch(step, rows, dims)
        xs = x[mine].clone().requires_grad_()
        y = sbn(xs)
        (y * w[mine]).sum().backward()
        xr = x.clone().requires_grad_()
        yr = ref(xr)
        (yr * w).sum().backward()
        torch.testing.assert_close(y, yr[mine], **TOL)
        torch.testing.assert_close(xs.grad, xr.grad[mine], **TOL)
        # weight/bias gradients: this rank's share; the shares sum to the whole.
        for name in ("weight", "bias"):
            total = hvd.allreduce(getattr(sbn, name).grad, op=hvd.Sum,
                                  name="check.sbn.%s.%s.%d.%s" % (kind, dims, step, name))
            torch.testing.assert_close(total, getattr(ref, name).grad, **TOL)
        sbn.zero_grad()
        ref.zero_grad()
        torch.testing.assert_close(sbn.running_mean, ref.running_mean, **TOL)
        torch.testing.assert_close(sbn.running_var, ref.running_var, **TOL)
        assert int(sbn.num_batches_tracked) == step + 1
    # Eval mode: plain batch norm with the running statistics.
    sbn.eval()
    ref.eval()
    x, _ = batch(9, 4 + hvd.rank(), dims)
    torch.testing.assert_close(sbn(x), ref(x), **TOL)


def test_momentum_none_affine_false(hvd):
    mine, rows = slices("unequal", hvd.size())
    mine = mine[hvd.rank()]
    sbn = hvd.SyncBatchNorm(C, momentum=None, affine=False).double()
    ref = reference_bn(4, momentum=None, affine=False)
    assert sbn.weight is None
    for step in range(3):
        x, w = batch(step, rows, 4)
        xs = x[mine].clone().requires_grad_()
        (sbn(xs) * w[mine]).sum().backward()
        xr = x.clone().requires_grad_()
        (ref(xr) * w).sum().backward()
        torch.testing.assert_close(xs.grad, xr.grad[mine], **TOL)
    torch.testing.assert_close(sbn.running_mean, ref.running_mean, **TOL)
    torch.testing.assert_close(sbn.running_var, ref.running_var, **TOL)


def test_without_running_stats_syncs_in_eval(hvd):
    mine, rows = slices("equal", hvd.size())
    mine = mine[hvd.rank()]
    sbn = hvd.SyncBatchNorm(C, track_running_stats=False).double().eval()
    ref = reference_bn(2, track_running_stats=False).eval()
    init_affine(sbn, ref)
    x, _ = batch(3, rows, 2)
    torch.testing.assert_close(sbn(x[mine]), ref(x)[mine], **TOL)


def test_float32_and_local_differs(hvd):
    # float32 input, and a check that the result is not just local batch norm.
    mine, rows = slices("unequal", hvd.size())
    mine = mine[hvd.rank()]
    sbn = hvd.SyncBatchNorm(C)
    ref = torch.nn.BatchNorm1d(C)
    x, _ = batch(4, rows, 2)
    x = x.float()
    y = sbn(x[mine])
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, ref(x)[mine], rtol=1e-5, atol=1e-5)
    local = torch.nn.BatchNorm1d(C)(x[mine])
    assert not torch.allclose(y, local, rtol=1e-3, atol=1e-3)


def test_errors(hvd):
    sbn = hvd.SyncBatchNorm(C)
    with pytest.raises(ValueError, match="at least 2D"):
        sbn(torch.zeros(C))
    with pytest.raises(ValueError, match="expected 3 channels"):
        sbn(torch.zeros(4, C + 1))
    # One value per channel over all ranks: every rank raises.
    x = torch.zeros(1 if hvd.rank() == 0 else 0, C)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        sbn(x)


def test_is_a_batch_norm_module():
    assert issubclass(hvd_module.SyncBatchNorm, torch.nn.modules.batchnorm._BatchNorm)
