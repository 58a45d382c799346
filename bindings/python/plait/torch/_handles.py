"""Operations in flight: plait.torch's submission route (submit), its one
handle record, and Horovod-style integer handles for poll() and
synchronize(). (Automatic names of unnamed operations: plait.common.names,
through plait.torch._groups._op_name.)

Every operation of plait.torch, from a grouped allreduce to join, is
submitted by submit(), except the DistributedOptimizer's in-place allreduce
on its short path (plait.torch._fast: the same steps, written out with
arguments made once), and recorded in _handles under its integer handle as
one tuple, (ptr, keep, name, finish):

    ptr     the core handle's address (an int); None for a group of
            operations behind one handle (grouped allgather, reducescatter)
    keep    what must live while the operation runs (tensors, structs); the
            result itself when finish is None; a group's part records
    name    the operation's name (messages)
    finish  None: synchronize() returns keep (an in-place allreduce of a
            contiguous tensor: no closure, no handle object); else
            finish(handle) makes the result from a _core.Handle of the
            finished operation (a group: finish(tuple of part results))

One tuple is one object Python's collector tracks per operation in flight
(more kept the collector scanning: ~0.5 ms of a 200-tensor step), and
synchronize() of a finished in-place allreduce makes one GIL-held foreign
call (plait_wait_release with timeout 0, which also releases the core
handle) and no other Python call.
"""

import ctypes
import itertools
import threading

from plait import _core, _raw

_handles = {}
_handle_ids = itertools.count(1)
_handles_lock = threading.Lock()

_error = _core.error
_orphans = _core._orphans  # the list itself (_core changes it in place)
_reap_orphans = _core._reap_orphans


class _Slots(threading.local):
    """Where the library writes what a call returns besides its result code,
    one set per thread: the interpreter may switch threads between the call
    and the read of its slot (at the check after a call returns), so one slot
    shared by the threads gave two submissions the same core handle, or one
    synchronize another's 'released' (tests/bindings/torch/mp/test_threads.py).

    out       (slot, its address, a pointer argument to it): the new handle
              (submit, plait.torch._fast)
    released  (slot, a pointer argument to it): plait_wait_release's
              'released' (synchronize)"""

    def __init__(self):
        out, released = ctypes.c_void_p(), ctypes.c_int()
        self.out = (out, ctypes.addressof(out), _raw.ref(out))
        self.released = (released, _raw.ref(released))


_slots = _Slots()


def submit(fn, args, keep, name, finish=None):
    """The submission route (plait.torch._fast's short path does the same):
    calls fn, the GIL-held twin of a
    plait_*_async function (_core.gil: a submission only enqueues), with args
    and the handle's out pointer, records the operation and returns its
    integer handle; raises the library's error (nothing recorded) when the
    library refused it."""
    if _orphans:  # cheap check first: submissions are on the hot path
        _reap_orphans()
    out, out_address, _ref = _slots.out  # this thread's
    rc = fn(*args, out_address)
    if rc:
        raise _error(rc)
    hid = next(_handle_ids)  # one step each under the GIL: no lock needed
    _handles[hid] = (out.value, keep, name, finish)
    return hid


def run(fn, args, keep, name, finish=None):
    """submit, then synchronize: the result. A signal handler's exception
    during the wait leaves the operation to finish on its own (orphaned:
    its memory is kept until then)."""
    hid = submit(fn, args, keep, name, finish)
    try:
        return synchronize(hid)
    except BaseException:
        rec = _handles.pop(hid, None)
        if rec is not None:
            _release(rec)
        raise


def _group(records, finish=None):
    """One integer handle for the records of several operations (taken out
    of _handles by _take); synchronize() returns finish(tuple of their
    results), or the tuple."""
    hid = next(_handle_ids)
    _handles[hid] = (None, tuple(records), "group", finish)
    return hid


def _take(handle):
    """The record of handle, taken out of _handles (for _group)."""
    rec = _handles.pop(handle, None)
    if rec is None:
        raise ValueError("plait.torch: %r is not a handle in flight (already "
                         "synchronized, or never returned by an *_async call)" % (handle,))
    return rec


def _poll(rec):
    if rec[0] is None:
        return all(_poll(p) for p in rec[1])
    return _core.poll_ptr(rec[0])


def poll(handle):
    """True when the operation behind handle has finished; synchronize() then
    returns without waiting."""
    rec = _handles.get(handle)
    if rec is None:
        raise ValueError("plait.torch: %r is not a handle in flight" % (handle,))
    return _poll(rec)


_wait_gil = _core.wait_gil
_wait_release_raw = _raw.wait_release  # the GIL held, one argument converted
_ZERO = _raw.carg_double(0.0)
_wait_sliced = _core.wait_sliced
_release_gil = _core.release_gil
_TIMEOUT = _core.RESULTS["PLAIT_ERR_TIMEOUT"]
_last_error = _core.lib.plait_last_error


def _wait(ptr):
    """plait_wait of ptr until it finishes: its result code. A signal
    handler's exception propagates with the operation still in flight."""
    rc = _wait_gil(ptr, 0.0)  # finished already (all but the first of a burst)
    if rc == _TIMEOUT:
        rc = _wait_sliced(ptr)
    return rc


def _finish(rec, rc):
    """The result of a finished single operation (rc: its result code), its
    core handle released; raises its error when it failed."""
    ptr, keep, name, finish = rec
    if rc:
        msg = _core._text(_last_error())
        _release_gil(ptr)
        raise _error(rc, msg)
    if finish is None:
        _release_gil(ptr)
        return keep
    h = _core.Handle(ptr, keep, name)
    h._result = (rc, None)
    try:
        return finish(h)
    finally:
        h.release()  # a no-op when finish kept the handle (_cuda._hold)


def _wait_group(rec):
    """Waits for every part of a group, then makes each part's result and
    releases it (so none is left in flight) and returns the tuple of results,
    or finish(tuple); raises the first part's error. A signal handler's
    exception during the waits propagates with every part still held."""
    codes = [_wait(part[0]) for part in rec[1]]
    results, error = [], None
    for part, rc in zip(rec[1], codes):
        try:
            results.append(_finish(part, rc))
        except Exception as e:  # noqa: BLE001 - the first is raised below
            if error is None:
                error = e
    if error is not None:
        raise error
    results = tuple(results)
    return results if rec[3] is None else rec[3](results)


def synchronize(handle):
    """Waits for the operation (the GIL is released meanwhile) and returns its
    output; raises PlaitError (e.g. PeerLostError, MismatchError) with the
    library's message when it failed.

    The wait wakes every _core.WAIT_SLICE_S, so a signal handler (Ctrl-C's
    KeyboardInterrupt, SIGALRM, SIGTERM) raises here while the operation
    still runs. The handle then stays in flight, as Horovod's does: its
    memory is kept, and synchronize(handle) may be called again."""
    rec = _handles.pop(handle, None)
    if rec is None:
        raise ValueError("plait.torch: %r is not a handle in flight (already "
                         "synchronized, or never returned by an *_async call)" % (handle,))
    ptr = rec[0]
    if ptr is None:
        return _sync_group(handle, rec)
    if rec[3] is None:  # the in-place allreduce: its tensor, nothing read off the handle
        released, released_ref = _slots.released  # this thread's
        rc = _wait_release_raw(ptr, _ZERO, released_ref)
        if released.value:  # finished already (all but the first of a burst)
            if rc:
                raise _error(rc, _core._text(_last_error()))
            return rec[1]
    else:
        rc = _wait_gil(ptr, 0.0)  # finished already (all but the first of a burst)
    if rc == _TIMEOUT:
        try:
            rc = _wait_sliced(ptr)
        except BaseException:  # a signal handler raised: still in flight
            _handles[handle] = rec
            raise
    if rc == 0 and rec[3] is None:  # the in-place allreduce: its tensor
        _release_gil(ptr)
        return rec[1]
    return _finish(rec, rc)


def _sync_group(handle, rec):
    if not all(_poll(part) for part in rec[1]):
        try:
            for part in rec[1]:
                _wait(part[0])
        except BaseException:  # a signal handler raised: still in flight
            _handles[handle] = rec
            raise
    return _wait_group(rec)


def _then(hid, fn):
    """Makes synchronize(hid) return fn(result) instead of the result (the
    CUDA tensors staged through host memory go back to their device)."""
    with _handles_lock:
        ptr, keep, name, inner = _handles[hid]
        if ptr is None:
            def finish(results):
                return fn(results if inner is None else inner(results))
        else:
            def finish(h):
                return fn(h.keep if inner is None else inner(h))
        _handles[hid] = (ptr, keep, name, finish)
    return hid


def _release(rec):
    """Releases (or, while it runs, orphans) a record's core handles."""
    if rec[0] is None:
        for part in rec[1]:
            _release(part)
    else:
        _core.Handle(rec[0], rec[1], rec[2]).release()


def clear():
    """Forgets every handle (at shutdown: plait finishes the operations)."""
    with _handles_lock:
        records = list(_handles.values())
        _handles.clear()
    for rec in records:
        _release(rec)
