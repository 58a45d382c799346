"""plait.torch from several Python threads at once: each submission records
its own core handle and each synchronize reads its own plait_wait_release
result, even when the interpreter switches threads right after the foreign
call (sys.setswitchinterval(1e-6) makes it switch at nearly every call, and
the yield_after_calls fixture gives the GIL away right after each call,
before its slot is read: the race is hit on a quiet machine too)."""

import sys
import threading
import time

import pytest
import torch

from plait.torch import _fast, _handles

THREADS = 4
ROUNDS = 200


class _Yielding:
    """An iterator over ids that gives the GIL away after each (time.sleep(1e-5))."""

    def __init__(self, ids):
        self._ids = ids

    def __iter__(self):
        return self

    def __next__(self):
        hid = next(self._ids)
        time.sleep(1e-5)
        return hid


@pytest.fixture
def yield_after_calls(monkeypatch):
    """Another thread runs between a submission's foreign call and the read
    of its slot (the next handle id is taken in between), and between
    synchronize's plait_wait_release and the read of 'released'."""
    ids = _Yielding(_handles._handle_ids)
    monkeypatch.setattr(_handles, "_handle_ids", ids)
    monkeypatch.setattr(_fast, "_handle_ids", ids)
    wait_release = _handles._wait_release_raw

    def wait_release_then_yield(*args):
        rc = wait_release(*args)
        time.sleep(1e-5)
        return rc

    monkeypatch.setattr(_handles, "_wait_release_raw", wait_release_then_yield)


def _run_threads(target):
    """Runs target(t) on THREADS threads at once, the switch interval at
    1 us; re-raises the first thread's exception."""
    errors, start = [], threading.Barrier(THREADS)

    def body(t):
        try:
            start.wait()
            target(t)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=body, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    if errors:
        raise errors[0]


def _inputs(t, k, r):
    """Round k of thread t's tensors and names, made before the threads start
    so that their loops are little but the submissions."""
    name = "threads.%d.%d" % (t, k)
    return (torch.full((16,), float(r + 1 + k)), torch.full((16,), float(r + 1 + k)),
            torch.full((2,), float(r * 1000 + t * 100 + k)),
            name + ".fast", name + ".scaled", name + ".gather")


def _submit(hvd, inputs):
    """One round: an in-place allreduce on the short path (plait.torch._fast),
    one on the general path (a prescale factor) and an allgather
    (plait.torch._handles.submit)."""
    fast, scaled, gathered, fast_name, scaled_name, gather_name = inputs
    return [(hvd.allreduce_async_(fast, name=fast_name, op=hvd.Sum), "fast"),
            (hvd.allreduce_async_(scaled, name=scaled_name, op=hvd.Sum,
                                  prescale_factor=2.0), "scaled"),
            (hvd.allgather_async(gathered, name=gather_name), "gather")]


def _check(hvd, t, k, kind, result):
    n = hvd.size()
    total = float(sum(q + 1 + k for q in range(n)))
    if kind == "fast":
        assert result.tolist() == [total] * 16, (t, k, kind)
    elif kind == "scaled":
        assert result.tolist() == [2.0 * total] * 16, (t, k, kind)
    else:
        want = [float(q * 1000 + t * 100 + k) for q in range(n) for _ in range(2)]
        assert result.tolist() == want, (t, k, kind)


def test_threads_submit_distinct_core_handles(hvd, yield_after_calls):
    """Submissions from four threads at once: every integer handle records a
    core handle of its own (one slot for the library's out pointer, shared
    by the threads, gave two records the same one: one leaked, the other
    waited and released twice); every result is right."""
    r = hvd.rank()
    inputs = [[_inputs(t, k, r) for k in range(ROUNDS)] for t in range(THREADS)]
    per_thread = [[] for _ in range(THREADS)]

    def submit_all(t):
        append = per_thread[t].append
        for round_inputs in inputs[t]:
            append(_submit(hvd, round_inputs))

    _run_threads(submit_all)
    submitted = [(t, k, op) for t in range(THREADS) for k, ops in enumerate(per_thread[t])
                 for op in ops]
    pointers = [_handles._handles[op[0]][0] for _t, _k, op in submitted]
    assert len(set(pointers)) == len(pointers), \
        "%d of %d submissions share a core handle" % (len(pointers) - len(set(pointers)),
                                                     len(pointers))
    for t, k, (hid, kind) in submitted:
        _check(hvd, t, k, kind, hvd.synchronize(hid))


def test_threads_synchronize_read_their_own_release(hvd, yield_after_calls):
    """Each of four threads submits and at once synchronizes its in-place
    allreduces, so one thread's plait_wait_release finds its operation
    finished while another's does not: each reads its own 'released' (one
    slot shared by the threads made a finished one look unfinished, or an
    unfinished one finished: a spurious timeout error or a second release)."""
    r = hvd.rank()

    def submit_and_wait(t):
        for k in range(ROUNDS):
            x = torch.full((16,), float(r + 1 + k))
            hid = hvd.allreduce_async_(x, name="threads.sync.%d.%d" % (t, k), op=hvd.Sum)
            _check(hvd, t, k, "fast", hvd.synchronize(hid))

    _run_threads(submit_and_wait)
