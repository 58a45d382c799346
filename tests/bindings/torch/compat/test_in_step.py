"""After each deliberate difference (docs/horovod-comparison.md, "Rows where
plait differs by design"), a Horovod program goes on in step: it runs what
Horovod refuses, catches whatever comes (Horovod's error, or none on
plait), then issues UNNAMED collectives of every kind. Those match ranks by
their number (Horovod: the handle; plait: a count per kind), so they only
complete if every rank's count moved alike. The suite's own meeting after
each test is named and would not notice a drift; these tests do.

The join-allgather row (ranks issue different operations by design) is
checked for plait in tests/bindings/torch/mp/test_join_fidelity.py; Horovod's
handle-numbered names stay out of step after uneven batches there.
"""

import pytest
import torch


def _unnamed_collectives_complete(hvd):
    n = hvd.size()
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))
    assert torch.equal(hvd.allgather(torch.ones(1)), torch.ones(n))
    assert torch.equal(hvd.broadcast(torch.full((1,), float(hvd.rank())), 0), torch.zeros(1))
    assert torch.equal(hvd.alltoall(torch.ones(n)), torch.ones(n))
    assert hvd.reducescatter(torch.ones(n), op=hvd.Sum).tolist() == [float(n)]


def _attempt(fn):
    try:
        fn()
    except Exception:  # noqa: BLE001 -- Horovod's error, or plait's
        pass


def _min_gradient(hvd):
    x = torch.ones(2, requires_grad=True)
    hvd.allreduce(x, op=hvd.Min).sum().backward()


def _synchronize_twice(hvd):
    h = hvd.allreduce_async(torch.ones(1))
    hvd.synchronize(h)
    hvd.synchronize(h)


def _sync_batch_norm(hvd):
    bn = hvd.SyncBatchNorm(2)
    bn(torch.arange(8.0).reshape(4, 2) + hvd.rank()).sum().backward()


_ROWS = {
    "min-max-product-gradient": _min_gradient,
    "synchronize-unknown-handle": _synchronize_twice,
    "reducescatter-min-max-product": lambda hvd: hvd.reducescatter(
        torch.ones(hvd.size()), op=hvd.Min),
    "wider-dtypes": lambda hvd: hvd.allreduce(torch.ones(2, dtype=torch.uint8), op=hvd.Sum),
    "non-contiguous": lambda hvd: hvd.allreduce(torch.ones(2, 3).t(), op=hvd.Sum),
    "sync-batch-norm-cpu": _sync_batch_norm,
    "adasum": lambda hvd: hvd.allreduce(torch.ones(2), op=hvd.Adasum),
}


@pytest.mark.parametrize("row", sorted(_ROWS))
def test_unnamed_collectives_match_after_a_difference(hvd, row):
    _unnamed_collectives_complete(hvd)  # in step before
    _attempt(lambda: _ROWS[row](hvd))
    _unnamed_collectives_complete(hvd)
