"""join(): a rank out of data joins; until every rank has joined, the
others' allreduces go on with the joined ranks contributing zeros (Average
still divides by the full size); join() returns the rank that joined
last. Allgather, broadcast, alltoall and reducescatter while a rank has
joined fail with HorovodInternalError in Horovod 0.28 ("not supported with
Join at this time"); plait gathers what the other ranks have (row
join-allgather)."""

import pytest
import torch

import hvd_expected as hn

pytestmark = pytest.mark.uneven


@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_join_uneven_batches(hvd, opname):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()
    steps = [r + 1 for r in range(n)]  # rank r has r + 1 batches

    def batch(r, k):
        return torch.tensor([1.0 + r, 10.0 * k - r, 2.0], dtype=torch.float64)

    for k in range(steps[me]):
        out = hvd.allreduce(batch(me, k), op=op, name="join.%s.%d" % (opname, k))
        xs = [batch(r, k) if k < steps[r] else torch.zeros(3, dtype=torch.float64)
              for r in range(n)]
        assert torch.equal(out, hn.allreduce(hvd, xs, op)), (k, out)
    # The rank with the most batches finishes last: its last allreduce needs
    # every other rank to have joined.
    assert hvd.join() == n - 1


def test_join_with_optimizer(hvd):
    # The Horovod example: uneven batches with DistributedOptimizer, then
    # join(). A joined rank contributes zero gradients (averaged over the
    # full size) and its own parameters stop moving.
    n, me = hvd.size(), hvd.rank()
    lr = 0.125

    def model():
        m = torch.nn.Linear(2, 1)
        with torch.no_grad():
            m.weight.copy_(torch.tensor([[0.5, -0.25]]))
            m.bias.fill_(1.0)
        return m

    def x(k):
        return torch.tensor([[1.0, float(k)]])

    net = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=lr),
                                   named_parameters=net.named_parameters())
    for k in range(me + 1):
        opt.zero_grad()
        net(x(k)).sum().backward()
        opt.step()
    assert hvd.join() == n - 1
    # The gradient of sum(W x + b) is x for W and 1 for b, whatever W is.
    w, b = model().weight.detach(), model().bias.detach()
    for k in range(me + 1):
        gw = hn.allreduce(hvd, [x(k) if k <= r else torch.zeros(1, 2) for r in range(n)],
                          hvd.Average)
        gb = hn.allreduce(hvd, [torch.ones(1) if k <= r else torch.zeros(1) for r in range(n)],
                          hvd.Average)
        w, b = w.add(gw, alpha=-lr), b.add(gb, alpha=-lr)
    assert torch.equal(net.weight.detach(), w) and torch.equal(net.bias.detach(), b)


@pytest.mark.parametrize("kind", ["broadcast", "alltoall", "reducescatter"])
def test_join_while_others_use_other_ops(hvd, kind):
    # Rank 0 joins at once; the others try an operation that Horovod 0.28
    # refuses while a rank has joined, then join too.
    n, me = hvd.size(), hvd.rank()
    if me == 0:
        last = hvd.join()
    else:
        x = torch.ones(n - 1, 2)
        calls = {
            "broadcast": lambda: hvd.broadcast(x, root_rank=1, name="join.bc"),
            "alltoall": lambda: hvd.alltoall(torch.ones(n, 2), name="join.a2a"),
            "reducescatter": lambda: hvd.reducescatter(torch.ones(n, 2), name="join.rs"),
        }
        with pytest.raises(hvd.HorovodInternalError):
            calls[kind]()
        last = hvd.join()
    assert 1 <= last < n if n > 1 else last == 0
    # Everyone is back: the job goes on.
    assert torch.equal(hvd.allreduce(torch.ones(1), op=hvd.Sum, name="join.after." + kind),
                       torch.full((1,), float(n)))


@pytest.mark.differs("join-allgather")
def test_join_while_others_allgather(hvd, impl):
    # Horovod refuses an allgather while a rank has joined; plait gathers
    # the rows of the ranks that have not joined (a joined rank has none).
    n, me = hvd.size(), hvd.rank()
    if me == 0:
        last = hvd.join()
    else:
        x = torch.full((2, 3), float(me))
        if impl == "horovod":
            with pytest.raises(hvd.HorovodInternalError):
                hvd.allgather(x, name="join.ag")
        else:
            out = hvd.allgather(x, name="join.ag")
            assert torch.equal(out, torch.cat([torch.full((2, 3), float(r)) for r in range(1, n)]))
        last = hvd.join()
    assert 1 <= last < n
    assert torch.equal(hvd.allreduce(torch.ones(1), op=hvd.Sum, name="join.after.ag"),
                       torch.full((1,), float(n)))


def test_join_all_at_once(hvd):
    # Every rank joins without having done anything: join returns a rank.
    assert 0 <= hvd.join() < hvd.size()
