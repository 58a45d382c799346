"""Gradients of the differentiable operations.

Every rank's loss is L_r = sum(w_r * y_r), where y_r is the collective's
output on rank r and w_r a rank-specific weight, so w_r is the gradient that
reaches the operation's backward on rank r.

Sum, Average and the operations that move data follow Horovod 0.28.1
formula for formula (horovod/torch/mpi_ops.py, the backward of each
Horovod* autograd function). Each is modelled here in one process from every
rank's inputs and weights (the hv_* functions, written from Horovod's source
and its C++ scaling, independently of plait) and compared bit for bit:
inputs and weights are small integers in float64 and the prescale factors
powers of two, so every sum is exact and the transport's order of summation
cannot matter; the postscale factor, applied once, may be anything.

Min, Max and Product are plait's deliberate difference from Horovod (whose
backward reduces the gradients with the same op): the true gradient of
sum_k L_k with respect to this rank's input, checked against autograd on a
one-process simulation of the whole job, forward included."""

import pytest
import torch

import plait.torch as hvd

# (prescale, postscale): sums stay exact with these prescale factors.
EXACT_FACTORS = [(1.0, 1.0), (0.25, 2.0), (0.5, 0.1), (1.0, 3.0)]
EXACT_IDS = ["pre%g-post%g" % f for f in EXACT_FACTORS]


def ints(shape, g):
    return torch.randint(-8, 9, shape, generator=g).to(torch.float64)


def inputs_and_weights(n, in_shape, out_shape, seed):
    g = torch.Generator().manual_seed(seed)
    xs = [ints(in_shape(k), g) for k in range(n)]
    ws = [ints(out_shape(k), g) for k in range(n)]
    return xs, ws


def assert_same(got, want):
    """Bit for bit (NaN where NaN is wanted)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    assert bool(same.all()), "got %s\nwant %s" % (got, want)


# ---------------------------------------------------------------------------
# Horovod 0.28.1, modelled in one process
# ---------------------------------------------------------------------------

def hv_scale(t, factor):
    """ScaleBuffer on a float64 tensor: skipped when the factor is 1."""
    return t * factor if factor != 1.0 else t


def hv_allreduce(ts, op, pre=1.0, post=1.0):
    """Horovod's allreduce: prescale, sum, then postscale (for Average the
    postscale factor divided by size first, in double)."""
    total = torch.zeros_like(ts[0])
    for t in ts:
        total = total + hv_scale(t, pre)
    return hv_scale(total, post / len(ts) if op == "Average" else post)


def hv_reducescatter_grad(w, op, n, pre, post):
    """HorovodReducescatter.backward before its allgather."""
    if op == "Sum":
        w = w * n
    return hv_scale(hv_scale(w, pre), post)


def blocks(rows, n):
    return [rows // n + (1 if k < rows % n else 0) for k in range(n)]


def distributed(x, w, op):
    """(output, gradient) on this rank."""
    x = x.clone().requires_grad_(True)
    y = op(x)
    (w * y).sum().backward()
    return y.detach(), x.grad


# ---------------------------------------------------------------------------
# Sum, Average and the data movers: Horovod's gradients, bit for bit
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("factors", EXACT_FACTORS, ids=EXACT_IDS)
@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_allreduce_grad_is_horovods(hvd, op, factors):
    n, r = hvd.size(), hvd.rank()
    pre, post = factors
    xs, ws = inputs_and_weights(n, lambda k: (4, 3), lambda k: (4, 3), 11)
    y, grad = distributed(xs[r], ws[r], lambda x: hvd.allreduce(
        x, op=getattr(hvd, op), name="grad.ar.%s.%g.%g" % (op, pre, post),
        prescale_factor=pre, postscale_factor=post))
    assert_same(y, hv_allreduce(xs, op, pre, post))
    # HorovodAllreduce.backward: allreduce(grad, op, prescale, postscale).
    assert_same(grad, hv_allreduce(ws, op, pre, post))


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_grouped_allreduce_grad_is_horovods(hvd, op):
    n, r = hvd.size(), hvd.rank()
    pre, post = 0.25, 3.0
    xs, ws = inputs_and_weights(n, lambda k: (5,), lambda k: (5,), 12)
    x2s, w2s = inputs_and_weights(n, lambda k: (2, 2), lambda k: (2, 2), 112)
    a = xs[r].clone().requires_grad_(True)
    b = x2s[r].clone().requires_grad_(True)
    ya, yb = hvd.grouped_allreduce([a, b], op=getattr(hvd, op), name="grad.grouped." + op,
                                   prescale_factor=pre, postscale_factor=post)
    ((ws[r] * ya).sum() + (w2s[r] * yb).sum()).backward()
    assert_same(ya.detach(), hv_allreduce(xs, op, pre, post))
    assert_same(yb.detach(), hv_allreduce(x2s, op, pre, post))
    assert_same(a.grad, hv_allreduce(ws, op, pre, post))
    assert_same(b.grad, hv_allreduce(w2s, op, pre, post))


def test_allgather_grad_is_horovods(hvd):
    n, r = hvd.size(), hvd.rank()
    rows = [k + 1 for k in range(n)]  # unequal first dimensions
    xs, ws = inputs_and_weights(n, lambda k: (rows[k], 2), lambda k: (sum(rows), 2), 13)
    y, grad = distributed(xs[r], ws[r], lambda x: hvd.allgather(x, name="grad.ag"))
    assert_same(y, torch.cat(xs))
    # HorovodAllgather.backward: allreduce(grad, average=True), this rank's rows.
    start = sum(rows[:r])
    assert_same(grad, hv_allreduce(ws, "Average")[start:start + rows[r]])


def test_grouped_allgather_grad_is_horovods(hvd):
    n, r = hvd.size(), hvd.rank()
    rows_a = [k + 1 for k in range(n)]
    rows_b = [2 * (n - k) for k in range(n)]
    xa, wa = inputs_and_weights(n, lambda k: (rows_a[k],), lambda k: (sum(rows_a),), 113)
    xb, wb = inputs_and_weights(n, lambda k: (rows_b[k], 3), lambda k: (sum(rows_b), 3), 114)
    a = xa[r].clone().requires_grad_(True)
    b = xb[r].clone().requires_grad_(True)
    ya, yb = hvd.grouped_allgather([a, b], name="grad.gag")
    assert_same(ya.detach(), torch.cat(xa))
    assert_same(yb.detach(), torch.cat(xb))
    ((wa[r] * ya).sum() + (wb[r] * yb).sum()).backward()
    sa, sb = sum(rows_a[:r]), sum(rows_b[:r])
    assert_same(a.grad, hv_allreduce(wa, "Average")[sa:sa + rows_a[r]])
    assert_same(b.grad, hv_allreduce(wb, "Average")[sb:sb + rows_b[r]])


def test_broadcast_grad_is_horovods(hvd):
    n, r = hvd.size(), hvd.rank()
    root = n - 1
    xs, ws = inputs_and_weights(n, lambda k: (3,), lambda k: (3,), 14)
    ws[0][2] = float("inf")  # Horovod's `*= 0` makes it NaN off the root
    y, grad = distributed(xs[r], ws[r], lambda x: hvd.broadcast(x, root, name="grad.bc"))
    assert_same(y, xs[root])
    # HorovodBroadcast.backward: allreduce(grad, average=True), times 0 off the root.
    want = hv_allreduce(ws, "Average")
    if r != root:
        want = want * 0
    assert_same(grad, want)


def test_alltoall_grad_is_horovods(hvd):
    n, r = hvd.size(), hvd.rank()
    splits = [[(k + j) % 3 + 1 for j in range(n)] for k in range(n)]
    recv = [sum(splits[k][j] for k in range(n)) for j in range(n)]
    xs, ws = inputs_and_weights(n, lambda k: (sum(splits[k]), 2), lambda k: (recv[k], 2), 15)

    def route(ts):
        """What rank j receives: rank k's splits[k][j] rows, in rank order."""
        outs = []
        for j in range(n):
            parts = []
            for k in range(n):
                start = sum(splits[k][:j])
                parts.append(ts[k][start:start + splits[k][j]])
            outs.append(torch.cat(parts))
        return outs

    y, grad = distributed(xs[r], ws[r], lambda x: hvd.alltoall(
        x, splits=splits[r], name="grad.a2a")[0])
    assert_same(y, route(xs)[r])
    # HorovodAlltoall.backward: alltoall(grad, splits=received splits), i.e.
    # each row's gradient goes back to the rank and place it came from.
    back = []
    for k in range(n):
        offset = sum(splits[j][k] for j in range(r))  # where rank k holds my rows
        back.append(ws[k][offset:offset + splits[r][k]])
    assert_same(grad, torch.cat(back))


@pytest.mark.parametrize("factors", EXACT_FACTORS, ids=EXACT_IDS)
@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter_grad_is_horovods(hvd, op, factors):
    n, r = hvd.size(), hvd.rank()
    pre, post = factors
    rows = 2 * n + 1
    counts = blocks(rows, n)
    xs, ws = inputs_and_weights(n, lambda k: (rows, 2), lambda k: (counts[k], 2), 16)
    y, grad = distributed(xs[r], ws[r], lambda x: hvd.reducescatter(
        x, op=getattr(hvd, op), name="grad.rs.%s.%g.%g" % (op, pre, post),
        prescale_factor=pre, postscale_factor=post))
    assert_same(y, torch.split(hv_allreduce(xs, op, pre, post), counts)[r])
    # HorovodReducescatter.backward: allgather(grad [* size for Sum] * pre * post).
    assert_same(grad, torch.cat([hv_reducescatter_grad(w, op, n, pre, post) for w in ws]))


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_grouped_reducescatter_grad_is_horovods(hvd, op):
    n, r = hvd.size(), hvd.rank()
    pre, post = 0.5, 3.0
    rows_a, rows_b = 2 * n + 1, n
    ca, cb = blocks(rows_a, n), blocks(rows_b, n)
    xa, wa = inputs_and_weights(n, lambda k: (rows_a, 2), lambda k: (ca[k], 2), 116)
    xb, wb = inputs_and_weights(n, lambda k: (rows_b,), lambda k: (cb[k],), 117)
    a = xa[r].clone().requires_grad_(True)
    b = xb[r].clone().requires_grad_(True)
    ya, yb = hvd.grouped_reducescatter([a, b], op=getattr(hvd, op), name="grad.grs." + op,
                                       prescale_factor=pre, postscale_factor=post)
    assert_same(ya.detach(), torch.split(hv_allreduce(xa, op, pre, post), ca)[r])
    assert_same(yb.detach(), torch.split(hv_allreduce(xb, op, pre, post), cb)[r])
    ((wa[r] * ya).sum() + (wb[r] * yb).sum()).backward()
    assert_same(a.grad, torch.cat([hv_reducescatter_grad(w, op, n, pre, post) for w in wa]))
    assert_same(b.grad, torch.cat([hv_reducescatter_grad(w, op, n, pre, post) for w in wb]))


def test_reducescatter_other_ops_refuse_backward(hvd):
    x = torch.ones(2 * hvd.size(), 1, requires_grad=True)
    y = hvd.reducescatter(x, op=hvd.Max, name="grad.rs.max")
    with pytest.raises(NotImplementedError, match="Sum and Average"):
        y.sum().backward()
    ys = hvd.grouped_reducescatter([x], op=hvd.Min, name="grad.grs.min")
    with pytest.raises(NotImplementedError, match="Sum and Average"):
        ys[0].sum().backward()


# ---------------------------------------------------------------------------
# Min, Max, Product: the true gradient (plait's deliberate difference)
# ---------------------------------------------------------------------------

def simulate(op, xs, pre, post):
    """The forward of allreduce on every rank, from every rank's input."""
    stack = torch.stack([x * pre for x in xs])
    y = {"Min": lambda: stack.amin(0), "Max": lambda: stack.amax(0),
         "Product": lambda: stack.prod(0)}[op]()
    return y * post


def true_grad(op, xs, ws, pre, post, r):
    """d(sum_k sum(w_k * y_k))/d x_r by autograd on the simulation (amin and
    amax share the gradient equally between tied inputs)."""
    xs = [x.clone().requires_grad_(True) for x in xs]
    y = simulate(op, xs, pre, post)
    sum((w * y).sum() for w in ws).backward()
    return xs[r].grad


TRUE_FACTORS = [(1.0, 1.0), (0.25, 2.0), (0.1, 3.0), (-0.5, 0.3)]


@pytest.mark.parametrize("factors", TRUE_FACTORS, ids=["pre%g-post%g" % f for f in TRUE_FACTORS])
@pytest.mark.parametrize("op", ["Min", "Max", "Product"])
def test_allreduce_true_grad(hvd, op, factors):
    n, r = hvd.size(), hvd.rank()
    pre, post = factors
    xs, ws = inputs_and_weights(n, lambda k: (4, 3), lambda k: (4, 3), 21)
    if op == "Product":
        xs[0][0, 0] = 0.0  # one zero factor: the others' gradients are 0 there
        xs[0][0, 1] = xs[n - 1][0, 1] = 0.0  # two zeros: every gradient is 0
    else:
        xs[n - 1][1, 1] = xs[0][1, 1]  # a tie shares the gradient
        xs[1][2] = xs[0][2]  # a whole tied row (every rank ties at n = 2)
    y, grad = distributed(xs[r], ws[r], lambda x: hvd.allreduce(
        x, op=getattr(hvd, op), name="grad.true.%s.%g.%g" % (op, pre, post),
        prescale_factor=pre, postscale_factor=post))
    if op == "Product":  # the order of the products may differ
        torch.testing.assert_close(y, simulate(op, xs, pre, post), rtol=1e-15, atol=0)
    else:
        assert_same(y, simulate(op, xs, pre, post))
    torch.testing.assert_close(grad, true_grad(op, xs, ws, pre, post, r))


def test_product_grad_with_prescale_two_ranks_example(hvd):
    """Issue 17's example: rank 0 got [7.5, -20, -15] (prescale^(n-1) too
    large) for the true [1.875, -5, -3.75]."""
    n, r = hvd.size(), hvd.rank()
    xs = [torch.tensor([1.0, -2.0, 3.0]), torch.tensor([3.0, -4.0, -2.5]),
          torch.tensor([0.5, 1.5, 2.0])][:n]
    ws = [torch.tensor([2.5, 5.0, 4.0]), torch.tensor([2.5, 5.0, 8.0]),
          torch.tensor([1.0, -1.0, 1.0])][:n]
    _, grad = distributed(xs[r], ws[r], lambda x: hvd.allreduce(
        x, op=hvd.Product, name="grad.prod.example", prescale_factor=0.25,
        postscale_factor=2.0))
    want = true_grad("Product", xs, ws, 0.25, 2.0, r)
    if n == 2 and r == 0:
        torch.testing.assert_close(want, torch.tensor([1.875, -5.0, -3.75]))
    torch.testing.assert_close(grad, want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("op", ["Min", "Max"])
def test_min_max_grad_with_inexact_factors(hvd, op, dtype):
    """Scale factors that are not powers of two: the extreme must still be
    found exactly (an exact comparison of x * pre * post with the output
    missed 287 of 1000 elements)."""
    n, r = hvd.size(), hvd.rank()
    g = torch.Generator().manual_seed(31)
    xs = [torch.randn(1000, generator=g, dtype=torch.float64).to(dtype) for _ in range(n)]
    ws = [torch.randn(1000, generator=g, dtype=torch.float64).to(dtype) for _ in range(n)]
    xs[n - 1][::7] = xs[0][::7]  # ties between ranks
    pre, post = 0.1, 3.0
    y, grad = distributed(xs[r], ws[r], lambda x: hvd.allreduce(
        x, op=getattr(hvd, op), name="grad.inexact.%s.%s" % (op, dtype),
        prescale_factor=pre, postscale_factor=post))
    assert_same(y, simulate(op, xs, pre, post))
    want = true_grad(op, xs, ws, pre, post, r)
    assert int((grad == 0).sum()) == int((want == 0).sum())
    torch.testing.assert_close(grad, want)


@pytest.mark.parametrize("op", ["Min", "Max", "Product"])
def test_grouped_allreduce_true_grad(hvd, op):
    n, r = hvd.size(), hvd.rank()
    pre, post = 0.1, 3.0
    xs, ws = inputs_and_weights(n, lambda k: (6,), lambda k: (6,), 22)
    x2s, w2s = inputs_and_weights(n, lambda k: (2, 3), lambda k: (2, 3), 23)
    xs[n - 1][0] = xs[0][0]
    a = xs[r].clone().requires_grad_(True)
    b = x2s[r].clone().requires_grad_(True)
    ya, yb = hvd.grouped_allreduce([a, b], op=getattr(hvd, op), name="grad.gtrue." + op,
                                   prescale_factor=pre, postscale_factor=post)
    ((ws[r] * ya).sum() + (w2s[r] * yb).sum()).backward()
    torch.testing.assert_close(a.grad, true_grad(op, xs, ws, pre, post, r))
    torch.testing.assert_close(b.grad, true_grad(op, x2s, w2s, pre, post, r))


def test_unnamed_gradients_match_across_ranks(hvd):
    """Backward passes of unnamed operations are numbered in the order
    issued, the same on every rank."""
    n, r = hvd.size(), hvd.rank()
    xs, ws = inputs_and_weights(n, lambda k: (3,), lambda k: (3,), 24)
    x = xs[r].clone().requires_grad_(True)
    y = hvd.allreduce(x, op=hvd.Max) + hvd.allgather(x).sum() + hvd.broadcast(x, 0)
    (ws[r] * y).sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
