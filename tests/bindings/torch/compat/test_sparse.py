"""sparse_allreduce_async and sparse gradients: Horovod allgathers the
indices and values (divided by size for Average) and returns an uncoalesced
sparse tensor from a callable handle; DistributedOptimizer uses it for
sparse gradients (nn.Embedding(sparse=True)), or a dense allreduce with
sparse_as_dense=True."""

import pytest
import torch


def sparse_of(r):
    idx = torch.tensor([[r, 1, 2 * r % 5], [0, 2, 1]])
    val = torch.tensor([1.0 + r, -2.0, 4.0 * (r + 1)])
    return torch.sparse_coo_tensor(idx, val, (5, 3))


@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_sparse_allreduce_async(hvd, opname):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()
    handle = hvd.sparse_allreduce_async(sparse_of(me), name="sparse." + opname, op=op)
    assert callable(handle)
    out = handle()
    assert out.is_sparse and out.shape == (5, 3)
    # Uncoalesced: every rank's entries, in rank order.
    assert out._nnz() == 3 * n
    idx = torch.cat([sparse_of(r)._indices() for r in range(n)], dim=1)
    val = torch.cat([sparse_of(r)._values() for r in range(n)])
    if op == hvd.Average:
        val = val / n
    assert torch.equal(out._indices(), idx)
    assert torch.equal(out._values(), val)


def embedding_model():
    torch.manual_seed(0)
    m = torch.nn.Embedding(6, 2, sparse=True)
    with torch.no_grad():
        m.weight.copy_(torch.arange(12.0).reshape(6, 2) / 4)
    return m


def lookups(r):
    return torch.tensor([r, r + 1, 4])


@pytest.mark.parametrize("as_dense", [False, True], ids=["sparse", "sparse_as_dense"])
def test_optimizer_sparse_gradients(hvd, as_dense):
    n, me = hvd.size(), hvd.rank()
    model = embedding_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                   named_parameters=model.named_parameters(),
                                   sparse_as_dense=as_dense)
    (model(lookups(me)).sum() * (me + 1)).backward()
    opt.step()
    dense = torch.zeros(6, 2)
    for r in range(n):
        dense.index_add_(0, lookups(r), torch.full((3, 2), float(r + 1)) / n)
    expected = embedding_model().weight.detach() - 0.5 * dense
    assert torch.allclose(model.weight.detach(), expected, rtol=0, atol=1e-6), \
        (model.weight, expected)
    w = hvd.allgather(model.weight.detach().reshape(1, -1), name="sparse.w.%s" % as_dense)
    assert all(torch.equal(w[0], w[r]) for r in range(n))


def test_broadcast_optimizer_state_with_sparse_model(hvd):
    # The model argument marks sparse embeddings so the zero-gradient step
    # gives them sparse gradients (Horovod's signature).
    me = hvd.rank()
    model = embedding_model()
    # (With momentum, Horovod 0.28 fails: the momentum buffer it creates
    # is sparse and broadcast refuses sparse tensors.)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (me + 1))
    hvd.broadcast_optimizer_state(opt, root_rank=0, model=model)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
