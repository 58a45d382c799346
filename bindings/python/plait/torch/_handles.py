"""Operations in flight: Horovod-style integer handles for plait handles,
poll() and synchronize(), and the automatic names of unnamed operations."""

import itertools
import threading


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
_name_counters = {}


def _register(pending):
    with _handles_lock:
        hid = next(_handle_ids)
        _handles[hid] = pending
    return hid


def _take(handle):
    with _handles_lock:
        pending = _handles.pop(handle, None)
    if pending is None:
        raise ValueError("plait.torch: %r is not a handle in flight (already "
                         "synchronized, or never returned by an *_async call)" % (handle,))
    return pending


def poll(handle):
    """True when the operation behind handle has finished; synchronize() then
    returns without waiting."""
    with _handles_lock:
        pending = _handles.get(handle)
    if pending is None:
        raise ValueError("plait.torch: %r is not a handle in flight" % (handle,))
    return pending.handle.poll()


def synchronize(handle):
    """Waits for the operation (the GIL is released meanwhile) and returns its
    output; raises PlaitError (e.g. PeerLostError, MismatchError) with the
    library's message when it failed."""
    pending = _take(handle)
    try:
        pending.handle.wait()
        return pending.finish(pending.handle)
    finally:
        pending.handle.release()


def _then(hid, fn):
    """Makes synchronize(hid) return fn(result) instead of the result (the
    CUDA tensors staged through host memory go back to their device)."""
    with _handles_lock:
        pending = _handles[hid]
    inner = pending.finish

    def finish(h):
        return fn(inner(h))
    pending.finish = finish
    return hid


def _auto_name(kind, name):
    if name is not None:
        if not isinstance(name, str):
            raise TypeError("plait.torch: name must be a str, not %s" % type(name).__name__)
        return name
    with _handles_lock:
        n = _name_counters.get(kind, 0)
        _name_counters[kind] = n + 1
    return "%s.noname.%d" % (kind, n)



def clear():
    """Forgets every handle (at shutdown: plait finishes the operations)."""
    with _handles_lock:
        _handles.clear()
