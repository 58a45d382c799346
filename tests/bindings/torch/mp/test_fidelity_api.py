"""plait.torch against horovod.torch 0.28.1 on every rank (issue 10): the
exception classes raised in each situation, a second init, the timeline's
files, and the global process set. Horovod's behaviour in each case was
measured by running Horovod 0.28.1 (Gloo, 2 ranks) and is written beside it.
"""

import json
import os
import shutil
import tempfile

import pytest
import torch

import plait
from plait.common.exceptions import HorovodInternalError


def test_second_init_is_a_no_op(hvd):
    r, n = hvd.rank(), hvd.size()
    hvd.init()
    hvd.init(comm=list(range(n)))
    assert hvd.is_initialized() and (hvd.rank(), hvd.size()) == (r, n)
    assert hvd.allreduce(torch.ones(2), name="fid.reinit", op=hvd.Sum).tolist() == [n, n]


@pytest.mark.parametrize("case", ["shape", "dtype", "op", "root"])
def test_mismatch_across_ranks_is_horovod_internal_error(hvd, case):
    """Horovod: "Mismatched ALLREDUCE tensor shapes" (data types, reduction
    operation, BROADCAST root ranks) raised by synchronize as
    HorovodInternalError on every rank; the job goes on."""
    r = hvd.rank()
    name = "fid.mismatch." + case
    if case == "shape":
        op = lambda: hvd.allreduce(torch.ones(2 + r), name=name)  # noqa: E731
    elif case == "dtype":
        op = lambda: hvd.allreduce(  # noqa: E731
            torch.ones(2, dtype=torch.float32 if r == 0 else torch.float64), name=name)
    elif case == "op":
        op = lambda: hvd.allreduce(torch.ones(2), name=name,  # noqa: E731
                                   op=hvd.Sum if r == 0 else hvd.Max)
    else:
        op = lambda: hvd.broadcast(torch.ones(2), root_rank=min(r, 1), name=name)  # noqa: E731
    with pytest.raises(HorovodInternalError) as err:
        op()
    assert isinstance(err.value, plait.MismatchError) and isinstance(err.value, RuntimeError)
    assert not isinstance(err.value, ValueError)
    n = hvd.size()
    assert hvd.allreduce(torch.ones(2), name=name + ".after", op=hvd.Sum).tolist() == [n, n]


def test_bad_arguments_are_value_errors(hvd):
    """Horovod: a name already in flight, a root rank out of range and bad
    alltoall splits are ValueError (std::invalid_argument), not
    HorovodInternalError."""
    # Each rank in turn submits a name twice while the others hold back
    # theirs until a barrier, so the first is surely still in flight.
    for k in range(hvd.size()):
        name = "fid.dup.%d" % k
        if hvd.rank() == k:
            h = hvd.allreduce_async(torch.ones(2), name=name)
            with pytest.raises(ValueError) as err:
                hvd.allreduce_async(torch.ones(2), name=name)
            assert not isinstance(err.value, HorovodInternalError)
            assert name in str(err.value)
            hvd.barrier()
            hvd.synchronize(h)
        else:
            hvd.barrier()
            hvd.allreduce(torch.ones(2), name=name)
    with pytest.raises(ValueError) as err:
        hvd.broadcast(torch.ones(2), root_rank=hvd.size(), name="fid.root")
    assert not isinstance(err.value, HorovodInternalError)
    with pytest.raises(ValueError) as err:
        hvd.alltoall(torch.ones(4), splits=torch.tensor([5] + [0] * (hvd.size() - 1)),
                     name="fid.splits")
    assert not isinstance(err.value, HorovodInternalError)
    hvd.barrier()


def _shared_dir(hvd):
    path = tempfile.mkdtemp(prefix="plait-fid-") if hvd.rank() == 0 else None
    return hvd.broadcast_object(path, root_rank=0, name="fid.dir")


def test_timeline_written_by_rank_0_only(hvd):
    """Horovod writes the timeline on the coordinator (rank 0) only, so every
    rank may pass the same path. With "%r" every rank writes its own."""
    d = _shared_dir(hvd)
    hvd.start_timeline(os.path.join(d, "same.json"))
    for i in range(3):
        hvd.allreduce(torch.ones(4), name="fid.tl.%d" % i)
    hvd.stop_timeline()
    hvd.start_timeline(os.path.join(d, "own.%r.json"))
    hvd.allreduce(torch.ones(4), name="fid.tl.own")
    # A timeline started with one path for all replaces every rank's own.
    hvd.start_timeline(os.path.join(d, "again.json"))
    hvd.allreduce(torch.ones(4), name="fid.tl.again")
    hvd.stop_timeline()
    hvd.barrier()
    if hvd.rank() == 0:
        with open(os.path.join(d, "same.json")) as f:
            events = json.load(f)
        assert {e["pid"] for e in events if "pid" in e} == {0}
        assert "fid.tl.2" in json.dumps(events)
        for r in range(hvd.size()):
            with open(os.path.join(d, "own.%d.json" % r)) as f:
                own = f.read()
            assert "fid.tl.own" in own and "fid.tl.again" not in own, r
        with open(os.path.join(d, "again.json")) as f:
            assert "fid.tl.again" in f.read()
    hvd.barrier()
    if hvd.rank() == 0:
        shutil.rmtree(d, ignore_errors=True)


def test_global_process_set_everywhere(hvd):
    ps = hvd.global_process_set
    n, r = hvd.size(), hvd.rank()
    assert ps.ranks == list(range(n)) and ps.size() == n and ps.rank() == r and ps.included()
    x = torch.ones(n * 2) * (r + 1)
    assert hvd.allreduce(x, op=hvd.Sum, name="fid.ps.ar", process_set=ps).tolist() == \
        [n * (n + 1) / 2] * (2 * n)
    assert hvd.allgather(x, name="fid.ps.ag", process_set=ps).shape[0] == 2 * n * n
    assert hvd.broadcast(x, 0, name="fid.ps.bc", process_set=ps).tolist() == [1.0] * (2 * n)
    assert hvd.alltoall(x, name="fid.ps.a2a", process_set=ps).shape[0] == 2 * n
    assert hvd.reducescatter(x, op=hvd.Sum, name="fid.ps.rs", process_set=ps).shape[0] == 2
    hvd.barrier(process_set=ps)


def test_other_process_sets_checked_on_every_rank(hvd):
    """A set that was never registered is refused before anything is sent
    (so no rank waits for another); without dynamic process sets adding one
    is refused as Horovod refuses it. tests/bindings/torch/psets runs real sets."""
    other = hvd.ProcessSet([0])
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(2), name="fid.ps.other", process_set=other)
    with pytest.raises(ValueError, match="HOROVOD_DYNAMIC_PROCESS_SETS"):
        hvd.add_process_set([0])
    assert hvd.remove_process_set(other) is False
    hvd.barrier()
