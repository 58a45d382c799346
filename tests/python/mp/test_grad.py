"""Gradients of the differentiable operations.

Every rank's loss is L_r = sum(w_r * y_r), where y_r is the collective's
output on rank r and w_r a rank-specific weight. The distributed backward on
rank r must give d(sum over ranks of L_k)/d x_r, which every rank checks
against autograd on a one-process simulation of the whole job."""

import pytest
import torch

import plait.torch as hvd


def inputs_and_weights(n, in_shape, out_shape, seed):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(in_shape(k), generator=g, dtype=torch.float64) for k in range(n)]
    ws = [torch.randn(out_shape(k), generator=g, dtype=torch.float64) for k in range(n)]
    return xs, ws


def reference_grad(xs, ws, simulate, r):
    xs = [x.clone().requires_grad_(True) for x in xs]
    ys = simulate(xs)
    total = sum((w * y).sum() for w, y in zip(ws, ys))
    total.backward()
    # A rank whose input does not reach any output has a zero gradient.
    return xs[r].grad if xs[r].grad is not None else torch.zeros_like(xs[r])


def distributed_grad(x, w, op):
    x = x.clone().requires_grad_(True)
    y = op(x)
    (w * y).sum().backward()
    return x.grad


@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce_grad(hvd, op):
    n, r = hvd.size(), hvd.rank()
    v = getattr(hvd, op)
    xs, ws = inputs_and_weights(n, lambda k: (4, 3), lambda k: (4, 3), 11)
    if op == "Product":
        xs[0][0, 0] = 0.0  # one zero factor: the others' gradients must be 0 there
    if op in ("Min", "Max"):
        xs[n - 1][1, 1] = xs[0][1, 1]  # a tie shares the gradient

    def simulate(xs):
        stack = torch.stack(xs)
        y = {"Sum": lambda: stack.sum(0), "Average": lambda: stack.mean(0),
             "Min": lambda: stack.amin(0), "Max": lambda: stack.amax(0),
             "Product": lambda: stack.prod(0)}[op]()
        return [y * 0.5] * n  # prescale 0.5 and postscale 1 below

    want = reference_grad(xs, ws, simulate, r)
    got = distributed_grad(xs[r], ws[r], lambda x: hvd.allreduce(
        x, op=v, name="grad.ar." + op, prescale_factor=0.25, postscale_factor=2.0))
    torch.testing.assert_close(got, want)


def test_grouped_allreduce_grad(hvd):
    n, r = hvd.size(), hvd.rank()
    xs, ws = inputs_and_weights(n, lambda k: (5,), lambda k: (5,), 12)
    want = reference_grad(xs, ws, lambda xs: [torch.stack(xs).mean(0)] * n, r)
    x = xs[r].clone().requires_grad_(True)
    y = hvd.grouped_allreduce([x, x * 2], op=hvd.Average, name="grad.grouped")
    (ws[r] * y[0]).sum().backward()
    torch.testing.assert_close(x.grad, want)


def test_allgather_grad(hvd):
    n, r = hvd.size(), hvd.rank()
    rows = lambda k: k + 1  # noqa: E731 - unequal first dimensions
    total = sum(rows(k) for k in range(n))
    xs, ws = inputs_and_weights(n, lambda k: (rows(k), 2), lambda k: (total, 2), 13)
    want = reference_grad(xs, ws, lambda xs: [torch.cat(xs)] * n, r)
    got = distributed_grad(xs[r], ws[r], lambda x: hvd.allgather(x, name="grad.ag"))
    torch.testing.assert_close(got, want)


def test_broadcast_grad(hvd):
    n, r = hvd.size(), hvd.rank()
    root = n - 1
    xs, ws = inputs_and_weights(n, lambda k: (3,), lambda k: (3,), 14)
    want = reference_grad(xs, ws, lambda xs: [xs[root]] * n, r)
    got = distributed_grad(xs[r], ws[r], lambda x: hvd.broadcast(x, root, name="grad.bc"))
    torch.testing.assert_close(got, want)


def test_alltoall_grad(hvd):
    n, r = hvd.size(), hvd.rank()
    splits = [[(k + j) % 3 + 1 for j in range(n)] for k in range(n)]
    recv = [sum(splits[k][j] for k in range(n)) for j in range(n)]
    xs, ws = inputs_and_weights(n, lambda k: (sum(splits[k]), 2), lambda k: (recv[k], 2), 15)

    def simulate(xs):
        outs = []
        for j in range(n):
            parts = []
            for k in range(n):
                start = sum(splits[k][:j])
                parts.append(xs[k][start:start + splits[k][j]])
            outs.append(torch.cat(parts))
        return outs

    want = reference_grad(xs, ws, simulate, r)
    got = distributed_grad(xs[r], ws[r],
                           lambda x: hvd.alltoall(x, splits=splits[r], name="grad.a2a")[0])
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter_grad(hvd, op):
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n + 1
    counts = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
    xs, ws = inputs_and_weights(n, lambda k: (rows, 2), lambda k: (counts[k], 2), 16)

    def simulate(xs):
        red = torch.stack(xs).sum(0) if op == "Sum" else torch.stack(xs).mean(0)
        return list(torch.split(red, counts))

    want = reference_grad(xs, ws, simulate, r)
    got = distributed_grad(xs[r], ws[r], lambda x: hvd.reducescatter(
        x, op=getattr(hvd, op), name="grad.rs." + op))
    torch.testing.assert_close(got, want)


def test_non_differentiable_ops_refuse_clearly(hvd):
    x = torch.ones(2 * hvd.size(), 1, requires_grad=True)
    y = hvd.reducescatter(x, op=hvd.Max, name="grad.rs.max")
    with pytest.raises(NotImplementedError, match="Sum and Average"):
        y.sum().backward()
