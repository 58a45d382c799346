"""Errors and the exceptions they raise, as Horovod 0.28 raises them:
what ranks disagree on (shape, dtype, op, root, scale factors, kind of
operation) fails the operation on every rank with HorovodInternalError, a
RuntimeError; what is wrong on one rank alone before anything is sent is a
ValueError (or NotImplementedError); the job goes on after either."""

import pytest
import torch

import hvd_expected as hn


def check_alive(hvd, tag):
    # The job still works after the error.
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="alive." + tag)
    assert torch.equal(out, torch.full((2,), float(hvd.size())))


def test_horovod_internal_error_is_runtime_error(hvd):
    assert issubclass(hvd.HorovodInternalError, RuntimeError)


def expect_internal_error(hvd, call):
    with pytest.raises(hvd.HorovodInternalError):
        call()


def test_mismatched_shape(hvd):
    me = hvd.rank()
    expect_internal_error(hvd, lambda: hvd.allreduce(torch.ones(me + 1), name="err.shape"))
    expect_internal_error(hvd, lambda: hvd.broadcast(torch.ones(2, me + 1), 0, name="err.bshape"))
    expect_internal_error(hvd, lambda: hvd.allgather(torch.ones(2, me + 1), name="err.gshape"))
    expect_internal_error(hvd, lambda: hvd.allgather(torch.ones([2] * (me + 1)), name="err.gndim"))
    expect_internal_error(hvd, lambda: hvd.reducescatter(torch.ones(3, me + 1), name="err.rshape"))
    check_alive(hvd, "shape")


def test_mismatched_dtype(hvd):
    dtype = torch.float32 if hvd.rank() % 2 == 0 else torch.int32
    expect_internal_error(hvd, lambda: hvd.allreduce(torch.ones(3, dtype=dtype), name="err.dt"))
    expect_internal_error(hvd, lambda: hvd.allgather(torch.ones(3, dtype=dtype), name="err.gdt"))
    check_alive(hvd, "dtype")


def test_mismatched_op(hvd):
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    expect_internal_error(hvd, lambda: hvd.allreduce(torch.ones(3), op=op, name="err.op"))
    check_alive(hvd, "op")


def test_mismatched_scale_factors(hvd):
    f = 1.0 if hvd.rank() == 0 else 2.0
    expect_internal_error(hvd, lambda: hvd.allreduce(torch.ones(3), op=hvd.Sum,
                                                     prescale_factor=f, name="err.pre"))
    expect_internal_error(hvd, lambda: hvd.allreduce(torch.ones(3), op=hvd.Sum,
                                                     postscale_factor=f, name="err.post"))
    check_alive(hvd, "scale")


def test_mismatched_root(hvd):
    root = 0 if hvd.rank() == 0 else 1
    expect_internal_error(hvd, lambda: hvd.broadcast(torch.ones(3), root, name="err.root"))
    check_alive(hvd, "root")


def test_async_error_raised_by_synchronize(hvd):
    # The error surfaces in synchronize(), not in the submission.
    handle = hvd.allreduce_async(torch.ones(hvd.rank() + 1), name="err.async")
    with pytest.raises(hvd.HorovodInternalError):
        hvd.synchronize(handle)
    check_alive(hvd, "async")


def test_rank_zero_tensor_refused_by_allgather(hvd):
    # Refused by the coordinator. (Horovod's synchronous allgather fails
    # earlier, in Python, with an IndexError: not a behaviour to copy.)
    expect_internal_error(hvd, lambda: hvd.synchronize(
        hvd.allgather_async(torch.tensor(1.0), name="err.g0d")))
    check_alive(hvd, "0d")


def test_rank_zero_tensor_refused_by_reducescatter(hvd):
    # Refused at once, on each rank.
    with pytest.raises(ValueError):
        hvd.reducescatter(torch.tensor(1.0), name="err.r0d")
    check_alive(hvd, "0d.rs")


@pytest.mark.differs("reducescatter-min-max-product")
def test_reducescatter_min_max_product(hvd, impl):
    # Horovod's reducescatter takes Sum and Average only; plait's also
    # Min, Max and Product.
    n, me = hvd.size(), hvd.rank()
    xs = [torch.arange(2.0 * n) * (r + 1) - 3 for r in range(n)]
    for opname in ("Min", "Max", "Product"):
        op = getattr(hvd, opname)
        if impl == "horovod":
            expect_internal_error(hvd, lambda: hvd.reducescatter(xs[me], op=op, name="err.rsop"))
        else:
            out = hvd.reducescatter(xs[me], op=op, name="err.rsop")
            assert torch.equal(out, hn.reducescatter(hvd, xs, op, me)), opname
    check_alive(hvd, "rsop")


def test_alltoall_bad_splits(hvd):
    # Splits that do not add up to the first dimension.
    n = hvd.size()
    with pytest.raises((ValueError, RuntimeError)):
        hvd.alltoall(torch.ones(n, 2), splits=[n + 1] + [0] * (n - 1), name="err.a2a")
    check_alive(hvd, "a2a")


def test_poll_unknown_handle(hvd):
    with pytest.raises(ValueError):
        hvd.poll(987654)


@pytest.mark.differs("synchronize-unknown-handle")
def test_synchronize_unknown_handle(hvd, impl):
    if impl == "horovod":
        assert hvd.synchronize(987654) is None
    else:
        with pytest.raises(ValueError):
            hvd.synchronize(987654)


@pytest.mark.differs("non-contiguous")
def test_non_contiguous(hvd, impl):
    n = hvd.size()
    x = torch.arange(12.0).reshape(3, 4).t()
    assert not x.is_contiguous()
    if impl == "horovod":
        with pytest.raises(ValueError):
            hvd.allreduce(x, op=hvd.Sum, name="err.noncontig")
    else:
        out = hvd.allreduce(x, op=hvd.Sum, name="err.noncontig")
        assert torch.equal(out, x * n)
        y = x.clone().t().contiguous().t()  # a fresh non-contiguous view
        hvd.allreduce_(y, op=hvd.Sum, name="err.noncontig.inplace")
        assert torch.equal(y, x * n)
    check_alive(hvd, "noncontig")


@pytest.mark.differs("wider-dtypes")
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.bool,
                                   torch.bfloat16], ids=str)
def test_reduction_dtypes_beyond_horovod(hvd, impl, dtype):
    x = torch.ones(4, dtype=dtype)
    if impl == "horovod":
        with pytest.raises(ValueError):
            hvd.allreduce(x, op=hvd.Sum, name="err.dtype." + str(dtype))
    else:
        out = hvd.allreduce(x, op=hvd.Max, name="err.dtype." + str(dtype))
        assert out.dtype == dtype and torch.equal(out, x)

