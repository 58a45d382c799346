"""plait.tensorflow in one process (a job of one rank) and the life cycle:
queries and operations before init, a job of one, what loads the op
library, and a lost rank (two ranks started by plaitrun in a subprocess)."""

import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import plait
import plait.tensorflow as hvd
from plait.common.exceptions import HorovodInternalError


def test_queries_before_init_raise_value_error():
    assert not hvd.is_initialized()
    with pytest.raises(ValueError):
        hvd.rank()
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        hvd.size_op()
    assert isinstance(info.value, HorovodInternalError)  # plait.NotInitializedError


def test_operation_before_init_raises():
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        hvd.allreduce(tf.ones([2]), name="early")
    assert isinstance(info.value, plait.NotInitializedError)
    assert isinstance(info.value, HorovodInternalError)


def test_job_of_one():
    hvd.init()
    try:
        assert (hvd.size(), hvd.rank(), int(hvd.size_op()), int(hvd.rank_op())) == (1, 0, 1, 0)
        x = tf.constant([1.0, 2.0])
        assert hvd.allreduce(x).numpy().tolist() == [1.0, 2.0]
        assert hvd.allgather(tf.ones([2, 1])).shape == (2, 1)
        assert hvd.broadcast(x, 0).numpy().tolist() == [1.0, 2.0]
        # a name with a NUL would be cut at the C ABI and could collide
        with pytest.raises(ValueError, match="NUL"):
            hvd.allreduce(x, name="a\0rank0")
        # the op itself refuses one too (a name given to it directly)
        from plait.tensorflow.mpi_ops import MPI_LIB
        with pytest.raises(tf.errors.InvalidArgumentError, match="NUL"):
            MPI_LIB.plait_allreduce(tensor=x, reduce_op=hvd.Sum, prescale_factor=1.0,
                                    postscale_factor=1.0, process_set_id=0,
                                    tensor_name="allreduce.a\0rank0")
        for root in (2**32, 2**31, -2**32):  # the op's int32 attribute cannot hold it
            with pytest.raises(ValueError, match="root_rank %d" % root):
                hvd.broadcast(x, root)
        # one rank: the tape's gradients are the local ones (Horovod's cond)
        v = tf.Variable([3.0])
        with tf.GradientTape() as tape:
            loss = 2 * v
        g, = hvd.DistributedGradientTape(tape).gradient(loss, [v])
        assert g.numpy().tolist() == [2.0]
        assert hvd.broadcast_object({"a": 1}) == {"a": 1}
    finally:
        hvd.shutdown()
    assert not hvd.is_initialized()


def test_op_library_is_found_and_shares_libplait():
    from plait.tensorflow import _lib
    assert os.path.exists(_lib.library_path)
    # the op library binds to the libplait that plait._core loaded: a query
    # op and the ctypes query agree in the same process
    hvd.init()
    try:
        assert int(hvd.local_size_op()) == hvd.local_size()
    finally:
        hvd.shutdown()


def test_missing_op_library_is_a_clear_import_error(tmp_path):
    env = dict(os.environ, PLAIT_TENSORFLOW_LIBRARY=str(tmp_path / "nowhere.so"))
    p = subprocess.run([sys.executable, "-c", "import plait.tensorflow"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "cannot load plait's TensorFlow op library" in p.stderr, p.stderr[-2000:]
    assert "PLAIT_TF_PYTHON" in p.stderr


def test_lost_rank_raises_within_the_timeout():
    """Rank 1 leaves without shutdown; rank 0's allreduce raises UnknownError,
    also plait.PeerLostError (a HorovodInternalError), naming rank 1, eagerly
    and from a tf.function, within PLAIT_TIMEOUT_S."""
    plaitrun = os.environ.get("PLAIT_TEST_PLAITRUN")
    if not plaitrun:
        pytest.skip("PLAIT_TEST_PLAITRUN is not set (ctest sets it to the built plaitrun)")
    code = textwrap.dedent("""
        import os, time
        import tensorflow as tf
        import plait, plait.tensorflow as hvd
        hvd.init()
        hvd.barrier()
        if hvd.rank() == 1:
            os._exit(0)
        start = time.monotonic()
        try:
            hvd.allreduce(tf.ones([2]), name="lost")
        except tf.errors.UnknownError as e:
            assert isinstance(e, plait.PeerLostError), type(e).__mro__
            assert isinstance(e, hvd.HorovodInternalError)
            assert "rank 1" in str(e), str(e)
            print("RAISED", type(e).__name__, round(time.monotonic() - start))
        @tf.function
        def f():
            return hvd.allreduce(tf.ones([2]), name="lost_in_function")
        try:
            f()
        except tf.errors.OpError as e:
            assert "PLAIT_ERR_PEER_LOST" in str(e), str(e)
            print("RAISED IN FUNCTION")
        hvd.shutdown()
        """)
    env = dict(os.environ, PLAIT_TIMEOUT_S="10")
    p = subprocess.run([plaitrun, "-np", "2", sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    assert "[0]: RAISED PeerLostError" in out, out[-3000:]
    assert "[0]: RAISED IN FUNCTION" in out, out[-3000:]


def test_installed_tree(tmp_path):
    """cmake --install puts the op library beside the installed libplait;
    the installed plaitrun runs a plait.tensorflow job with no PLAIT_*
    variable set, and the package finds both libraries by itself."""
    build = os.environ.get("PLAIT_TEST_BUILD_DIR")
    if not build:
        pytest.skip("PLAIT_TEST_BUILD_DIR is not set (ctest sets it to the build tree)")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], check=True,
                   capture_output=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PLAIT_") and k != "PYTHONPATH"}
    code = textwrap.dedent("""
        import tensorflow as tf
        import plait, plait.tensorflow as hvd
        from plait.tensorflow import _lib
        hvd.init()
        s = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum).numpy()[0]
        print("JOB", hvd.rank(), int(s), plait.library_path, _lib.library_path)
        hvd.shutdown()
        """)
    p = subprocess.run([str(prefix / "bin" / "plaitrun"), "-np", "2", sys.executable, "-c",
                        code], env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if "JOB" in ln]
    assert p.returncode == 0 and len(lines) == 2, p.stdout[-2000:] + p.stderr[-2000:]
    for ln in lines:
        _, _, rank, total, lib, oplib = ln.split()
        assert total == "2" and lib.startswith(str(prefix)) and oplib.startswith(str(prefix)), ln
        assert os.path.dirname(lib) == os.path.dirname(oplib), ln


def test_average_argument_is_deprecated_as_in_horovod():
    assert hvd.handle_average_backwards_compatibility(None, None) == hvd.Average
    assert hvd.handle_average_backwards_compatibility(hvd.Sum, None) == hvd.Sum
    with pytest.warns(DeprecationWarning, match="replaced with `op`"):
        assert hvd.handle_average_backwards_compatibility(None, False) == hvd.Sum
    with pytest.raises(ValueError, match="supersedes average"):
        hvd.handle_average_backwards_compatibility(hvd.Sum, True)
