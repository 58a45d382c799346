"""plait.mxnet operations: every op x dtype x in place / out of place, with
exact checks against what each rank contributed."""

import mxnet as mx
import numpy as np
import pytest

from mxutil import DTYPES, nd, rank_values, scale, values

FLOATS = ("float32", "float64", "float16", "bfloat16")


def _ops(hvd):
    return {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max,
            "Product": hvd.Product}


def _expected(hvd, opname, dtype, shape):
    n = hvd.size()
    per_rank = [np.asarray(rank_values(r, shape, dtype)) for r in range(n)]
    if dtype == "bool":
        stack = np.stack(per_rank)
        return {"Sum": stack.any(0), "Max": stack.any(0), "Min": stack.all(0),
                "Product": stack.all(0)}[opname]
    wide = np.stack([p.astype(np.float64 if dtype in FLOATS else np.int64) for p in per_rank])
    if opname == "Sum":
        return wide.sum(0)
    if opname == "Average":
        return scale(wide.sum(0), 1.0 / n, dtype)
    if opname == "Min":
        return wide.min(0)
    if opname == "Max":
        return wide.max(0)
    return wide.prod(0)


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("opname", ["Sum", "Average", "Min", "Max", "Product"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce(hvd, dtype, opname, in_place):
    shape = (3, 5)
    src = rank_values(hvd.rank(), shape, dtype)
    x = nd(src, dtype)
    op = _ops(hvd)[opname]
    if dtype == "bool" and opname == "Average":
        with pytest.raises(ValueError, match="Average of a bool"):
            hvd.allreduce(x, op=op, name="bad")
        return
    name = "ar.%s.%s.%s" % (dtype, opname, in_place)
    if in_place:
        out = hvd.allreduce_(x, op=op, name=name)
        assert out is x
    else:
        out = hvd.allreduce(x, op=op, name=name)
        assert out is not x
        np.testing.assert_array_equal(values(x), np.asarray(values(nd(src, dtype))))
    assert out.dtype == x.dtype and out.shape == x.shape
    got = values(out)
    np.testing.assert_array_equal(got, _expected(hvd, opname, dtype, shape).astype(got.dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8"])
def test_prescale_postscale(hvd, dtype):
    n = hvd.size()
    src = rank_values(hvd.rank(), (7,), dtype)
    out = hvd.allreduce(nd(src, dtype), op=hvd.Sum, prescale_factor=2.5, postscale_factor=0.5,
                        name="scaled." + dtype)
    pre = [scale(rank_values(r, (7,), dtype), 2.5, dtype) for r in range(n)]
    total = np.sum([np.asarray(p, dtype=np.float64) for p in pre], axis=0)
    expected = scale(total, 0.5, dtype)
    np.testing.assert_array_equal(values(out), np.asarray(expected).astype(values(out).dtype))


def test_average_is_default_and_average_keyword(hvd):
    n = hvd.size()
    x = mx.nd.ones((4,)) * (hvd.rank() + 1)
    avg = (n + 1) / 2.0
    np.testing.assert_allclose(hvd.allreduce(x, name="dflt").asnumpy(), avg)
    with pytest.warns(DeprecationWarning):
        s = hvd.allreduce(x, average=False, name="kw")
    np.testing.assert_array_equal(s.asnumpy(), n * (n + 1) / 2.0)
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(x, average=True, op=hvd.Sum)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(x, op=hvd.Adasum)


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "inplace"])
def test_grouped_allreduce(hvd, in_place):
    n, r = hvd.size(), hvd.rank()
    dtypes = ["float32", "int32", "float64", "float16"]
    srcs = [rank_values(r, (i + 2, 3), d) for i, d in enumerate(dtypes)]
    xs = [nd(s, d) for s, d in zip(srcs, dtypes)]
    fn = hvd.grouped_allreduce_ if in_place else hvd.grouped_allreduce
    outs = fn(xs, op=hvd.Sum, name="group.%s" % in_place)
    assert len(outs) == len(xs)
    if in_place:
        assert all(o is x for o, x in zip(outs, xs))
    for i, (o, d) in enumerate(zip(outs, dtypes)):
        expected = np.sum([np.asarray(rank_values(q, (i + 2, 3), d), dtype=np.float64)
                           for q in range(n)], axis=0)
        np.testing.assert_array_equal(values(o), expected.astype(values(o).dtype))
    assert fn([], name="empty") == []


@pytest.mark.parametrize("dtype", DTYPES)
def test_allgather(hvd, dtype):
    n, r = hvd.size(), hvd.rank()
    src = rank_values(r, (r + 1, 2), dtype)  # a different first dimension per rank
    out = hvd.allgather(nd(src, dtype), name="ag." + dtype)
    expected = np.concatenate([np.asarray(rank_values(q, (q + 1, 2), dtype)) for q in range(n)])
    assert out.dtype == nd(src, dtype).dtype
    assert out.shape == expected.shape
    got = values(out)
    np.testing.assert_array_equal(got, values(nd(expected, dtype)))


def test_grouped_allgather(hvd):
    n, r = hvd.size(), hvd.rank()
    outs = hvd.grouped_allgather([mx.nd.ones((r + 1,)) * r, mx.nd.ones((1, 2)) * r],
                                 name="gag")
    np.testing.assert_array_equal(outs[0].asnumpy(),
                                  np.concatenate([np.full(q + 1, q) for q in range(n)]))
    np.testing.assert_array_equal(outs[1].asnumpy(), np.repeat(np.arange(n), 2).reshape(n, 2))


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast(hvd, dtype, in_place):
    n, r = hvd.size(), hvd.rank()
    root = n - 1
    src = rank_values(r, (2, 3), dtype)
    x = nd(src, dtype)
    name = "bc.%s.%s" % (dtype, in_place)
    if in_place:
        out = hvd.broadcast_(x, root, name=name)
        assert out is x
    else:
        out = hvd.broadcast(x, root, name=name)
        assert out is not x
        np.testing.assert_array_equal(values(x), values(nd(src, dtype)))
    np.testing.assert_array_equal(values(out), values(nd(rank_values(root, (2, 3), dtype),
                                                         dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_alltoall(hvd, dtype):
    n, r = hvd.size(), hvd.rank()
    # rank r sends q + 1 rows to rank q; row values say who sent them
    splits = [q + 1 for q in range(n)]
    rows = sum(splits)
    src = np.stack([rank_values(r, (2,), dtype)] * rows)
    out, received = hvd.alltoall(nd(src, dtype), splits=splits, name="a2a." + dtype)
    assert received.dtype == np.int32
    np.testing.assert_array_equal(received.asnumpy(), [r + 1] * n)
    expected = np.concatenate([np.stack([rank_values(q, (2,), dtype)] * (r + 1))
                               for q in range(n)])
    np.testing.assert_array_equal(values(out), values(nd(expected, dtype)))


def test_alltoall_equal_splits_and_ndarray_splits(hvd):
    n, r = hvd.size(), hvd.rank()
    x = mx.nd.arange(2 * n) + 100 * r
    out = hvd.alltoall(x, name="a2a.eq")
    expected = np.concatenate([np.arange(2 * r, 2 * r + 2) + 100 * q for q in range(n)])
    np.testing.assert_array_equal(out.asnumpy(), expected)
    out2, rec = hvd.alltoall(x, splits=mx.nd.array([2] * n, dtype="int32"), name="a2a.nd")
    np.testing.assert_array_equal(out2.asnumpy(), expected)
    with pytest.raises(ValueError, match="divide"):
        hvd.alltoall(mx.nd.ones((n + 1,)), name="a2a.bad")


@pytest.mark.parametrize("opname", ["Sum", "Average"])
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bool"])
def test_reducescatter(hvd, dtype, opname):
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # uneven: the first rows % n ranks get one more
    shape = (rows, 2)
    op = _ops(hvd)[opname]
    out = hvd.reducescatter(nd(rank_values(r, shape, dtype), dtype), op=op,
                            name="rs.%s.%s" % (dtype, opname))
    full = _expected(hvd, opname, dtype, shape)
    counts = [rows // n + (1 if q < rows % n else 0) for q in range(n)]
    start = sum(counts[:r])
    mine = np.asarray(full)[start:start + counts[r]]
    got = values(out)
    np.testing.assert_array_equal(got, mine.astype(got.dtype))


def test_reducescatter_refuses(hvd):
    with pytest.raises(ValueError):
        hvd.reducescatter(mx.nd.ones((4,)), op=hvd.Max)
    with pytest.raises(ValueError, match="bool"):
        hvd.reducescatter(mx.nd.ones((4,), dtype="bool"), op=hvd.Average)


def test_grouped_reducescatter(hvd):
    n = hvd.size()
    outs = hvd.grouped_reducescatter([mx.nd.ones((n, 2)), mx.nd.ones((2 * n,)) * 2],
                                     op=hvd.Sum, name="grs")
    np.testing.assert_array_equal(outs[0].asnumpy(), np.full((1, 2), n))
    np.testing.assert_array_equal(outs[1].asnumpy(), np.full((2,), 2 * n))


def test_barrier(hvd):
    hvd.barrier()


def test_queries(hvd):
    import os
    assert hvd.size() == int(os.environ["PLAIT_SIZE"])
    assert hvd.rank() == int(os.environ["PLAIT_RANK"])
    assert hvd.is_initialized()
    assert hvd.gloo_built()
    assert hvd.mpi_built() is False


def test_bad_input(hvd):
    with pytest.raises(TypeError, match="NDArray"):
        hvd.allreduce(np.ones(3))
    with pytest.raises(ValueError, match="root_rank"):
        hvd.broadcast_(mx.nd.ones(3), hvd.size(), name="badroot")
    with pytest.raises(ValueError, match="row_sparse"):
        hvd.allreduce(mx.nd.ones((2, 2)).tostype("row_sparse"))
    with pytest.raises(ValueError, match="twice"):
        x = mx.nd.ones(3)
        hvd.grouped_allreduce_([x, x], name="twice")
    with pytest.raises(ValueError, match="scalar"):
        hvd.reducescatter(mx.nd.ones((1,)).reshape(()) if False else _scalar())
    with pytest.raises(TypeError, match="name"):
        hvd.allreduce(mx.nd.ones(3), name=3)


def _scalar():
    import mxnet as mx_
    with mx_.util.np_shape(True):
        return mx_.nd.ones(())


def test_join_uneven(hvd):
    """Rank 0 has two more batches: the others join, and take part in its
    allreduces with the op's identity; join returns the last rank to join."""
    r = hvd.rank()
    if r == 0:
        outs = [hvd.allreduce(mx.nd.ones((3,)) * 5, op=hvd.Sum, name="join.%d" % i)
                for i in range(2)]
        for o in outs:
            np.testing.assert_array_equal(o.asnumpy(), 5)
    assert hvd.join() == 0
    hvd.barrier()
