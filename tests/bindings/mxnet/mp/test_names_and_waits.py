"""plait.mxnet in a long-lived job: a call refused on one rank consumes no
automatic name (whatever check refused it, in Python or in plait's C), so
later unnamed operations still match; alltoall splits are refused by dtype;
waits in plait.mxnet give way to signals (docs/mxnet.md)."""

import signal

import mxnet as mx
import pytest

import plait


class _Alarm(Exception):
    pass


def _raise_alarm(signum, frame):
    raise _Alarm()


def test_refusals_by_different_checks_consume_no_name(hvd):
    """Each rank's unnamed call is refused by a different check; then an
    unnamed call of the same kind on every rank meets its partners."""
    r, n = hvd.rank(), hvd.size()
    # alltoall: rank 0 in Python (float splits), the others in plait's C
    # (splits that do not add up to the rows), after the name was reserved
    bad = [0.5] + [0] * (n - 1) if r == 0 else [0] * n
    with pytest.raises(ValueError):
        hvd.alltoall(mx.nd.ones((n,)), splits=bad)
    out = hvd.alltoall(mx.nd.ones((n,)) * r)
    assert out.asnumpy().tolist() == [float(q) for q in range(n)]
    # allreduce: a bad op on rank 0, a bad scale factor elsewhere
    with pytest.raises((ValueError, TypeError)):
        if r == 0:
            hvd.allreduce(mx.nd.ones((2,)), op=12345)
        else:
            hvd.allreduce(mx.nd.ones((2,)), prescale_factor="x")
    assert hvd.allreduce(mx.nd.ones((2,)), op=hvd.Sum).asnumpy().tolist() == [n] * 2
    # broadcast: a root outside the job on rank 0, a bad priority elsewhere
    with pytest.raises(ValueError):
        if r == 0:
            hvd.broadcast(mx.nd.ones((2,)), root_rank=n)
        else:
            hvd.broadcast(mx.nd.ones((2,)), root_rank=0, priority=2**40)
    b = hvd.broadcast(mx.nd.ones((2,)) * r, root_rank=n - 1)
    assert b.asnumpy().tolist() == [n - 1.0] * 2
    # allgather: not an NDArray on rank 0, a sparse one elsewhere
    with pytest.raises((ValueError, TypeError)):
        if r == 0:
            hvd.allgather([1.0, 2.0])
        else:
            hvd.allgather(mx.nd.ones((2,), dtype="float16").tostype("row_sparse"))
    assert hvd.allgather(mx.nd.ones((1,)) * r).asnumpy().tolist() == [float(q) for q in range(n)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8"])
def test_alltoall_splits_refused_by_dtype(hvd, dtype):
    """Horovod refuses splits of any dtype but int32, whatever the values
    (here valid ones); plait takes int32 and int64."""
    n = hvd.size()
    with pytest.raises(ValueError, match="splits must hold 32- or 64-bit integers") as err:
        hvd.alltoall(mx.nd.ones((n,)), splits=mx.nd.ones((n,), dtype=dtype))
    assert isinstance(err.value, mx.base.MXNetError)
    out, got = hvd.alltoall(mx.nd.ones((n,)), splits=mx.nd.ones((n,), dtype="int64"),
                            name="splits.int64")
    assert got.asnumpy().tolist() == [1] * n


def _interrupted(hvd, call, partner):
    """Rank 0 calls call() alone: a SIGALRM handler must raise in its wait.
    Then the other ranks submit the same operation (partner), so the one
    rank 0 left completes, and the job goes on."""
    if hvd.rank() == 0:
        old = signal.signal(signal.SIGALRM, _raise_alarm)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            with pytest.raises(_Alarm):
                call()  # before the fix: waits until PLAIT_STALL_ABORT_S, StalledError
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    hvd.allreduce(mx.nd.ones((1,)), name="interrupt.meet").wait_to_read()
    if hvd.rank() != 0:
        partner()
    hvd.barrier()


def test_signal_raises_in_a_gathered_wait(hvd):
    n = hvd.size()
    x = mx.nd.ones((1, 2))
    _interrupted(hvd, lambda: hvd.allgather(x, name="interrupt.gather"),
                 lambda: hvd.allgather(x, name="interrupt.gather").asnumpy())
    assert hvd.allgather(x, name="interrupt.after").shape == (n, 2)


def test_signal_raises_in_barrier(hvd):
    _interrupted(hvd, hvd.barrier, hvd.barrier)
    assert hvd.allreduce(mx.nd.ones((1,)), op=hvd.Sum, name="interrupt.after_barrier") \
        .asnumpy().tolist() == [hvd.size()]


def test_errors_keep_plait_classes(hvd):
    with pytest.raises(plait.InvalidArgumentError):
        hvd.alltoall(mx.nd.ones((hvd.size(),)), splits=mx.nd.ones((hvd.size(),)))


def test_ctrl_c_raises_keyboard_interrupt_in_a_gathered_wait(hvd):
    """SIGINT (Ctrl-C) while rank 0 waits alone in alltoall: Python's
    handler raises KeyboardInterrupt in the waiting thread."""
    import os
    import threading
    n = hvd.size()
    x = mx.nd.ones((n,))
    if hvd.rank() == 0:
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                hvd.alltoall(x, name="interrupt.a2a")
        finally:
            timer.cancel()
    hvd.allreduce(mx.nd.ones((1,)), name="interrupt.meet2").wait_to_read()
    if hvd.rank() != 0:
        assert hvd.alltoall(x, name="interrupt.a2a").shape == (n,)
    hvd.barrier()


def test_mixed_dtype_alltoall_after_hundreds_of_operations(hvd):
    """A long job: hundreds of unnamed operations, some refused on purpose
    (on rank 0 in Python, elsewhere in plait's C), then an unnamed alltoall
    of mismatched dtypes fails on every rank (Horovod: an error too) and
    the next one works."""
    n, r = hvd.size(), hvd.rank()
    outs = []
    for i in range(100):
        outs.append(hvd.allreduce(mx.nd.ones((2,)), op=hvd.Sum))
        if i % 10 == 0:
            bad = [float("nan")] + [0] * (n - 1) if r == 0 else [0] * n
            with pytest.raises(ValueError):
                hvd.alltoall(mx.nd.ones((n,)), splits=bad)
        assert hvd.alltoall(mx.nd.ones((n,)) * r).asnumpy().tolist() == \
            [float(q) for q in range(n)]
    assert all(o.asnumpy().tolist() == [n, n] for o in outs)
    x = mx.nd.ones((n,), dtype="float32" if r % 2 == 0 else "int32")
    with pytest.raises(hvd.MismatchError, match="dtype") as err:
        hvd.alltoall(x)
    assert isinstance(err.value, mx.base.MXNetError)
    assert hvd.alltoall(mx.nd.ones((n,)) * r).asnumpy().tolist() == [float(q) for q in range(n)]
