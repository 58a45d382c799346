"""Gradients of plait.tensorflow's operations against a one-process
reference computed with numpy from every rank's inputs, eagerly
(GradientTape), inside tf.function and in a TF1 graph (tf.gradients).

On rank r the loss is sum(c_r * y), c_r = r + 1 + arange. Horovod's
conventions: allreduce Sum/Average back-propagates the same allreduce of
the gradient (which is the gradient of the sum of every rank's loss);
allgather this rank's rows of the averaged gradient; broadcast the averaged
gradient on the root and zero elsewhere; alltoall the gradient sent back;
reducescatter the allgathered gradient times size for Sum. Min, Max and
Product: the true gradient of the sum of the ranks' losses (plait's choice;
Horovod reduces the gradients with the same op)."""

import numpy as np
import pytest
import tensorflow as tf

import plait.tensorflow as hvd
from tfmodes import MODES, same

N = 4


def coef(r, shape):
    return (np.arange(np.prod(shape), dtype=np.float64).reshape(shape) + r + 1)


def x_of(r):
    # distinct per rank, no ties across ranks, one zero on rank 1 (Product)
    x = np.array([1.5, -2.0, 3.0, 0.5], np.float64) * (r + 1) + np.array([0, 0.25, 0, 0]) * r
    if r == 1:
        x[3] = 0.0
    return x


def grad_of(mode, fn, x, c):
    """d sum(c * fn(x)) / dx in mode."""
    if mode == "graph":
        with tf.Graph().as_default():
            xv = tf.constant(x)
            y = fn(xv)
            g = tf.gradients(tf.reduce_sum(tf.constant(c) * y), xv)[0]
            with tf.compat.v1.Session() as s:
                return s.run(g)

    def step(xv):
        with tf.GradientTape() as tape:
            tape.watch(xv)
            y = fn(xv)
            loss = tf.reduce_sum(tf.constant(c) * y)
        return tape.gradient(loss, xv)
    if mode == "function":
        step = tf.function(step)
    return step(tf.constant(x)).numpy()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce_grad(hvd, mode, op):
    n, r = hvd.size(), hvd.rank()
    xs = [x_of(k) for k in range(n)]
    cs = [coef(k, [N]) for k in range(n)]
    ctot = sum(cs)
    g = grad_of(mode, lambda t: hvd.allreduce(t, op=getattr(hvd, op)), xs[r], cs[r])
    if op == "Sum":
        want = ctot
    elif op == "Average":
        want = ctot / n
    elif op == "Product":
        want = ctot * np.prod([xs[k] for k in range(n) if k != r], axis=0)
    else:
        ext = (np.minimum if op == "Min" else np.maximum).reduce(xs)
        want = ctot * (xs[r] == ext)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=0, err_msg="%s %s" % (op, mode))


@pytest.mark.parametrize("mode", MODES)
def test_allreduce_grad_scaled(hvd, mode):
    """Sum with factors: the gradient is the same allreduce (with the same
    factors) of the gradient, as Horovod."""
    n, r = hvd.size(), hvd.rank()
    cs = [coef(k, [N]) for k in range(n)]
    g = grad_of(mode, lambda t: hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5,
                                              postscale_factor=4.0), x_of(r), cs[r])
    same(g, sum(c * 0.5 for c in cs) * 4.0, "scaled allreduce gradient")


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce_grad(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    cs = [coef(k, [N]) for k in range(n)]
    g = grad_of(mode, lambda t: tf.add_n(hvd.grouped_allreduce([t, 2 * t], op=hvd.Average)),
                x_of(r), cs[r])
    np.testing.assert_allclose(g, 3 * sum(cs) / n, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_allgather_grad(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    rows = [k + 1 for k in range(n)]
    total = sum(rows)
    cs = [coef(k, [total, 2]) for k in range(n)]
    x = np.ones((rows[r], 2)) * (r + 1)
    g = grad_of(mode, lambda t: hvd.allgather(t), x, cs[r])
    start = sum(rows[:r])
    np.testing.assert_allclose(g, (sum(cs) / n)[start:start + rows[r]], rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_grad(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    cs = [coef(k, [N]) for k in range(n)]
    g = grad_of(mode, lambda t: hvd.broadcast(t, 0), x_of(r), cs[r])
    want = sum(cs) / n if r == 0 else np.zeros(N)
    np.testing.assert_allclose(g, want, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_grad(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    splits = [(r + d) % 2 + 1 for d in range(n)]
    x = np.arange(sum(splits) * 2, dtype=np.float64).reshape(-1, 2) + r
    recv = [(s + r) % 2 + 1 for s in range(n)]
    cs_rows = sum(recv)
    c = coef(r, [cs_rows, 2])
    g = grad_of(mode, lambda t: hvd.alltoall(t, splits=splits)[0], x, c)
    # The gradient of row j sent to rank d is rank d's coefficient of that row.
    want = []
    for d in range(n):
        recv_d = [(s + d) % 2 + 1 for s in range(n)]
        start = sum(recv_d[:r])
        want.append(coef(d, [sum(recv_d), 2])[start:start + splits[d]])
    np.testing.assert_allclose(g, np.concatenate(want), rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter_grad(hvd, mode, op):
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n
    cs = [coef(k, [2, 3]) for k in range(n)]
    x = np.ones((rows, 3)) * (r + 1)
    g = grad_of(mode, lambda t: hvd.reducescatter(t, op=getattr(hvd, op)), x, cs[r])
    want = np.concatenate(cs) * (n if op == "Sum" else 1)
    np.testing.assert_allclose(g, want, rtol=1e-12)
