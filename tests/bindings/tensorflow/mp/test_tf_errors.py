"""Failed operations raise what Horovod's TensorFlow ops raise (TensorFlow's
error classes: FailedPreconditionError for mismatched operations,
InvalidArgumentError for bad arguments), with plait's message naming the
tensor and the ranks; eagerly the exception is also plait's class for the
failure (MismatchError: a HorovodInternalError, a RuntimeError; bad
arguments: a ValueError). The job goes on afterwards."""

import pytest
import tensorflow as tf

import plait
import plait.tensorflow as hvd
from plait.common.exceptions import HorovodInternalError


def test_shape_mismatch_eager(hvd):
    r = hvd.rank()
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        hvd.allreduce(tf.ones([r + 1]), name="mismatched")
    e = info.value
    assert isinstance(e, plait.MismatchError) and isinstance(e, HorovodInternalError)
    assert isinstance(e, RuntimeError) and e.name == "PLAIT_ERR_MISMATCH"
    msg = str(e)
    assert "mismatched" in msg and "rank" in msg, msg
    # the job goes on
    assert hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy().tolist() == [hvd.size()] * 2


def test_dtype_mismatch_in_function(hvd):
    r = hvd.rank()
    dtype = tf.float32 if r == 0 else tf.float64

    @tf.function
    def f():
        return hvd.allreduce(tf.ones([3], dtype), name="dtype_mismatch")
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        f()
    assert "PLAIT_ERR_MISMATCH" in str(info.value) and "dtype_mismatch" in str(info.value)


def test_mismatch_in_graph(hvd):
    r = hvd.rank()
    with tf.Graph().as_default():
        y = hvd.broadcast(tf.ones([2]), root_rank=0, name="root_mismatch") if r == 0 else \
            hvd.broadcast(tf.ones([2]), root_rank=1, name="root_mismatch")
        with tf.compat.v1.Session() as sess:
            with pytest.raises(tf.errors.FailedPreconditionError) as info:
                sess.run(y)
    assert "root_mismatch" in str(info.value)


def test_bad_arguments(hvd):
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        hvd.broadcast(tf.ones([2]), root_rank=hvd.size() + 5, name="bad_root")
    assert isinstance(info.value, ValueError), type(info.value).__mro__
    with pytest.raises(ValueError) as info:
        hvd.alltoall(tf.ones([4, 1]), splits=[1] * (hvd.size() + 1), name="bad_splits")
    assert "splits" in str(info.value)
    with pytest.raises(ValueError):
        hvd.allgather(tf.constant(1.0))  # a scalar
    with pytest.raises(NotImplementedError):
        hvd.allreduce(tf.ones([2]), op=hvd.Adasum)
    with pytest.raises(ValueError):
        hvd.allreduce(tf.ones([2]), op=hvd.Sum, average=True)
    hvd.barrier()


@pytest.mark.parametrize("dtype", [tf.uint32, tf.uint64, tf.string])
def test_unreducible_dtypes_are_refused_by_name(hvd, dtype):
    x = tf.constant(["a", "b"]) if dtype == tf.string else tf.ones([2], dtype)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        hvd.allreduce(x, op=hvd.Sum)
    assert isinstance(info.value, ValueError)
    assert dtype.name in str(info.value), str(info.value)
    if dtype == tf.string:
        with pytest.raises(ValueError) as info:
            hvd.allgather(x)
        assert "string" in str(info.value)
    with pytest.raises(ValueError):
        hvd.allreduce(tf.ones([2], tf.complex64), op=hvd.Max)
    with pytest.raises(ValueError):
        hvd.allreduce(tf.constant([True]), op=hvd.Average)


def test_unregistered_process_set_is_refused(hvd):
    # Registered sets: tests/bindings/tensorflow/psets.
    with pytest.raises(ValueError, match="is not registered"):
        hvd.allreduce(tf.ones([2]), process_set=hvd.ProcessSet([0]))
    with pytest.raises(TypeError, match="must be a ProcessSet"):
        hvd.allreduce(tf.ones([2]), process_set=[0])
