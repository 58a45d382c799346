"""prescale_factor and postscale_factor, exact: Horovod scales integers in
double and truncates, float16 in float32 (horovod_numerics.py); Average is a
postscale by 1 / size computed in double. Results are compared with
torch.equal."""

import pytest
import torch

import hvd_expected as hn

DTYPES = [torch.int32, torch.int64, torch.float16, torch.float32, torch.float64]
FACTORS = [(0.5, 1.0), (1.0, 0.3), (0.37, 2.9), (-1.5, 0.1), (3.0, 1.0 / 3.0)]
BASE = torch.tensor([-7, -3, -1, 0, 1, 2, 5, 7, 11, 100])


def dname(dtype):
    return str(dtype).replace("torch.", "")


def rank_input(r, dtype):
    # Floating point: the same input on every rank, so that the sum of the
    # scaled values (v + v exact, then one rounding) is the same whatever
    # order the ranks are added in. Integers differ by rank.
    if dtype.is_floating_point:
        return BASE.to(dtype)
    return (BASE + r * r).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("opname", ["Sum", "Average"])
@pytest.mark.parametrize("pre,post", FACTORS, ids=lambda f: repr(f))
def test_allreduce_scaled(hvd, dtype, opname, pre, post):
    op = getattr(hvd, opname)
    xs = [rank_input(r, dtype) for r in range(hvd.size())]
    expected = hn.allreduce(hvd, xs, op, pre, post)
    mine = xs[hvd.rank()].clone()
    name = "scale.%s.%s.%r.%r" % (opname, dname(dtype), pre, post)
    out = hvd.allreduce(mine, op=op, prescale_factor=pre, postscale_factor=post, name=name)
    assert out.dtype == dtype
    assert torch.equal(out, expected), (out, expected)
    y = mine.clone()
    hvd.allreduce_(y, op=op, prescale_factor=pre, postscale_factor=post, name=name)
    assert torch.equal(y, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
def test_grouped_allreduce_scaled(hvd, dtype):
    xs = [rank_input(r, dtype) for r in range(hvd.size())]
    pre, post = 0.37, 2.9
    expected = hn.allreduce(hvd, xs, hvd.Average, pre, post)
    mine = xs[hvd.rank()]
    outs = hvd.grouped_allreduce([mine, mine[:3].clone()], op=hvd.Average,
                                 prescale_factor=pre, postscale_factor=post,
                                 name="gscale." + dname(dtype))
    assert torch.equal(outs[0], expected) and torch.equal(outs[1], expected[:3])


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_reducescatter_scaled(hvd, dtype, opname):
    n = hvd.size()
    op = getattr(hvd, opname)
    xs = [rank_input(r, dtype)[:2 * n + 1] for r in range(n)]
    pre, post = 0.37, 2.9
    expected = hn.reducescatter(hvd, xs, op, hvd.rank(), pre, post)
    out = hvd.reducescatter(xs[hvd.rank()], op=op, prescale_factor=pre,
                            postscale_factor=post, name="rsscale.%s.%s" % (opname, dname(dtype)))
    assert torch.equal(out, expected), (out, expected)


def test_int64_average_goes_through_double(hvd):
    # Horovod averages int64 by multiplying with 1 / size in double: values
    # above 2**53 lose their low bits.
    n = hvd.size()
    xs = [torch.tensor([2 ** 60 + r, -(2 ** 55) - 3 * r, 7 + r]) for r in range(n)]
    expected = hn.allreduce(hvd, xs, hvd.Average)
    out = hvd.allreduce(xs[hvd.rank()], op=hvd.Average, name="int64.avg")
    assert torch.equal(out, expected), (out, expected)


def test_float16_overflow_to_inf(hvd):
    n = hvd.size()
    x = torch.tensor([40000.0, -40000.0, 1.0], dtype=torch.float16)
    out = hvd.allreduce(x, op=hvd.Sum, name="f16.inf")
    assert out[0] == float("inf") and out[1] == float("-inf") and out[2] == n
    out = hvd.allreduce(torch.tensor([1000.0], dtype=torch.float16), op=hvd.Sum,
                        prescale_factor=100.0, name="f16.inf.pre")
    assert out[0] == float("inf")
