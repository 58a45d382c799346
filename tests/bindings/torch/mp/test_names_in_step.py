"""Unnamed operations stay matched across ranks after calls that raised on
some ranks only (issue 32, item 1).

Ranks match an unnamed operation by its number ('alltoall.noname.<n>'), so
a number consumed by a call that then raised on one rank and not on the
others put the ranks' counts out of step for good: every later unnamed
operation of that kind waited for a partner that never came. Each test
here makes one rank's call fail (in Python or in the C library) while the
others' fail differently or make no call, then runs the same unnamed
operation on every rank: it must complete. Before the fix these waited
until the stall abort (PLAIT_STALL_ABORT_S) and failed.
"""

import math

import pytest
import torch

from plait import _core
from plait.common.names import AUTO_NAMES


def _n(hvd):
    return hvd.size()


def test_float_splits_refused_by_dtype_whatever_the_values(hvd):
    """The issue's reproducer: rank 0's splits hold NaN, the others' 0.0.
    Horovod refuses a splits tensor that is not int32 with ValueError
    whatever the values; plait refuses any non-integer dtype, before a
    number is taken, so both ranks raise and both counts stay put."""
    n = _n(hvd)
    values = [math.nan] + [0.0] * (n - 1) if hvd.rank() == 0 else [0.0] * n
    with pytest.raises(ValueError, match="integers"):
        hvd.alltoall(torch.ones(n), splits=torch.tensor(values, dtype=torch.float32))
    out = hvd.alltoall(torch.ones(n))
    assert torch.equal(out, torch.ones(n))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bool, torch.complex64])
def test_non_integer_splits_dtypes_are_refused(hvd, dtype):
    n = _n(hvd)
    with pytest.raises(ValueError, match="integers"):
        hvd.alltoall(torch.ones(n), splits=torch.ones(n, dtype=dtype))


def test_splits_lists_convert_as_horovods(hvd):
    """A list goes through torch.tensor(splits, dtype=torch.int32) in
    Horovod: finite numbers are truncated; NaN and inf are refused."""
    n = _n(hvd)
    out, received = hvd.alltoall(torch.ones(n), splits=[1.7] * n)
    assert torch.equal(out, torch.ones(n)) and received.tolist() == [1] * n
    with pytest.raises(ValueError, match="not a number of rows"):
        hvd.alltoall(torch.ones(n), splits=[math.inf] * n)


def _refused(monkeypatch, fn_name):
    """Makes the C library's fn_name refuse the next submission on this rank
    (as it refuses a bad argument: PLAIT_ERR_INVALID_ARGUMENT), whether it is
    called through ctypes' CDLL function or its GIL-held twin (_core.gil,
    plait.torch's submission route)."""
    code = _core.RESULTS["PLAIT_ERR_INVALID_ARGUMENT"]
    calls = []

    def refusing(real):
        def refuse(*args):
            if not calls:
                calls.append(args)
                return code
            return real(*args)
        return refuse
    for holder in (_core.lib, _core.gil):
        monkeypatch.setattr(holder, fn_name, refusing(getattr(holder, fn_name)))
    return calls


# What the C library itself refuses on one rank, after Python's checks
# passed: a prescale factor that is not finite, splits that do not add up.
_REAL_REFUSALS = {
    "allreduce": lambda hvd, n: hvd.allreduce(torch.ones(2), prescale_factor=math.nan),
    "allreduce_async_": lambda hvd, n: hvd.allreduce_async_(torch.ones(2),
                                                            prescale_factor=math.inf),
    "grouped_allreduce": lambda hvd, n: hvd.grouped_allreduce([torch.ones(2)],
                                                              postscale_factor=math.nan),
    "reducescatter": lambda hvd, n: hvd.reducescatter(torch.ones(n), prescale_factor=math.nan),
    "alltoall": lambda hvd, n: hvd.alltoall(torch.ones(n), splits=[0] * n),
}

# Then every rank runs the same unnamed operation of that kind.
_AGAIN = {
    "allreduce": lambda hvd, n: hvd.allreduce(torch.ones(2), op=hvd.Sum),
    "allreduce_async_": lambda hvd, n: hvd.synchronize(
        hvd.allreduce_async_(torch.ones(2), op=hvd.Sum)),
    "grouped_allreduce": lambda hvd, n: hvd.grouped_allreduce([torch.ones(2)], op=hvd.Sum)[0],
    "reducescatter": lambda hvd, n: hvd.reducescatter(torch.ones(n), op=hvd.Sum),
    "alltoall": lambda hvd, n: hvd.alltoall(torch.ones(n)),
}
_EXPECT = {
    "allreduce": lambda n: torch.full((2,), float(n)),
    "allreduce_async_": lambda n: torch.full((2,), float(n)),
    "grouped_allreduce": lambda n: torch.full((2,), float(n)),
    "reducescatter": lambda n: torch.full((1,), float(n)),
    "alltoall": lambda n: torch.ones(n),
}


@pytest.mark.parametrize("kind", sorted(_REAL_REFUSALS))
def test_refused_in_c_on_one_rank_consumes_no_number(hvd, kind):
    n = _n(hvd)
    if hvd.rank() == 0:
        with pytest.raises(ValueError):
            _REAL_REFUSALS[kind](hvd, n)
    assert torch.equal(_AGAIN[kind](hvd, n), _EXPECT[kind](n))


# Every submitting call of plait.torch, refused by the C library on rank 0
# (the refusal made here: some have no argument the library refuses that
# Python lets through), then run unnamed on every rank.
_SUBMITS = {
    "allreduce": ("plait_allreduce_async", lambda hvd, n: hvd.allreduce(torch.ones(2)),
                  torch.ones(2)),
    "allreduce_async": ("plait_allreduce_async",
                        lambda hvd, n: hvd.synchronize(hvd.allreduce_async(torch.ones(2))),
                        torch.ones(2)),
    "grouped_allreduce_async_": ("plait_grouped_allreduce_async",
                                 lambda hvd, n: hvd.synchronize(hvd.grouped_allreduce_async_(
                                     [torch.ones(2), torch.ones(1)]))[1],
                                 torch.ones(1)),
    "allgather": ("plait_allgather_async", lambda hvd, n: hvd.allgather(torch.ones(1)),
                  None),
    "grouped_allgather": ("plait_allgather_async",
                          lambda hvd, n: hvd.grouped_allgather([torch.ones(1), torch.ones(2)])[0],
                          None),
    "broadcast": ("plait_broadcast_async", lambda hvd, n: hvd.broadcast(torch.ones(2), 0),
                  torch.ones(2)),
    "broadcast_": ("plait_broadcast_async", lambda hvd, n: hvd.broadcast_(torch.ones(2), 0),
                   torch.ones(2)),
    "alltoall": ("plait_alltoall_async", lambda hvd, n: hvd.alltoall(torch.ones(n)), None),
    "reducescatter": ("plait_reducescatter_async",
                      lambda hvd, n: hvd.reducescatter(torch.ones(n)), torch.ones(1)),
    "grouped_reducescatter": ("plait_reducescatter_async",
                              lambda hvd, n: hvd.grouped_reducescatter([torch.ones(n)])[0],
                              torch.ones(1)),
}


@pytest.mark.parametrize("kind", sorted(_SUBMITS))
def test_every_operation_refused_on_one_rank_stays_in_step(hvd, monkeypatch, kind):
    fn_name, call, expect = _SUBMITS[kind]
    n = _n(hvd)
    if hvd.rank() == 0:
        calls = _refused(monkeypatch, fn_name)
        with pytest.raises(ValueError):
            call(hvd, n)
        assert calls, "the refusal was not reached"
        monkeypatch.undo()
    out = call(hvd, n)
    if expect is None:  # allgather and alltoall of ones: ones of n rows
        expect = torch.ones(n)
    assert torch.equal(out, expect)


def test_counts_per_kind_and_process_set(hvd):
    before = AUTO_NAMES.peek("allgather")
    hvd.allreduce(torch.ones(1))
    assert AUTO_NAMES.peek("allgather") == before
    hvd.allgather(torch.ones(1))
    assert AUTO_NAMES.peek("allgather") == before + 1


def test_mixed_dtype_alltoall_after_hundreds_of_operations(hvd):
    """A long-lived job: hundreds of unnamed operations of every kind, some
    refused on one rank only (splits of a float dtype whose values differ
    between ranks), then an alltoall whose dtype differs between ranks
    (the library fails it on every rank, a HorovodInternalError), then
    unnamed alltoalls that must complete."""
    n = _n(hvd)
    r = hvd.rank()
    for i in range(60):
        hvd.allreduce(torch.ones(3), op=hvd.Sum)
        hvd.allgather(torch.ones(1))
        hvd.broadcast(torch.ones(2), i % n)
        hvd.alltoall(torch.ones(n))
        hvd.reducescatter(torch.ones(n))
        if i % 10 == 0:
            garbage = [math.nan if r == 0 else 0.0] + [0.0] * (n - 1)
            with pytest.raises(ValueError):
                hvd.alltoall(torch.ones(n), splits=torch.tensor(garbage))
    dtype = torch.float32 if r == 0 else torch.float64
    with pytest.raises(hvd.HorovodInternalError):
        hvd.alltoall(torch.ones(n, dtype=dtype))
    for _ in range(3):
        assert torch.equal(hvd.alltoall(torch.ones(n)), torch.ones(n))
