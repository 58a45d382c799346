"""hvd.join() against Horovod 0.28.1 (measured with horovodrun --gloo, torch
CPU tensors; docs/horovod-comparison.md "Join").

Every rank but the last joins at once; the last one runs an operation while
the others have joined, then joins too:

- allreduce: the joined ranks give the op's identity, and average still
  divides by every rank (Horovod: 0.5 for ones at 2 ranks);
- broadcast (any root), alltoall, reducescatter: raise HorovodInternalError
  on the active rank, saying the operation is not supported with join
  (Horovod: "Broadcast is not supported with Join at this time."), and the
  job goes on;
- allgather: only the active rank's rows (Horovod raises; plait does better);
- barrier: completes (Horovod's joined rank crashes with SIGSEGV).
"""

import pytest
import torch


def _active(hvd):
    return hvd.rank() == hvd.size() - 1


def _others_join_then(hvd, fn):
    """Runs fn on the last rank while the others have joined; returns what fn
    returned there (None elsewhere). Every rank gets the last rank back from
    join."""
    out = None
    if _active(hvd):
        out = fn()
    assert hvd.join() == hvd.size() - 1
    return out


def test_allreduce_average_divides_by_every_rank(hvd):
    n = hvd.size()
    out = _others_join_then(hvd, lambda: hvd.allreduce(torch.ones(3), name="jf.avg"))
    if _active(hvd):
        assert torch.allclose(out, torch.full((3,), 1.0 / n))


def test_allreduce_sum_min_max_use_identities(hvd):
    def run():
        x = torch.tensor([2.0, -3.0])
        return [hvd.allreduce(x, op=op, name="jf.op.%d" % k).tolist()
                for k, op in enumerate((hvd.Sum, hvd.Min, hvd.Max))]
    out = _others_join_then(hvd, run)
    if _active(hvd):
        assert out == [[2.0, -3.0]] * 3


@pytest.mark.parametrize("what", ["broadcast_root_active", "broadcast_root_joined",
                                  "alltoall", "reducescatter"])
def test_unsupported_with_join_raises_and_job_goes_on(hvd, what):
    n = hvd.size()

    def run():
        x = torch.arange(float(2 * n))
        with pytest.raises(hvd.HorovodInternalError) as err:
            if what == "broadcast_root_active":
                hvd.broadcast(x, root_rank=n - 1, name="jf." + what)
            elif what == "broadcast_root_joined":
                hvd.broadcast(x, root_rank=0, name="jf." + what)
            elif what == "alltoall":
                hvd.alltoall(x, name="jf." + what)
            else:
                hvd.reducescatter(x, name="jf." + what)
        msg = str(err.value)
        assert "not supported with join" in msg, msg
        assert "jf." + what in msg and "joined" in msg, msg
        return True
    assert _others_join_then(hvd, run) in (True, None)
    # every rank takes part again
    y = hvd.broadcast(torch.full((2,), float(hvd.rank())), root_rank=0, name="jf.after." + what)
    assert y.tolist() == [0.0, 0.0]


def test_allgather_gives_only_the_active_rows(hvd):
    n = hvd.size()
    out = _others_join_then(
        hvd, lambda: hvd.allgather(torch.full((2, 3), float(n)), name="jf.gather"))
    if _active(hvd):
        assert out.shape == (2, 3)
        assert out.eq(float(n)).all()


def test_barrier_completes(hvd):
    assert _others_join_then(hvd, lambda: hvd.barrier() or "done") in ("done", None)
    # a barrier of every rank afterwards: the joined ranks counted the one they
    # took part in, so all name this one alike
    hvd.barrier()


_FUSED_DTYPES = [torch.int32, torch.int64, torch.float32, torch.float64]


@pytest.mark.parametrize("cache", ["cold", "warm"])
@pytest.mark.parametrize("how", ["async", "grouped"])
def test_fused_allreduce_average_while_the_others_joined(hvd, cache, how):
    """Two allreduces of 5^d and 17^d elements (d = 1, 2, 3) fused into one
    response while the others have joined (issue 32): the joined ranks'
    identities must have exactly the layout of the active rank's fused
    allreduce on every transport (over ofi shm they once did not: the job
    died with "Truncation error"). cache=warm: the same operations first
    ran on every rank, so the joined round comes from the response cache.
    Data are multiples of the rank count, so average is exact in ints."""
    n = hvd.size()

    def average(total):
        """total scaled by 1/n as Horovod scales: ints in double, truncated;
        float32 by the factor rounded to float."""
        if total.is_floating_point():
            return total * torch.tensor(1.0 / n, dtype=total.dtype)
        return torch.trunc(total.double() * (1.0 / n)).to(total.dtype)

    def pair(d, dt):
        return [(n * torch.arange(side ** d)).reshape((side,) * d).to(dt) - n * 3
                for side in (5, 17)]

    def run(names, d, dt, expect):
        xs = pair(d, dt)
        if how == "grouped":
            outs = hvd.grouped_allreduce(xs, name=names[0], op=hvd.Average)
        else:
            hs = [hvd.allreduce_async(x, name=nm, op=hvd.Average) for x, nm in zip(xs, names)]
            outs = [hvd.synchronize(h) for h in hs]
        for x, out in zip(xs, outs):
            assert out.dtype == dt and out.shape == x.shape
            assert torch.equal(out, expect(x)), (names, out.flatten()[:8], x.flatten()[:8])
        return True

    for d in (1, 2, 3):
        for dt in _FUSED_DTYPES:
            names = ["jf.fused.%s.%s.%d.%s.%s" % (how, cache, d, str(dt)[6:], k) for k in "ab"]
            if cache == "warm":  # every rank, equal tensors
                run(names, d, dt, lambda x: average(x * n))
            out = _others_join_then(hvd, lambda: run(names, d, dt, average))
            assert out in (True, None)
    # every rank takes part again
    y = hvd.allreduce(torch.ones(4), name="jf.fused.after.%s.%s" % (how, cache), op=hvd.Sum)
    assert y.tolist() == [float(n)] * 4


def test_unnamed_operations_match_after_join(hvd):
    """The active rank issues unnamed operations while the others have
    joined (an allreduce, an allgather, a broadcast refused with join), so
    the ranks have issued different numbers of each kind; after join every
    rank's count starts again, and unnamed operations of every kind match.
    (Horovod names them by handle: they would wait for each other.)"""
    n = hvd.size()

    def uneven():
        hvd.allreduce(torch.ones(2))
        hvd.allgather(torch.ones(1))
        with pytest.raises(hvd.HorovodInternalError):
            hvd.broadcast(torch.ones(1), 0)
    _others_join_then(hvd, uneven)
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))
    assert torch.equal(hvd.allgather(torch.ones(1)), torch.ones(n))
    assert torch.equal(hvd.broadcast(torch.full((1,), float(hvd.rank())), n - 1),
                       torch.full((1,), float(n - 1)))
