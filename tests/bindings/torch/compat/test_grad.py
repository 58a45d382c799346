"""Gradients of every differentiable operation, exact, with Horovod 0.28's
conventions (horovod/torch/mpi_ops.py): allreduce sends back the allreduce
of the incoming gradients with the same op and scale factors; allgather and
broadcast the Average of the incoming gradients (rows of this rank; zero
off the root); alltoall sends them back along the received splits;
reducescatter allgathers them, times size for Sum and times the scale
factors. Each rank backpropagates its own gradient (a function of its
rank), so the result mixes every rank's."""

import pytest
import torch

import hvd_expected as hn


def grad_of(r, shape, dtype=torch.float64):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=dtype).reshape(shape) % 7 + 1) * (r + 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("opname", ["Sum", "Average"])
@pytest.mark.parametrize("pre,post", [(1.0, 1.0), (0.5, 3.0)], ids=["unscaled", "scaled"])
def test_allreduce_grad(hvd, dtype, opname, pre, post):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()
    x = (torch.arange(6, dtype=dtype).reshape(2, 3) + me).requires_grad_()
    y = hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post,
                      name="g.ar.%s.%s.%r" % (opname, dtype, pre))
    y.backward(grad_of(me, (2, 3), dtype))
    expected = hn.allreduce(hvd, [grad_of(r, (2, 3), dtype) for r in range(n)], op, pre, post)
    assert torch.equal(x.grad, expected), (x.grad, expected)


@pytest.mark.differs("min-max-product-gradient")
@pytest.mark.parametrize("opname", ["Min", "Max", "Product"])
def test_allreduce_min_max_product_grad(hvd, impl, opname):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()

    def value(r):
        # No ties: every element's extreme is on one rank.
        return torch.tensor([1.0 + r, 5.0 - 2 * r, 0.5 * (r + 2)], dtype=torch.float64)

    x = value(me).requires_grad_()
    y = hvd.allreduce(x, op=op, name="g.ar." + opname)
    y.backward(grad_of(me, (3,)))
    gs = [grad_of(r, (3,)) for r in range(n)]
    if impl == "horovod":
        # Horovod reduces the incoming gradients with the same op.
        expected = hn.allreduce(hvd, gs, op)
    else:
        # plait: the gradient of the sum over ranks of each rank's loss.
        xs = torch.stack([value(r) for r in range(n)])
        gsum = torch.stack(gs).sum(0)
        if opname == "Product":
            others = torch.ones(3, dtype=torch.float64)
            for r in range(n):
                if r != me:
                    others = others * xs[r]
            expected = gsum * others
        else:
            pick = xs.argmin(0) if opname == "Min" else xs.argmax(0)
            expected = torch.where(pick == me, gsum, torch.zeros_like(gsum))
    assert torch.equal(x.grad, expected), (x.grad, expected)


@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_grouped_allreduce_grad(hvd, opname):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()
    shapes = [(2, 3), (4,), ()]
    xs = [(torch.ones(s, dtype=torch.float64) * me).requires_grad_() for s in shapes]
    ys = hvd.grouped_allreduce(xs, op=op, name="g.gar." + opname)
    torch.autograd.backward(ys, [grad_of(me, s) for s in shapes])
    for x, s in zip(xs, shapes):
        expected = hn.allreduce(hvd, [grad_of(r, s) for r in range(n)], op)
        assert torch.equal(x.grad, expected), (x.grad, expected)


def test_allgather_grad(hvd):
    n, me = hvd.size(), hvd.rank()
    rows = [r + 1 for r in range(n)]
    total = sum(rows)
    x = torch.zeros(rows[me], 2, dtype=torch.float64).requires_grad_()
    y = hvd.allgather(x, name="g.ag")
    assert y.shape == (total, 2)
    y.backward(grad_of(me, (total, 2)))
    avg = hn.allreduce(hvd, [grad_of(r, (total, 2)) for r in range(n)], hvd.Average)
    start = sum(rows[:me])
    assert torch.equal(x.grad, avg[start:start + rows[me]]), (x.grad, avg)


def test_grouped_allgather_grad(hvd):
    n, me = hvd.size(), hvd.rank()
    a = torch.zeros(me + 1, dtype=torch.float64).requires_grad_()
    b = torch.zeros(2, 3, dtype=torch.float64).requires_grad_()
    ya, yb = hvd.grouped_allgather([a, b], name="g.gag")
    ta = n * (n + 1) // 2
    torch.autograd.backward([ya, yb], [grad_of(me, (ta,)), grad_of(me, (2 * n, 3))])
    avg_a = hn.allreduce(hvd, [grad_of(r, (ta,)) for r in range(n)], hvd.Average)
    avg_b = hn.allreduce(hvd, [grad_of(r, (2 * n, 3)) for r in range(n)], hvd.Average)
    start = me * (me + 1) // 2
    assert torch.equal(a.grad, avg_a[start:start + me + 1])
    assert torch.equal(b.grad, avg_b[2 * me:2 * me + 2])


def test_broadcast_grad(hvd):
    n, me = hvd.size(), hvd.rank()
    for root in sorted({0, n - 1}):
        x = (torch.ones(2, 2, dtype=torch.float64) * me).requires_grad_()
        y = hvd.broadcast(x, root_rank=root, name="g.bc.%d" % root)
        y.backward(grad_of(me, (2, 2)))
        if me == root:
            expected = hn.allreduce(hvd, [grad_of(r, (2, 2)) for r in range(n)], hvd.Average)
        else:
            expected = torch.zeros(2, 2, dtype=torch.float64)
        assert torch.equal(x.grad, expected), (root, x.grad, expected)


@pytest.mark.parametrize("with_splits", [False, True])
def test_alltoall_grad(hvd, with_splits):
    n, me = hvd.size(), hvd.rank()

    def count(sender, receiver):
        return 1 + (sender + receiver) % 2 if with_splits else 2

    def g_rows(receiver, sender):
        # The gradient receiver holds for the rows that came from sender.
        return torch.stack([torch.tensor([100.0 * receiver + 10 * sender + k, -k],
                                         dtype=torch.float64)
                            for k in range(count(sender, receiver))])

    send_rows = sum(count(me, j) for j in range(n))
    x = torch.zeros(send_rows, 2, dtype=torch.float64).requires_grad_()
    if with_splits:
        y, received = hvd.alltoall(x, splits=[count(me, j) for j in range(n)], name="g.a2a.s")
        assert received.tolist() == [count(r, me) for r in range(n)]
    else:
        y = hvd.alltoall(x, name="g.a2a")
    y.backward(torch.cat([g_rows(me, r) for r in range(n)]))
    expected = torch.cat([g_rows(j, me) for j in range(n)])
    assert torch.equal(x.grad, expected), (x.grad, expected)


@pytest.mark.parametrize("opname", ["Sum", "Average"])
@pytest.mark.parametrize("pre,post", [(1.0, 1.0), (0.5, 3.0)], ids=["unscaled", "scaled"])
def test_reducescatter_grad(hvd, opname, pre, post):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()
    rows = hn.reducescatter_rows(2 * n + 1, n)
    x = torch.zeros(2 * n + 1, 2, dtype=torch.float64).requires_grad_()
    y = hvd.reducescatter(x, op=op, prescale_factor=pre, postscale_factor=post,
                          name="g.rs.%s.%r" % (opname, pre))
    assert y.shape == (rows[me], 2)
    y.backward(grad_of(me, (rows[me], 2)))

    def back(r):
        g = grad_of(r, (rows[r], 2))
        if opname == "Sum":
            g = g * n
        return g * pre * post if pre != 1.0 else g

    expected = torch.cat([back(r) for r in range(n)])
    assert torch.equal(x.grad, expected), (x.grad, expected)


def test_grouped_reducescatter_grad(hvd):
    n, me = hvd.size(), hvd.rank()
    a = torch.zeros(n, 2, dtype=torch.float64).requires_grad_()
    b = torch.zeros(2 * n, dtype=torch.float64).requires_grad_()
    ya, yb = hvd.grouped_reducescatter([a, b], op=hvd.Sum, name="g.grs")
    torch.autograd.backward([ya, yb], [grad_of(me, (1, 2)), grad_of(me, (2,))])
    assert torch.equal(a.grad, torch.cat([grad_of(r, (1, 2)) * n for r in range(n)]))
    assert torch.equal(b.grad, torch.cat([grad_of(r, (2,)) * n for r in range(n)]))


def test_allreduce_in_a_model(hvd):
    # A gradient through a network whose forward pass averages an activation
    # over ranks (model parallel style), against the formula.
    n, me = hvd.size(), hvd.rank()
    w = torch.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([[1.0 + me, 2.0]], dtype=torch.float64)
    h = hvd.allreduce(x @ w, op=hvd.Sum, name="g.model")
    loss = (h * torch.tensor([[1.0, 2.0]], dtype=torch.float64)).sum() * (me + 1)
    loss.backward()
    # d loss_r / d h = c * (r + 1); allreduce Sum sends back the sum.
    gsum = torch.tensor([[1.0, 2.0]], dtype=torch.float64) * sum(r + 1 for r in range(n))
    assert torch.equal(w.grad, x.t() @ gsum)
