"""plait.mxnet inside MXNet's dependency engine: operations return at once,
never block MXNet's engine threads, and are ordered against other work on
the same arrays.

The other ranks push a plait operation that cannot finish until rank 0
submits its part, and rank 0 submits only after they have told it (through
another plait operation, rooted at rank 1) that their later MXNet work was
pushed, or ran. So, on those ranks, the plait operation is certainly still
in flight when that work is pushed: if MXNet did not order it after the
plait operation, it would see the old value; if plait blocked MXNet's engine
threads, the independent work could not run and the job would stall (and
fail, never hang: PLAIT_STALL_ABORT_S)."""

import mxnet as mx
import numpy as np


def _go(hvd, name):
    """Rank 1 tells rank 0 to go on (a plait broadcast rooted at rank 1)."""
    hvd.broadcast_object(hvd.rank(), root_rank=1, name=name)


def test_later_op_sees_the_result(hvd):
    n, r = hvd.size(), hvd.rank()
    x = mx.nd.ones((1000,)) * (r + 1)
    if r == 0:
        _go(hvd, "go.later")
    out = hvd.allreduce_(x, op=hvd.Sum, name="later")
    y = x + 1                      # queued behind the allreduce on x
    z = (mx.nd.ones((1000,)) * 7).asnumpy()   # independent work runs meanwhile
    if r != 0:
        _go(hvd, "go.later")
    assert out is x
    total = n * (n + 1) / 2
    np.testing.assert_array_equal(y.asnumpy(), total + 1)
    np.testing.assert_array_equal(x.asnumpy(), total)
    np.testing.assert_array_equal(z, 7)


def test_write_after_submission_does_not_change_what_was_sent(hvd):
    n, r = hvd.size(), hvd.rank()
    x = mx.nd.ones((1000,)) * (r + 1)
    if r == 0:
        _go(hvd, "go.write")
    out = hvd.allreduce(x, op=hvd.Sum, name="write")   # reads x in the engine
    x[:] = 100                                          # a write pushed after it
    x += 1
    if r != 0:
        _go(hvd, "go.write")
    np.testing.assert_array_equal(out.asnumpy(), n * (n + 1) / 2)
    np.testing.assert_array_equal(x.asnumpy(), 101)


def test_earlier_write_is_sent(hvd):
    n, r = hvd.size(), hvd.rank()
    x = mx.nd.zeros((64,))
    x[:] = r + 5                  # pushed, maybe not yet run
    out = hvd.allreduce(x * 2, op=hvd.Sum, name="earlier")
    np.testing.assert_array_equal(out.asnumpy(), 2 * sum(q + 5 for q in range(n)))


def test_broadcast_ordering(hvd):
    r = hvd.rank()
    x = mx.nd.ones((10,)) * r
    if r == 0:
        _go(hvd, "go.bc")
    hvd.broadcast_(x, root_rank=1, name="bc.order")
    y = x * 3
    if r != 0:
        _go(hvd, "go.bc")
    np.testing.assert_array_equal(y.asnumpy(), 3)


def test_many_in_flight(hvd):
    """A gradient-like burst: 64 in-place allreduces pushed before any
    completes, each followed by a dependent op."""
    n, r = hvd.size(), hvd.rank()
    xs = [mx.nd.ones((i + 1, 3)) * (r + i) for i in range(64)]
    ys = []
    for i, x in enumerate(xs):
        hvd.allreduce_(x, op=hvd.Sum, name="burst.%d" % i)
        ys.append(x * 2)
    mx.nd.waitall()
    for i, y in enumerate(ys):
        np.testing.assert_array_equal(y.asnumpy(), 2 * sum(q + i for q in range(n)))


def test_input_dropped_by_python_while_in_flight(hvd):
    """The adapter keeps the arrays' memory alive until plait is done."""
    n, r = hvd.size(), hvd.rank()
    if r == 0:
        _go(hvd, "go.drop")
    out = hvd.allreduce(mx.nd.ones((4096,)) * (r + 1), op=hvd.Sum, name="drop")
    import gc
    gc.collect()
    filler = [mx.nd.ones((4096,)) * 9 for _ in range(8)]
    if r != 0:
        _go(hvd, "go.drop")
    np.testing.assert_array_equal(out.asnumpy(), n * (n + 1) / 2)
    del filler
