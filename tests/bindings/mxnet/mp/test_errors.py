"""plait.mxnet failures: raised with plait's class and message, and
Horovod's classes (an MXNetError from wait_to_read, a HorovodInternalError)."""

import mxnet as mx
import pytest

import plait


def test_mismatch_raised_from_wait_to_read(hvd):
    r = hvd.rank()
    out = hvd.allreduce(mx.nd.ones((3 + r,)), op=hvd.Sum, name="mismatched")
    with pytest.raises(plait.MismatchError) as err:
        out.wait_to_read()
    e = err.value
    assert isinstance(e, hvd.HorovodInternalError)
    assert isinstance(e, mx.base.MXNetError)
    assert isinstance(e, hvd.MismatchError)
    assert "allreduce.mismatched" in str(e), str(e)
    assert e.name == "PLAIT_ERR_MISMATCH"
    # The job goes on.
    ok = hvd.allreduce(mx.nd.ones((2,)), op=hvd.Sum, name="after.mismatch")
    assert ok.asnumpy().tolist() == [hvd.size()] * 2


def test_mismatch_of_gathered_op_raised_at_call(hvd):
    r = hvd.rank()
    with pytest.raises(plait.MismatchError, match="allgather.gather_mismatch") as err:
        hvd.allgather(mx.nd.ones((2, 2 + r)), name="gather_mismatch")
    assert isinstance(err.value, mx.base.MXNetError)
    assert isinstance(err.value, hvd.HorovodInternalError)


def test_dtype_mismatch_in_place(hvd):
    r = hvd.rank()
    x = mx.nd.ones((4,), dtype="float32" if r == 0 else "float64")
    hvd.allreduce_(x, name="dtype_mismatch")
    with pytest.raises(hvd.MismatchError, match="float"):
        x.asnumpy()


def test_unsupported_dtype_and_device(hvd):
    with pytest.raises(ValueError, match="plait.mxnet.allreduce"):
        hvd.allreduce(mx.nd.ones((2, 2)).tostype("csr"))


def test_argument_errors_are_value_and_mxnet_errors(hvd):
    # Horovod refuses these in C++ (an MXNetError); plait's are also ValueErrors
    for call in (lambda: hvd.broadcast_(mx.nd.ones(3), hvd.size() + 3, name="root"),
                 lambda: hvd.allreduce(mx.nd.ones((3,), dtype="bool"), op=hvd.Average),
                 lambda: hvd.alltoall(mx.nd.ones((4,)), splits=[1] * (hvd.size() + 1))):
        with pytest.raises(ValueError) as err:
            call()
        assert isinstance(err.value, mx.base.MXNetError)
        assert isinstance(err.value, plait.InvalidArgumentError)
