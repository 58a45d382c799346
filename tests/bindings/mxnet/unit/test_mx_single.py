"""plait.mxnet in one process (no launcher: a job of one rank), its adapter,
and a lost rank under plaitrun."""

import ctypes
import os
import subprocess
import sys
import textwrap

import mxnet as mx
import numpy as np
import pytest

import plait
import plait.mxnet as hvd


@pytest.fixture(scope="module")
def job():
    hvd.init()
    yield hvd
    hvd.shutdown()


def test_exports_horovod_mxnet_names():
    # horovod.mxnet 0.28.1's public names (horovod/mxnet/__init__.py)
    names = """Compression allgather_object broadcast_object allgather grouped_allgather
        allreduce allreduce_ grouped_allreduce grouped_allreduce_ alltoall broadcast
        broadcast_ reducescatter grouped_reducescatter init shutdown is_initialized
        start_timeline stop_timeline size local_size cross_size rank local_rank cross_rank
        mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built nccl_built
        ddl_built ccl_built cuda_built rocm_built ProcessSet global_process_set
        add_process_set remove_process_set Average Sum Adasum Min Max Product
        DistributedOptimizer DistributedTrainer broadcast_parameters""".split()
    missing = [n for n in names if not hasattr(hvd, n)]
    assert not missing, missing


def test_errors_registered_with_mxnet():
    cls = mx.base.error_types["PLAIT_ERR_PEER_LOST"]
    assert issubclass(cls, plait.PeerLostError)
    assert issubclass(cls, mx.base.MXNetError)
    assert issubclass(cls, hvd.HorovodInternalError)
    e = cls("PLAIT_ERR_PEER_LOST: rank 1 was lost")
    assert str(e) == "rank 1 was lost" and e.name == "PLAIT_ERR_PEER_LOST"


def test_capsule_prototype_untouched():
    # a global argtypes on PyCapsule_GetPointer breaks MXNet's capsule deleter
    assert ctypes.pythonapi.PyCapsule_GetPointer.argtypes is None
    a = mx.nd.ones((3,))
    cap = a.to_dlpack_for_read()
    b = mx.nd.from_dlpack(cap)
    assert b.asnumpy().tolist() == [1, 1, 1]


def test_queries_before_init_raise_value_error():
    if hvd.is_initialized():
        pytest.skip("plait is initialized by an earlier test of this process")
    with pytest.raises(ValueError):
        hvd.rank()


def test_single_rank_operations(job):
    assert hvd.size() == 1 and hvd.rank() == 0
    x = mx.nd.array([1.5, -2, 3])
    np.testing.assert_array_equal(hvd.allreduce(x, name="one").asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum, postscale_factor=2.0,
                                                name="one.s").asnumpy(), 2 * x.asnumpy())
    np.testing.assert_array_equal(hvd.allgather(x, name="one").asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(hvd.broadcast(x, 0, name="one").asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(hvd.reducescatter(x, op=hvd.Sum, name="one").asnumpy(),
                                  x.asnumpy())
    out, splits = hvd.alltoall(x, splits=[3], name="one")
    np.testing.assert_array_equal(out.asnumpy(), x.asnumpy())
    assert splits.asnumpy().tolist() == [3]
    hvd.barrier()
    assert hvd.join() == 0
    assert hvd.broadcast_object({"a": 1}) == {"a": 1}
    assert hvd.allgather_object(5) == [5]


def test_integers_a_c_int_cannot_hold_are_refused(job):
    """ctypes would wrap them into the request's C fields: root_rank 2**32
    broadcast from rank 0, priority 2**32 ran at 0 (issue 16)."""
    x = mx.nd.array([1.0, 2.0])
    for root in (2**32, 2**31, -2**32):
        with pytest.raises(ValueError, match="root_rank %d" % root):
            hvd.broadcast(x, root, name="wrap.root")
    with pytest.raises(ValueError, match="priority %d" % 2**32):
        hvd.allreduce(x, name="wrap.priority", priority=2**32)
    with pytest.raises(ValueError, match=r"splits\[0\] %d" % (2**64 + 2)):
        hvd.alltoall(x, splits=[2**64 + 2], name="wrap.splits")


def test_names_with_nul_are_refused(job):
    """A name with a NUL would be cut at the C ABI ('a\\0x' and 'a\\0y' both
    'a'): refused (issue 16)."""
    x = mx.nd.array([1.0, 2.0])
    with pytest.raises(ValueError, match="NUL"):
        hvd.allreduce(x, name="a\0x")
    with pytest.raises(ValueError, match="NUL"):
        hvd.broadcast(x, 0, name="a\0y")


def test_empty_first_dimension(job):
    x = mx.nd.empty((0, 3))
    out = hvd.allgather(x, name="empty")
    assert out.shape == (0, 3)


def test_trainer_one_rank_is_plain_trainer(job):
    net = mx.gluon.nn.Dense(1, in_units=2)
    net.initialize(mx.init.One())
    tr = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 1.0})
    with mx.autograd.record():
        loss = net(mx.nd.ones((1, 2))).sum()
    loss.backward()
    tr.step(1)
    np.testing.assert_array_equal(net.weight.data().asnumpy(), [[0.0, 0.0]])


def _run(code, env_extra=None, args=None, timeout=120):
    env = dict(os.environ)
    env.update(env_extra or {})
    cmd = (args or []) + [sys.executable, "-c", textwrap.dedent(code)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def test_missing_adapter_is_a_clear_import_error():
    p = _run("import plait.mxnet", {"PLAIT_MXNET_LIBRARY": "/nonexistent/libplait_mxnet.so"})
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "/nonexistent/libplait_mxnet.so" in p.stderr
    assert "PLAIT_MXNET_PYTHON" in p.stderr


LOST = """
import os, sys, time
import mxnet as mx
import plait.mxnet as hvd
hvd.init()
hvd.barrier()
if hvd.rank() == 1:
    os._exit(0)            # gone without shutdown
out = hvd.allreduce(mx.nd.ones((100,)), name="after.loss")
try:
    out.wait_to_read()
    print("NO ERROR", flush=True)
except hvd.PeerLostError as e:
    print("RAISED %s %s %s: %s" % (type(e).__name__, isinstance(e, mx.base.MXNetError),
                                   isinstance(e, hvd.HorovodInternalError), e), flush=True)
os._exit(0)
"""


def test_lost_rank_raises_peer_lost():
    plaitrun = os.environ.get("PLAIT_TEST_PLAITRUN")
    if not plaitrun:
        pytest.skip("PLAIT_TEST_PLAITRUN is not set (ctest sets it to the build's plaitrun)")
    p = _run(LOST, {"PLAIT_TIMEOUT_S": "5"}, [plaitrun, "-np", "2"], timeout=120)
    line = next((x for x in p.stdout.splitlines() if "RAISED" in x or "NO ERROR" in x), None)
    assert line is not None, p.stdout + p.stderr
    assert "RAISED PeerLostError True True" in line, line
    assert "rank 1" in line, line
