"""horovod.torch 0.28.1's operation-level API on plait.torch: names,
grouped allgather and reducescatter, alltoall_async's result, the sparse
allreduce, DistributedOptimizer's parameter names and
broadcast_optimizer_state with parameters that have no gradient yet."""

import pytest
import torch

import plait.torch as hvd


def rank_rows(k, rows, seed, cols=3):
    g = torch.Generator().manual_seed(seed * 17 + k)
    return torch.randint(-9, 10, (rows, cols), generator=g).to(torch.float32)


def test_kinds_may_share_a_name(hvd):
    """Horovod names an operation '<kind>.<name>': an allreduce, an
    allgather, a broadcast, an alltoall and a reducescatter all named 'x' are
    different operations and may be in flight together."""
    n, r = hvd.size(), hvd.rank()
    x = torch.full((n, 2), float(r + 1))
    handles = [hvd.allreduce_async(x, name="x", op=hvd.Sum),
               hvd.allgather_async(x, name="x"),
               hvd.broadcast_async(x, 0, name="x"),
               hvd.alltoall_async(x, name="x"),
               hvd.reducescatter_async(x, name="x", op=hvd.Sum),
               hvd.grouped_allreduce_async([x, x], name="x", op=hvd.Sum)]
    total = float(n * (n + 1) // 2)
    ar, ag, bc, (a2a, recv), rs, gar = [hvd.synchronize(h) for h in handles]
    assert torch.equal(ar, torch.full((n, 2), total))
    assert torch.equal(ag, torch.cat([torch.full((n, 2), float(k + 1)) for k in range(n)]))
    assert torch.equal(bc, torch.full((n, 2), 1.0))
    assert torch.equal(a2a, torch.tensor([[float(k + 1)] * 2 for k in range(n)]))
    assert torch.equal(recv, torch.ones(n, dtype=torch.int32))
    assert torch.equal(rs, torch.full((1, 2), total))
    assert all(torch.equal(t, ar) for t in gar)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_grouped_allgather(hvd, asynchronous):
    n, r = hvd.size(), hvd.rank()
    rows_a = [k + 1 for k in range(n)]
    rows_b = [n - k for k in range(n)]
    a = [rank_rows(k, rows_a[k], 1) for k in range(n)]
    b = [rank_rows(k, rows_b[k], 2, cols=1).to(torch.int64) for k in range(n)]
    c = [torch.full((2,), k, dtype=torch.uint8) for k in range(n)]
    mine = [a[r], b[r], c[r]]
    if asynchronous:
        h = hvd.grouped_allgather_async(mine, name="gag.%d" % asynchronous)
        while not hvd.poll(h):
            pass
        out = hvd.synchronize(h)
    else:
        out = hvd.grouped_allgather(mine, name="gag.%d" % asynchronous)
    assert isinstance(out, tuple) and len(out) == 3  # Horovod's: a tuple either way
    assert torch.equal(out[0], torch.cat(a))
    assert torch.equal(out[1], torch.cat(b))
    assert torch.equal(out[2], torch.cat(c))


@pytest.mark.parametrize("op", ["Sum", "Average"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_grouped_reducescatter(hvd, op, asynchronous):
    n, r = hvd.size(), hvd.rank()
    a = [rank_rows(k, 2 * n + 1, 3) for k in range(n)]
    b = [rank_rows(k, n, 4, cols=2) for k in range(n)]
    kwargs = dict(name="grs.%s.%d" % (op, asynchronous), op=getattr(hvd, op),
                  prescale_factor=0.5, postscale_factor=4.0)
    if asynchronous:
        out = hvd.synchronize(hvd.grouped_reducescatter_async([a[r], b[r]], **kwargs))
    else:
        out = hvd.grouped_reducescatter([a[r], b[r]], **kwargs)
    # Horovod's: synchronize() gives a tuple, grouped_reducescatter a list.
    assert isinstance(out, tuple if asynchronous else list) and len(out) == 2
    for got, inputs in zip(out, (a, b)):
        total = sum(t * 0.5 for t in inputs) * (4.0 / n if op == "Average" else 4.0)
        rows = inputs[0].shape[0]
        counts = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
        assert torch.equal(got, torch.split(total, counts)[r])


def test_grouped_allreduce_result_types(hvd):
    """As Horovod: synchronize() of a grouped handle and the in-place form
    give a tuple, grouped_allreduce a list."""
    xs = [torch.ones(2), torch.ones(3)]
    assert isinstance(hvd.synchronize(hvd.grouped_allreduce_async(xs, name="t.a")), tuple)
    assert isinstance(hvd.synchronize(hvd.grouped_allreduce_async_(xs, name="t.b")), tuple)
    assert isinstance(hvd.grouped_allreduce_(xs, name="t.c"), tuple)
    assert isinstance(hvd.grouped_allreduce(xs, name="t.d"), list)


def test_grouped_ops_check_their_arguments(hvd):
    with pytest.raises(ValueError, match="empty"):
        hvd.grouped_allgather([])
    with pytest.raises(TypeError, match="list of tensors"):
        hvd.grouped_reducescatter(torch.ones(2))
    with pytest.raises(TypeError, match="torch.Tensor"):
        hvd.grouped_allgather_async([torch.ones(2), 3])
    with pytest.raises(ValueError, match="scalar"):
        hvd.grouped_allgather([torch.tensor(1.0)])


def test_alltoall_async_returns_received_splits(hvd):
    """Horovod's synchronize(alltoall_async(...)) is always the pair
    (output, received splits), int32 or the dtype of a splits tensor."""
    n, r = hvd.size(), hvd.rank()
    x = torch.arange(n * 2, dtype=torch.float64) + 100 * r
    out, recv = hvd.synchronize(hvd.alltoall_async(x, name="a2a.nosplits"))
    assert recv.dtype == torch.int32 and torch.equal(recv, torch.full((n,), 2, dtype=torch.int32))
    assert torch.equal(out, torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.float64)
                                       + 100 * k for k in range(n)]))
    splits = torch.tensor([1] * n, dtype=torch.int32)
    out, recv = hvd.synchronize(hvd.alltoall_async(x[:n], splits, name="a2a.tensor"))
    assert recv.dtype == torch.int32 and torch.equal(recv, splits)
    # alltoall itself returns the output alone without splits, as Horovod.
    out = hvd.alltoall(x, name="a2a.plain")
    assert isinstance(out, torch.Tensor) and out.shape == (2 * n,)


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_sparse_allreduce_async(hvd, op):
    n, r = hvd.size(), hvd.rank()
    sparse = [torch.sparse_coo_tensor(torch.tensor([[k % 4, 3], [0, k % 2]]),
                                      torch.tensor([k + 1.0, 2.0 * k]), (4, 2))
              for k in range(n)]
    handle = hvd.sparse_allreduce_async(sparse[r], name="sparse." + op, op=getattr(hvd, op))
    assert callable(handle)
    got = handle()
    assert got.is_sparse and got.shape == (4, 2)
    values = torch.cat([s._values() for s in sparse])
    if op == "Average":
        values = values / n
    assert torch.equal(got._indices(), torch.cat([s._indices() for s in sparse], 1))
    assert torch.equal(got._values(), values)
    assert got is handle()  # calling it again gives the same result
    with pytest.raises(TypeError, match="sparse COO"):
        hvd.sparse_allreduce_async(torch.ones(2), name="dense", op=hvd.Sum)


def test_optimizer_names_are_horovods(hvd):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    params = list(model.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.SGD([{"params": params[:2]},
                                                    {"params": params[2:]}], lr=0.1))
    assert [opt._plait_names[p] for p in params] == [
        "allreduce.noname.0.0", "allreduce.noname.0.1", "allreduce.noname.1.0",
        "allreduce.noname.1.1"]
    # A tensor named twice: the name that sorts last, as Horovod's
    # {v: k for k, v in sorted(named_parameters)}.
    named = list(model.named_parameters()) + [("zz.alias", params[0])]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), named_parameters=named)
    assert opt._plait_names[params[0]] == "zz.alias"
    assert opt._plait_names[params[1]] == "0.bias"
    # And it trains: gradients are averaged under those names.
    x = torch.ones(1, 2) * (hvd.rank() + 1)
    model(x).sum().backward()
    opt.step()


def test_broadcast_optimizer_state_with_missing_gradients(hvd):
    """Parameters without a gradient (never used, or not yet): a fresh
    optimizer gets state for every parameter that requires grad, and one
    that stepped without some of them broadcasts what the root has."""
    r = hvd.rank()
    torch.manual_seed(5 + r)  # different values on every rank
    model = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 2), "b": torch.nn.Linear(2, 2),
                                 "emb": torch.nn.Embedding(4, 2, sparse=True)})
    model["b"].bias.requires_grad_(False)
    opt = torch.optim.Adam([p for n, p in model.named_parameters() if not n.startswith("emb")],
                           lr=0.1)
    model["a"](torch.ones(1, 3)).sum().backward()  # b gets no gradient
    assert model["b"].weight.grad is None
    a_grad = model["a"].weight.grad.clone()
    hvd.broadcast_optimizer_state(opt, root_rank=0, model=model)
    # As Horovod's: a parameter without a gradient keeps the zero one of the
    # initialisation step; plait keeps a gradient that was there.
    assert torch.equal(model["b"].weight.grad, torch.zeros(2, 2))
    assert model["b"].bias.grad is None  # frozen
    assert torch.equal(model["a"].weight.grad, a_grad)
    got = {k: v for k, v in opt.state_dict()["state"].items()}
    assert sorted(got) == [0, 1, 2]  # every parameter that requires grad
    for st in got.values():
        for v in st.values():
            if isinstance(v, torch.Tensor):
                gathered = hvd.allgather(v.reshape(1, -1).double(), name="bos.check")
                assert torch.equal(gathered, gathered[:1].expand_as(gathered))

    # SGD with a sparse embedding, as Horovod's model= argument allows.
    sgd = torch.optim.SGD(model["emb"].parameters(), lr=0.1)
    hvd.broadcast_optimizer_state(sgd, root_rank=0, model=model)
    assert sgd.param_groups[0]["lr"] == 0.1
