"""Operations in flight: Horovod-style integer handles for plait handles,
poll() and synchronize(). (Automatic names of unnamed operations:
plait.common.names, through plait.torch._groups._op_name.)"""

import itertools
import threading

from plait import _core


class _Pending:
    """An operation in flight: the core handle and what turns it into the
    Python result once it has finished."""
    __slots__ = ("handle", "finish")

    def __init__(self, handle, finish):
        self.handle = handle
        self.finish = finish


def _kept(h):
    """The finish of an operation whose result is the one object it keeps
    (an in-place allreduce of a contiguous tensor): no closure to allocate."""
    return h.keep


_handles = {}
_handle_ids = itertools.count(1)
_handles_lock = threading.Lock()


def _register(pending):
    hid = next(_handle_ids)  # one step each under the GIL: no lock needed
    _handles[hid] = pending
    return hid


# The fast path's record of an operation in flight (mpi_ops.allreduce_async_
# for the DistributedOptimizer): a tuple (core handle address, the tensor,
# the operation's name) rather than a _Pending and a _core.Handle: one
# object per operation, and synchronize() makes two foreign calls for it
# rather than six Python calls and three foreign ones. The general paths see
# it as a _Pending (_pending).


def _pending(p):
    """p as a _Pending (a fast path tuple becomes one)."""
    if type(p) is tuple:
        return _Pending(_core.Handle(*p), _kept)
    return p


def _take(handle):
    pending = _handles.pop(handle, None)
    if pending is None:
        raise ValueError("plait.torch: %r is not a handle in flight (already "
                         "synchronized, or never returned by an *_async call)" % (handle,))
    return _pending(pending)


def poll(handle):
    """True when the operation behind handle has finished; synchronize() then
    returns without waiting."""
    pending = _handles.get(handle)
    if pending is None:
        raise ValueError("plait.torch: %r is not a handle in flight" % (handle,))
    if type(pending) is tuple:
        return _core.poll_ptr(pending[0])
    return pending.handle.poll()


_wait_gil = _core.wait_gil
_wait_sliced = _core.wait_sliced
_release_gil = _core.release_gil
_TIMEOUT = _core.RESULTS["PLAIT_ERR_TIMEOUT"]


def synchronize(handle):
    """Waits for the operation (the GIL is released meanwhile) and returns its
    output; raises PlaitError (e.g. PeerLostError, MismatchError) with the
    library's message when it failed.

    The wait wakes every _core.WAIT_SLICE_S, so a signal handler (Ctrl-C's
    KeyboardInterrupt, SIGALRM, SIGTERM) raises here while the operation
    still runs. The handle then stays in flight, as Horovod's does: its
    memory is kept, and synchronize(handle) may be called again."""
    pending = _handles.pop(handle, None)
    if type(pending) is tuple:
        ptr = pending[0]
        # Finished already (all but the first of a burst): no GIL round trip.
        rc = _wait_gil(ptr, 0.0)
        if rc == _TIMEOUT:
            try:
                rc = _wait_sliced(ptr)
            except BaseException:  # a signal handler raised: still in flight
                _handles[handle] = pending
                raise
        if rc == 0:
            _release_gil(ptr)
            return pending[1]
        pending = _pending(pending)  # failed: the general path raises its error
    elif pending is None:
        raise ValueError("plait.torch: %r is not a handle in flight (already "
                         "synchronized, or never returned by an *_async call)" % (handle,))
    try:
        pending.handle.wait()
    except BaseException:
        if not pending.handle.poll():  # a signal handler raised: still in flight
            _handles[handle] = pending
        else:
            pending.handle.release()
        raise
    try:
        return pending.finish(pending.handle)
    finally:
        pending.handle.release()


def _then(hid, fn):
    """Makes synchronize(hid) return fn(result) instead of the result (the
    CUDA tensors staged through host memory go back to their device)."""
    with _handles_lock:
        pending = _handles[hid] = _pending(_handles[hid])
    inner = pending.finish

    def finish(h):
        return fn(inner(h))
    pending.finish = finish
    return hid


def clear():
    """Forgets every handle (at shutdown: plait finishes the operations)."""
    with _handles_lock:
        pending = list(_handles.values())
        _handles.clear()
    for p in pending:  # a fast path tuple's core handle is released (or orphaned)
        if type(p) is tuple:
            _core.Handle(*p).release()
