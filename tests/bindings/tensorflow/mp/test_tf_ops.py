"""Every plait.tensorflow operation x every dtype x eager / tf.function /
TF1 graph, checked exactly against numpy on every rank's inputs (each rank
can compute every other rank's input: they are functions of the rank)."""

import numpy as np
import pytest
import tensorflow as tf

import plait.tensorflow as hvd
from tfmodes import MODES, np_dtype, run, same

REDUCIBLE = [tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16,
             tf.bfloat16, tf.float32, tf.float64]
COMPLEX = [tf.complex64, tf.complex128]
# Moved as bytes by allgather, broadcast and alltoall; refused by reductions.
BYTES_ONLY = [tf.uint32, tf.uint64]
MOVABLE = REDUCIBLE + [tf.bool] + COMPLEX + BYTES_ONLY

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max,
       "Product": hvd.Product}


def base(dtype):
    """Small values whose sums, products and averages are exact in dtype."""
    dt = tf.as_dtype(dtype)
    if dt == tf.bool:
        return np.array([True, False, True, False, True])
    vals = [0, 1, 2, 1, 3] if (dt.is_unsigned or dt in (tf.uint32, tf.uint64)) \
        else [0, 1, 2, -1, 3]
    a = np.array(vals, dtype=np.float64)
    if dt.is_complex:
        return (a + 1j * a[::-1]).astype(np_dtype(dt))
    return a.astype(np_dtype(dt))


def rank_input(dtype, r):
    """Rank r's input: base * (2r + 1) (bool: rank-dependent pattern)."""
    b = base(dtype)
    if b.dtype == np.bool_:
        return np.roll(b, r)
    return (b.astype(np.float64) * (2 * r + 1) if b.dtype.kind != "c"
            else b * (2 * r + 1)).astype(b.dtype)


def expected_reduce(dtype, op, n):
    xs = [rank_input(dtype, r) for r in range(n)]
    dt = xs[0].dtype
    if dt == np.bool_:
        if op in ("Sum", "Max"):
            return np.logical_or.reduce(xs)
        return np.logical_and.reduce(xs)
    wide = [x.astype(np.complex128 if dt.kind == "c" else np.float64) for x in xs]
    if op == "Sum":
        r = sum(wide)
    elif op == "Average":
        r = sum(wide) / n  # exact: the sum is base * n^2
    elif op == "Min":
        r = np.minimum.reduce(wide)
    elif op == "Max":
        r = np.maximum.reduce(wide)
    else:
        r = np.prod(wide, axis=0)
    return r.astype(dt)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", list(OPS))
def test_allreduce_every_dtype(hvd, mode, op):
    """One function allreduces a tensor of every dtype at once (so they are
    also in flight together)."""
    n, r = hvd.size(), hvd.rank()
    dtypes = REDUCIBLE + [tf.bool] + (COMPLEX if op in ("Sum", "Average") else [])
    if op == "Average":
        dtypes.remove(tf.bool)  # plait refuses Average on bool (below)
    inputs = [rank_input(d, r) for d in dtypes]
    got = run(mode, lambda *ts: [hvd.allreduce(t, op=OPS[op]) for t in ts], *inputs)
    for d, g in zip(dtypes, got):
        same(g, expected_reduce(d, op, n), "allreduce %s %s %s" % (op, d.name, mode))


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce_mixed_dtypes(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    dtypes = [tf.float32, tf.float32, tf.int64, tf.float64, tf.bfloat16]
    inputs = [rank_input(d, r) for d in dtypes]
    got = run(mode, lambda *ts: hvd.grouped_allreduce(list(ts), op=hvd.Sum), *inputs)
    for d, g in zip(dtypes, got):
        same(g, expected_reduce(d, "Sum", n), "grouped_allreduce %s %s" % (d.name, mode))


@pytest.mark.parametrize("mode", MODES)
def test_allreduce_scale_factors(hvd, mode):
    """prescale and postscale as Horovod applies them (the attributes are
    float, as Horovod's ops have them): float32 in float32, float64 in double
    by the float32-rounded factor, integers truncated toward zero."""
    n, r = hvd.size(), hvd.rank()
    pre, post = 0.5, 3.0
    x32 = np.array([1.0, 3.0, -5.0, 7.0], np.float32) * (r + 1)
    x64 = x32.astype(np.float64)
    xi = np.array([1, 3, -5, 7], np.int32) * (r + 1)
    got = run(mode, lambda a, b, c: [hvd.allreduce(t, op=hvd.Sum, prescale_factor=pre,
                                                   postscale_factor=post) for t in (a, b, c)],
              x32, x64, xi)
    tot = sum(np.array([1.0, 3.0, -5.0, 7.0]) * (k + 1) for k in range(n))
    same(got[0], (tot * np.float32(pre)).astype(np.float32) * np.float32(post), "float32")
    same(got[1], tot * np.float64(np.float32(pre)) * np.float64(np.float32(post)), "float64")
    parts = sum(np.trunc(np.array([1, 3, -5, 7]) * (k + 1) * pre) for k in range(n))
    same(got[2], np.trunc(parts * post).astype(np.int32), "int32")


@pytest.mark.parametrize("mode", MODES)
def test_allgather_every_dtype_variable_rows(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    dtypes = MOVABLE
    inputs = [np.stack([rank_input(d, r)] * (r + 1)) for d in dtypes]
    got = run(mode, lambda *ts: [hvd.allgather(t) for t in ts], *inputs)
    for d, g in zip(dtypes, got):
        want = np.concatenate([np.stack([rank_input(d, k)] * (k + 1)) for k in range(n)])
        same(g, want, "allgather %s %s" % (d.name, mode))


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_every_dtype(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    root = n - 1
    inputs = [rank_input(d, r).reshape(5, 1) for d in MOVABLE] + \
        [np.array(r + 7, np.int32)]  # a scalar too
    got = run(mode, lambda *ts: [hvd.broadcast(t, root) for t in ts], *inputs)
    for d, g in zip(MOVABLE, got):
        same(g, rank_input(d, root).reshape(5, 1), "broadcast %s %s" % (d.name, mode))
    same(got[-1], np.array(root + 7, np.int32), "broadcast scalar")


def _sent(d, src, dst, rows):
    """The rows rank src sends to rank dst."""
    b = rank_input(d, src)
    return np.stack([np.roll(b, dst + i) for i in range(rows)]) if rows else \
        np.zeros((0, 5), b.dtype)


def _splits(src, n):
    return [(src + dst) % 3 for dst in range(n)]  # some zero, uneven


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_every_dtype_with_splits(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    dtypes = MOVABLE
    splits = np.array(_splits(r, n), np.int32)
    inputs = [np.concatenate([_sent(d, r, dst, splits[dst]) for dst in range(n)])
              for d in dtypes]

    def fn(*ts):
        return [hvd.alltoall(t, splits=tf.constant(splits)) for t in ts]
    got = run(mode, fn, *inputs)
    for d, (out, rsplits) in zip(dtypes, got):
        want = np.concatenate([_sent(d, src, r, _splits(src, n)[r]) for src in range(n)])
        same(out, want, "alltoall %s %s" % (d.name, mode))
        same(rsplits, np.array([_splits(src, n)[r] for src in range(n)], np.int32),
             "alltoall received_splits")


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_equal_splits(hvd, mode):
    n, r = hvd.size(), hvd.rank()
    x = (np.arange(2 * n, dtype=np.float32) + 100 * r).reshape(2 * n, 1)
    got = run(mode, lambda t: hvd.alltoall(t), x)
    want = np.concatenate([(np.arange(2 * n, dtype=np.float32) + 100 * k)
                           .reshape(2 * n, 1)[2 * r:2 * r + 2] for k in range(n)])
    same(got, want, "alltoall equal splits")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter_every_dtype(hvd, mode, op):
    """Rows divided as evenly as possible, the first rows % size ranks
    getting one more."""
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n + 1
    dtypes = REDUCIBLE + (COMPLEX if op in ("Sum", "Average") else [])
    inputs = [np.stack([rank_input(d, r)] * rows) for d in dtypes]
    got = run(mode, lambda *ts: [hvd.reducescatter(t, op=OPS[op]) for t in ts], *inputs)
    counts = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
    start = sum(counts[:r])
    for d, g in zip(dtypes, got):
        full = np.stack([expected_reduce(d, op, n)] * rows)
        same(g, full[start:start + counts[r]], "reducescatter %s %s %s" % (op, d.name, mode))


@pytest.mark.parametrize("mode", MODES)
def test_queries_as_ops(hvd, mode):
    got = run(mode, lambda: [hvd.size_op(), hvd.rank_op(), hvd.local_size_op(),
                             hvd.local_rank_op(), hvd.process_set_included_op()])
    assert [int(v) for v in got] == [hvd.size(), hvd.rank(), hvd.local_size(),
                                     hvd.local_rank(), 1]


def test_indexed_slices_allreduce(hvd):
    """As Horovod: values and indices allgathered, values divided by size
    for Average."""
    n, r = hvd.size(), hvd.rank()
    s = tf.IndexedSlices(tf.constant([[1.0, 2.0]]) * (r + 1), tf.constant([r]),
                         dense_shape=tf.constant([n, 2]))
    out = hvd.allreduce(s, op=hvd.Average)
    assert isinstance(out, tf.IndexedSlices)
    same(out.indices.numpy(), np.arange(n, dtype=np.int32), "indices")
    same(out.values.numpy(),
         (np.array([[1.0, 2.0]], np.float32).repeat(n, 0) *
          (np.arange(n)[:, None] + 1).astype(np.float32) / np.float32(n)).astype(np.float32),
         "values")
    with pytest.raises(NotImplementedError):
        hvd.allreduce(s, op=hvd.Max)


def test_compression_fp16(hvd):
    n, r = hvd.size(), hvd.rank()
    x = tf.constant([0.5, 1.5], tf.float64) * (r + 1)
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == tf.float64
    same(out.numpy(), np.array([0.5, 1.5]) * n * (n + 1) / 2, "fp16 compression")


def test_broadcast_into_variables(hvd):
    r = hvd.rank()
    vs = [tf.Variable(tf.fill([3], float(r))), tf.Variable(tf.fill([2, 2], r), name="iv")]
    out = hvd.broadcast_(vs, root_rank=0)
    same(vs[0].numpy(), np.zeros(3, np.float32), "variable 0")
    same(vs[1].numpy(), np.zeros((2, 2), np.int32), "variable 1")
    same(out[0].numpy(), np.zeros(3, np.float32), "returned value")
    hvd.broadcast_variables([tf.Variable([r + 1.0])], root_rank=0)


def test_broadcast_variables_graph(hvd):
    r = hvd.rank()
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable(tf.fill([4], float(r)))
        bcast = hvd.broadcast_global_variables(hvd.size() - 1)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(bcast)
            same(sess.run(v), np.full(4, hvd.size() - 1, np.float32), "global variable")
    with pytest.raises(RuntimeError):
        hvd.broadcast_global_variables(0)  # eager: refused, as Horovod


def test_objects(hvd):
    n, r = hvd.size(), hvd.rank()
    obj = {"rank": r, "data": list(range(r + 1))}
    assert hvd.broadcast_object(obj, root_rank=n - 1) == {"rank": n - 1,
                                                          "data": list(range(n))}
    assert hvd.allgather_object(obj) == [{"rank": k, "data": list(range(k + 1))}
                                         for k in range(n)]


def test_broadcast_object_fn_graph(hvd):
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        fn = hvd.broadcast_object_fn(root_rank=0, session=sess)
        assert fn(("from", hvd.rank())) == ("from", 0)


def test_join_and_barrier(hvd):
    hvd.barrier()
    last = hvd.join()
    assert 0 <= int(last) < hvd.size()
    @tf.function
    def f():
        hvd.barrier()
        return hvd.join()
    assert 0 <= int(f()) < hvd.size()
