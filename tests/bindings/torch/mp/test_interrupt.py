"""A wait that hangs can be interrupted (issue 32, item 2).

Rank 0 waits on an operation the other ranks have not submitted (they wait
first for rank 0 in another one, so nothing moves). A signal then arrives
on rank 0: its handler must run while the wait hangs, and raise there
(Ctrl-C's KeyboardInterrupt, a SIGALRM handler's exception). Afterwards
rank 0 unblocks the others, and the interrupted operation, still in
flight, completes with theirs. Before the fix plait_wait slept in
pthread_cond_wait under ctypes and the handler ran only when the wait
ended: here, when the stall abort (PLAIT_STALL_ABORT_S) failed both
operations.
"""

import os
import signal
import tempfile
import threading
import time

import pytest
import torch

# Far below the stall abort the suite runs with (30 s), far above a slice
# of the wait (0.05 s) on a loaded machine.
GENEROUS_S = 20.0


class Alarm(Exception):
    pass


def _on_alarm(signum, frame):
    raise Alarm("SIGALRM")


def _sigint_soon():
    main = threading.main_thread().ident
    t = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    t.start()
    return t


@pytest.mark.parametrize("path", ["fast", "general"])
def test_sigalrm_handler_raises_in_synchronize(hvd, path):
    n = hvd.size()
    name = "interrupt.alarm.%s" % path
    if hvd.rank() != 0:
        hvd.allreduce(torch.ones(1), name=name + ".go")
        out = hvd.allreduce(torch.ones(2), name=name, op=hvd.Sum)
        assert torch.equal(out, torch.full((2,), float(n)))
        return
    t = torch.ones(2)
    if path == "fast":  # named, contiguous, in place: the optimizer's path
        h = hvd.allreduce_async_(t, name=name, op=hvd.Sum)
    else:
        h = hvd.allreduce_async(t, name=name, op=hvd.Sum)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    start = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Alarm):
            hvd.synchronize(h)
        waited = time.monotonic() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert waited < GENEROUS_S, "the handler ran only when the wait ended"
    assert not hvd.poll(h)  # still in flight, and still ours
    hvd.allreduce(torch.ones(1), name=name + ".go")
    out = hvd.synchronize(h)  # the same handle, again
    assert torch.equal(out, torch.full((2,), float(n)))


def _marker(name):
    """A file rank 0 creates when it was interrupted (the ranks of a plaitrun
    job share a host and a parent): a barrier in flight holds back the
    operations submitted after it, so the other ranks cannot be told with a
    collective."""
    return os.path.join(tempfile.gettempdir(), "plait-test-%d-%s" % (os.getppid(), name))


def _await_marker(path):
    deadline = time.monotonic() + GENEROUS_S * 3
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "rank 0 was never interrupted"
        time.sleep(0.05)


@pytest.mark.parametrize("call", ["allreduce", "barrier", "join"])
def test_ctrl_c_raises_keyboard_interrupt_in_a_blocking_call(hvd, call):
    n = hvd.size()
    name = "interrupt.sigint.%s" % call
    marker = _marker(name)
    if hvd.rank() != 0:
        _await_marker(marker)
        if call == "barrier":
            hvd.barrier()
        elif call == "join":
            hvd.join()
            if hvd.rank() == 1:
                open(marker + ".joined", "w").close()
        else:
            hvd.allreduce(torch.ones(2), name=name, op=hvd.Sum)
    else:
        timer = _sigint_soon()
        start = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                if call == "barrier":
                    hvd.barrier()
                elif call == "join":
                    hvd.join()
                else:
                    hvd.allreduce(torch.ones(2), name=name, op=hvd.Sum)
            waited = time.monotonic() - start
        finally:
            timer.cancel()
        assert waited < GENEROUS_S, "KeyboardInterrupt came only when the wait ended"
        open(marker, "w").close()
        if call == "join":  # a joined rank submits nothing until every rank joined
            _await_marker(marker + ".joined")
            os.unlink(marker + ".joined")
    # The abandoned operation was kept (its buffers alive): it completes in
    # the background with the other ranks', and the job goes on.
    out = hvd.allreduce(torch.ones(1), name=name + ".after", op=hvd.Sum)
    assert torch.equal(out, torch.full((1,), float(n)))
    if hvd.rank() == 0:
        os.unlink(marker)
