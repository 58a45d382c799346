"""grouped_allreduce (+ in place, async), grouped_allgather and
grouped_reducescatter: one list of tensors negotiated and completed
together, each tensor reduced as its own operation would be."""

import pytest
import torch

import hvd_expected as hn


def group(r):
    # Several shapes and two dtypes in one group.
    return [torch.arange(6.0).reshape(2, 3) - 2 + r * r,
            torch.tensor([5.0, -1.0]) * (r + 1),
            torch.arange(10, dtype=torch.float64) - r,
            torch.tensor(3.0 + r)]


@pytest.mark.parametrize("opname", ["Sum", "Average", "Min", "Max", "Product"])
def test_grouped_allreduce(hvd, opname):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()
    groups = [group(r) for r in range(n)]
    expected = [hn.allreduce(hvd, [g[i] for g in groups], op) for i in range(4)]
    mine = group(me)
    name = "gar." + opname

    outs = hvd.grouped_allreduce(mine, op=op, name=name)
    assert isinstance(outs, list) and len(outs) == 4
    for o, e in zip(outs, expected):
        assert o.dtype == e.dtype and torch.equal(o, e), (o, e)
    for t, o in zip(mine, group(me)):
        assert torch.equal(t, o)

    outs = hvd.synchronize(hvd.grouped_allreduce_async(mine, op=op, name=name))
    assert all(torch.equal(o, e) for o, e in zip(outs, expected))

    ys = group(me)
    hvd.grouped_allreduce_(ys, op=op, name=name)
    assert all(torch.equal(y, e) for y, e in zip(ys, expected))

    ys = group(me)
    hvd.synchronize(hvd.grouped_allreduce_async_(ys, op=op, name=name))
    assert all(torch.equal(y, e) for y, e in zip(ys, expected))


def test_grouped_allreduce_default_and_unnamed(hvd):
    n = hvd.size()
    groups = [group(r) for r in range(n)]
    outs = hvd.grouped_allreduce(group(hvd.rank()))
    for i, o in enumerate(outs):
        assert torch.equal(o, hn.allreduce(hvd, [g[i] for g in groups], hvd.Average))


def test_grouped_allgather(hvd):
    n, me = hvd.size(), hvd.rank()

    def parts(r):
        return [torch.full((r + 1, 2), float(r)), torch.arange(3 * (2 - r % 2)).to(torch.int32) + r,
                torch.full((1,), r, dtype=torch.uint8)]

    expected = [torch.cat([parts(r)[i] for r in range(n)]) for i in range(3)]
    outs = hvd.grouped_allgather(parts(me), name="gag")
    assert len(outs) == 3
    for o, e in zip(outs, expected):
        assert o.dtype == e.dtype and torch.equal(o, e)
    outs = hvd.synchronize(hvd.grouped_allgather_async(parts(me), name="gag"))
    assert all(torch.equal(o, e) for o, e in zip(outs, expected))


@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_grouped_reducescatter(hvd, opname):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()

    def parts(r):
        return [torch.arange(2.0 * n * 3).reshape(2 * n, 3) + r,
                torch.arange(2 * n + 1, dtype=torch.int32) * (r + 1) - 3,
                torch.arange(float(n), dtype=torch.float64) - r]

    groups = [parts(r) for r in range(n)]
    expected = [hn.reducescatter(hvd, [g[i] for g in groups], op, me) for i in range(3)]
    outs = hvd.grouped_reducescatter(parts(me), op=op, name="grs." + opname)
    for o, e in zip(outs, expected):
        assert o.dtype == e.dtype and torch.equal(o, e), (o, e)
    outs = hvd.synchronize(hvd.grouped_reducescatter_async(parts(me), op=op,
                                                           name="grs." + opname))
    assert all(torch.equal(o, e) for o, e in zip(outs, expected))
