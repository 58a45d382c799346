"""plait.torch operations on every rank: every op x dtype x in place / out of
place x sync / async, checked exactly (or to the dtype's precision) against
a reference every rank computes from every rank's input."""

import itertools

import pytest
import torch

import plait.torch as hvd

SIGNED = [torch.int8, torch.int16, torch.int32, torch.int64]
UNSIGNED = [torch.uint8] + ([torch.uint16] if hasattr(torch, "uint16") else [])
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
COMPLEX = [torch.complex64, torch.complex128]
DTYPES = UNSIGNED + SIGNED + FLOATS + [torch.bool] + COMPLEX
OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max,
       "Product": hvd.Product}


def rank_input(r, dtype, shape, seed):
    """Rank r's input: small values so products and sums fit every dtype."""
    g = torch.Generator().manual_seed(seed * 101 + r)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).to(torch.bool)
    if dtype in UNSIGNED:
        return torch.randint(0, 4, shape, generator=g).to(torch.int64).to(dtype)
    if dtype in SIGNED:
        return torch.randint(-3, 4, shape, generator=g).to(dtype)
    if dtype in COMPLEX:
        re = torch.randint(-8, 9, shape, generator=g).double() / 4
        im = torch.randint(-8, 9, shape, generator=g).double() / 4
        return torch.complex(re, im).to(dtype)
    return (torch.randint(-8, 9, shape, generator=g).double() / 4).to(dtype)


def reference(inputs, op, dtype):
    n = len(inputs)
    if dtype == torch.bool:
        stack = torch.stack([i.to(torch.int64) for i in inputs])
        if op in (hvd.Sum, hvd.Max):
            return stack.amax(0).to(torch.bool)
        return stack.amin(0).to(torch.bool)
    wide = torch.complex128 if dtype in COMPLEX else (
        torch.float64 if dtype.is_floating_point else torch.int64)
    stack = torch.stack([i.to(wide) for i in inputs])
    if op == hvd.Sum:
        out = stack.sum(0)
    elif op == hvd.Average:
        out = stack.sum(0) / n if (dtype.is_floating_point or dtype in COMPLEX) \
            else torch.div(stack.sum(0), n, rounding_mode="trunc")
    elif op == hvd.Min:
        out = stack.amin(0)
    elif op == hvd.Max:
        out = stack.amax(0)
    else:
        out = stack.prod(0)
    return out.to(dtype)


def assert_close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if dtype in (torch.float16, torch.bfloat16):
        torch.testing.assert_close(got.double(), want.double(), rtol=2e-2, atol=2e-2)
    elif dtype.is_floating_point or dtype in COMPLEX:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    else:
        assert torch.equal(got, want), (got, want)


def allowed(op, dtype):
    if dtype == torch.bool and op == hvd.Average:
        return False
    if dtype in COMPLEX and op not in (hvd.Sum, hvd.Average):
        return False
    return True


CASES = list(itertools.product(DTYPES, OPS.items(), [False, True], [False, True]))


@pytest.mark.parametrize("dtype,op,in_place,asynchronous", CASES,
                         ids=["%s-%s-%s-%s" % (str(d)[6:], o[0], "inplace" if i else "out",
                                                "async" if a else "sync")
                              for d, o, i, a in CASES])
def test_allreduce(hvd, dtype, op, in_place, asynchronous):
    _, op = op
    seed = CASES.index((dtype, (next(k for k, v in OPS.items() if v == op), op), in_place,
                        asynchronous))
    n, r = hvd.size(), hvd.rank()
    shape = (7, 3)
    inputs = [rank_input(k, dtype, shape, seed) for k in range(n)]
    x = inputs[r].clone()
    name = "ar.%d" % seed
    if not allowed(op, dtype):
        with pytest.raises((TypeError, hvd.PlaitError)) as err:
            if in_place:
                hvd.allreduce_(x, op=op, name=name)
            else:
                hvd.allreduce(x, op=op, name=name)
        assert str(dtype).replace("torch.", "") in str(err.value)
        return
    if asynchronous:
        h = (hvd.allreduce_async_ if in_place else hvd.allreduce_async)(x, op=op, name=name)
        out = hvd.synchronize(h)
    else:
        out = (hvd.allreduce_ if in_place else hvd.allreduce)(x, op=op, name=name)
    want = reference(inputs, op, dtype)
    assert_close(out, want, dtype)
    if in_place:
        assert out is x
    else:
        assert torch.equal(x, inputs[r]), "the input of an out-of-place allreduce changed"


@pytest.mark.parametrize("shape", [(), (0,), (1,), (1001,), (4097, 2), (3, 0, 5)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
def test_allreduce_shapes(hvd, shape, dtype):
    n, r = hvd.size(), hvd.rank()
    seed = 7000 + len(shape) * 13 + sum(shape)
    inputs = [rank_input(k, dtype, shape, seed) for k in range(n)]
    out = hvd.allreduce(inputs[r], op=hvd.Sum, name="shape.%s.%s" % (shape, dtype))
    assert_close(out, reference(inputs, hvd.Sum, dtype), dtype)


def test_allreduce_non_contiguous_in_place(hvd):
    n, r = hvd.size(), hvd.rank()
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) + r
    view = base[:, ::2]  # every other column: not contiguous
    assert not view.is_contiguous()
    hvd.allreduce_(view, op=hvd.Sum, name="noncontig")
    want = sum(torch.arange(24, dtype=torch.float32).reshape(4, 6)[:, ::2] + k for k in range(n))
    assert torch.equal(view, want)
    # The columns in between were not touched.
    assert torch.equal(base[:, 1::2], (torch.arange(24, dtype=torch.float32).reshape(4, 6) + r)[:, 1::2])


def test_in_place_allreduces_in_flight_hold_one_object_each(hvd):
    """An in-place allreduce of a contiguous CPU tensor in flight holds one
    object Python's collector tracks (a tuple of the core handle, the tensor
    and the name), not a handle object, a pending entry, a closure and cells:
    those kept the collector scanning (full collections of torch's objects
    cost ~0.5 ms of a 200-tensor step), and each was a Python call more."""
    import gc
    n = 64
    ts = [torch.full((16,), 1.0) for _ in range(n)]
    names = ["few.objects.%d" % i for i in range(n)]
    for t, name in zip(ts, names):  # once, so that nothing is described for the first time
        hvd.synchronize(hvd.allreduce_async_(t, name=name, op=hvd.Sum))
    enabled = gc.isenabled()
    gc.disable()
    try:
        before = len(gc.get_objects())
        handles = [hvd.allreduce_async_(t, name=name, op=hvd.Sum) for t, name in zip(ts, names)]
        held = len(gc.get_objects()) - before - 1  # the list of handles
    finally:
        if enabled:
            gc.enable()
    for h in handles:
        hvd.synchronize(h)
    assert held <= n + 8, "%d operations in flight hold %d tracked objects" % (n, held)
    size = hvd.size()
    assert all(torch.equal(t, torch.full((16,), float(size * size))) for t in ts)


def test_in_place_allreduce_async_refuses_what_the_general_path_refuses(hvd):
    """allreduce_async_ of a named contiguous CPU tensor takes a shorter path
    (the DistributedOptimizer's call); what it refuses, and its default op,
    are the general path's."""
    size, r = hvd.size(), hvd.rank()
    x = torch.ones(3)
    with pytest.raises(ValueError, match="NUL"):
        hvd.allreduce_async_(x, name="n\0rank%d" % r, op=hvd.Sum)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce_async_(x, name="fast.adasum", op=hvd.Adasum)
    with pytest.raises(ValueError, match="unknown op"):
        hvd.allreduce_async_(x, name="fast.badop", op=17)
    if r == 0:  # "fast.dup" is certainly in flight: the others submit it after the barrier
        h = hvd.allreduce_async_(x, name="fast.dup", op=hvd.Sum)
        with pytest.raises(hvd.InvalidArgumentError, match="fast.dup"):
            hvd.allreduce_async_(torch.ones(3), name="fast.dup", op=hvd.Sum)
        hvd.barrier()
    else:
        hvd.barrier()
        h = hvd.allreduce_async_(x, name="fast.dup", op=hvd.Sum)
    assert hvd.synchronize(h) is x
    assert x.tolist() == [size] * 3
    y = torch.full((4,), float(r + 1), dtype=torch.float64)
    assert hvd.synchronize(hvd.allreduce_async_(y, name="fast.default")) is y  # Average
    assert torch.equal(y, torch.full((4,), (size + 1) / 2, dtype=torch.float64))


def test_fast_path_handles_poll_fail_with_the_message_and_are_used_once(hvd):
    """The handles of allreduce_async_'s short path (tuples in the handle
    table) behave as every other handle: poll() says when they finished,
    synchronize() of a failed one raises the library's error naming the
    operation and the ranks, and a handle synchronized once is gone."""
    size, r = hvd.size(), hvd.rank()
    x = torch.ones(4)
    h = hvd.allreduce_async_(x, name="fast.poll", op=hvd.Sum)
    while not hvd.poll(h):
        pass
    assert hvd.synchronize(h) is x
    assert x.tolist() == [size] * 4
    with pytest.raises(ValueError, match="not a handle"):
        hvd.synchronize(h)
    with pytest.raises(ValueError, match="not a handle"):
        hvd.poll(h)
    bad = torch.ones(r + 1)  # a shape of its own on every rank
    h = hvd.allreduce_async_(bad, name="fast.mismatch", op=hvd.Sum)
    with pytest.raises(hvd.MismatchError, match="fast.mismatch") as err:
        hvd.synchronize(h)
    assert "rank" in str(err.value)
    with pytest.raises(ValueError, match="not a handle"):
        hvd.synchronize(h)
    assert bad.tolist() == [1.0] * (r + 1)  # a failed operation leaves the tensor alone
    # A failed one does not stop the next.
    y = torch.full((2,), float(r))
    assert hvd.synchronize(hvd.allreduce_async_(y, name="fast.after", op=hvd.Sum)) is y
    assert y.tolist() == [float(sum(range(size)))] * 2


def test_descriptions_of_views_at_one_address_are_their_own(hvd):
    """plait.torch keeps descriptions of CPU tensors by address, dtype and
    shape: views of one buffer with another shape or dtype are described
    anew, and each reduces as what it is."""
    size, r = hvd.size(), hvd.rank()
    buf = torch.zeros(8, dtype=torch.float64)
    buf.fill_(r + 1)
    hvd.allreduce_(buf, op=hvd.Sum, name="views.f64")
    assert torch.equal(buf, torch.full((8,), float(size * (size + 1) // 2), dtype=torch.float64))
    f32 = buf.view(torch.float32)  # the same address, another dtype and shape
    f32.fill_(r + 2)
    hvd.allreduce_(f32, op=hvd.Sum, name="views.f32")
    assert torch.equal(f32, torch.full((16,), float(sum(k + 2 for k in range(size)))))
    square = f32.view(4, 4)  # the same address and dtype, another shape
    square.fill_(1)
    hvd.allreduce_(square, op=hvd.Max, name="views.square")
    assert torch.equal(square, torch.ones(4, 4))
    buf.fill_(r)  # float64 again: the first description still serves
    hvd.allreduce_(buf, op=hvd.Sum, name="views.f64.again")
    assert torch.equal(buf, torch.full((8,), float(size * (size - 1) // 2), dtype=torch.float64))


def test_short_path_entries_follow_the_tensor_under_one_name(hvd):
    """allreduce_async_ keeps an entry per name (plait.torch._fast): a tensor
    re-allocated, resized, given another dtype at the same address (.data =)
    or a strided view at the same address and shape, under a name used
    before, is reduced as what it is now, and the old tensor is left alone."""
    size, r = hvd.size(), hvd.rank()
    total = float(sum(k + 1 for k in range(size)))
    x = torch.full((8,), float(r + 1))
    assert hvd.allreduce_(x, op=hvd.Sum, name="entry") is x
    assert x.tolist() == [total] * 8
    y = torch.full((8,), float(r + 1))  # re-allocated: same name, dtype and shape
    assert hvd.allreduce_(y, op=hvd.Sum, name="entry") is y
    assert y.tolist() == [total] * 8 and x.tolist() == [total] * 8
    y.resize_(32).fill_(r + 1)  # resized in place
    hvd.allreduce_(y, op=hvd.Sum, name="entry")
    assert y.tolist() == [total] * 32
    address = y.data_ptr()
    y.data = y.data.view(torch.int32)  # the same address and shape, another dtype
    assert y.data_ptr() == address and y.shape == (32,)
    y.fill_((r + 1) << 24)  # as float32 bits these would not sum to the int sum
    hvd.allreduce_(y, op=hvd.Sum, name="entry")
    assert y.dtype == torch.int32 and y.tolist() == [int(total) << 24] * 32
    head = y[:16]  # the same address and dtype, another shape
    head.fill_(r + 1)
    hvd.allreduce_(head, op=hvd.Sum, name="entry")
    assert y[:16].tolist() == [int(total)] * 16 and y[16:].tolist() == [int(total) << 24] * 16
    base = torch.arange(16, dtype=torch.float32) + 100 * r
    head = base[:8]  # contiguous
    hvd.allreduce_(head, op=hvd.Max, name="entry.view")
    base.copy_(torch.arange(16, dtype=torch.float32) + 100 * r)
    every_other = base[::2]  # the same address, dtype and shape; not contiguous
    assert every_other.data_ptr() == head.data_ptr() and every_other.shape == head.shape
    hvd.allreduce_(every_other, op=hvd.Max, name="entry.view")
    top = 100 * (size - 1)
    assert base[::2].tolist() == [float(top + k) for k in range(0, 16, 2)]
    assert base[1::2].tolist() == [float(100 * r + k) for k in range(1, 16, 2)]


def test_prescale_postscale(hvd):
    n, r = hvd.size(), hvd.rank()
    x = torch.full((5,), float(r + 1), dtype=torch.float64)
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0, name="scale.f")
    assert torch.allclose(out, torch.full((5,), 1.5 * n * (n + 1) / 2, dtype=torch.float64))
    xi = torch.full((4,), 10 * (r + 1), dtype=torch.int32)
    outi = hvd.allreduce(xi, op=hvd.Sum, prescale_factor=0.5, name="scale.i")
    assert outi.tolist() == [5 * n * (n + 1) // 2] * 4


def test_average_keyword_and_default_op(hvd):
    n, r = hvd.size(), hvd.rank()
    x = torch.full((3,), float(r))
    assert torch.allclose(hvd.allreduce(x, name="dflt"), torch.full((3,), (n - 1) / 2))
    assert torch.allclose(hvd.allreduce(x, average=False, name="avgkw"),
                          torch.full((3,), n * (n - 1) / 2))
    with pytest.raises(ValueError, match="op or average"):
        hvd.allreduce(x, average=True, op=hvd.Sum, name="both")


def test_adasum_refused(hvd):
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum, name="adasum")


def test_compression_fp16(hvd):
    n, r = hvd.size(), hvd.rank()
    x = torch.full((9,), 0.25 * (r + 1), dtype=torch.float32)
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16, name="fp16")
    assert out.dtype == torch.float32
    assert torch.allclose(out, torch.full((9,), 0.25 * n * (n + 1) / 2))


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_grouped_allreduce(hvd, in_place, asynchronous):
    n, r = hvd.size(), hvd.rank()
    tag = "g.%d.%d" % (in_place, asynchronous)
    dtypes = [torch.float32, torch.int64, torch.float16, torch.float64]
    inputs = [[rank_input(k, d, (5 + i, 2), 300 + i) for i, d in enumerate(dtypes)]
              for k in range(n)]
    mine = [t.clone() for t in inputs[r]]
    if asynchronous:
        fn = hvd.grouped_allreduce_async_ if in_place else hvd.grouped_allreduce_async
        out = hvd.synchronize(fn(mine, op=hvd.Sum, name=tag))
    else:
        fn = hvd.grouped_allreduce_ if in_place else hvd.grouped_allreduce
        out = fn(mine, op=hvd.Sum, name=tag)
    for i, d in enumerate(dtypes):
        assert_close(out[i], reference([inputs[k][i] for k in range(n)], hvd.Sum, d), d)
        if in_place:
            assert out[i] is mine[i]


MOVE_DTYPES = DTYPES + [torch.float8_e4m3fn] if hasattr(torch, "float8_e4m3fn") else DTYPES
MOVE_CASES = list(itertools.product(MOVE_DTYPES, [False, True]))
MOVE_IDS = ["%s-%s" % (str(d)[6:], "async" if a else "sync") for d, a in MOVE_CASES]


def _raw_input(r, dtype, rows, seed):
    if dtype in DTYPES:
        return rank_input(r, dtype, (rows, 3), seed)
    # dtypes plait cannot reduce travel as bytes: any bit pattern will do.
    g = torch.Generator().manual_seed(seed * 101 + r)
    return torch.randint(0, 120, (rows, 3), generator=g, dtype=torch.uint8).view(dtype)


def _same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and \
        torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


@pytest.mark.parametrize("dtype,asynchronous", MOVE_CASES, ids=MOVE_IDS)
def test_allgather(hvd, dtype, asynchronous):
    n, r = hvd.size(), hvd.rank()
    seed = 500 + MOVE_CASES.index((dtype, asynchronous))
    inputs = [_raw_input(k, dtype, k + 1 if k != 1 else 0, seed) for k in range(n)]
    name = "ag.%d" % seed
    if asynchronous:
        out = hvd.synchronize(hvd.allgather_async(inputs[r], name=name))
    else:
        out = hvd.allgather(inputs[r], name=name)
    assert _same(out, torch.cat(inputs))


@pytest.mark.parametrize("dtype,asynchronous", MOVE_CASES, ids=MOVE_IDS)
def test_broadcast(hvd, dtype, asynchronous):
    n, r = hvd.size(), hvd.rank()
    seed = 600 + MOVE_CASES.index((dtype, asynchronous))
    root = n - 1
    inputs = [_raw_input(k, dtype, 4, seed) for k in range(n)]
    x = inputs[r].clone()
    name = "bc.%d" % seed
    if asynchronous:
        out = hvd.synchronize(hvd.broadcast_async(x, root, name=name))
        assert _same(x, inputs[r])
        out2 = hvd.synchronize(hvd.broadcast_async_(x, root, name=name + "_"))
        assert out2 is x
    else:
        out = hvd.broadcast(x, root, name=name)
        assert _same(x, inputs[r])
        assert hvd.broadcast_(x, root, name=name + "_") is x
    assert _same(out, inputs[root])
    assert _same(x, inputs[root])


@pytest.mark.parametrize("dtype,asynchronous", MOVE_CASES, ids=MOVE_IDS)
def test_alltoall(hvd, dtype, asynchronous):
    n, r = hvd.size(), hvd.rank()
    seed = 700 + MOVE_CASES.index((dtype, asynchronous))
    # Rank k sends (k + j) % 3 rows to rank j.
    splits = [[(k + j) % 3 for j in range(n)] for k in range(n)]
    inputs = [_raw_input(k, dtype, sum(splits[k]), seed) for k in range(n)]
    name = "a2a.%d" % seed
    if asynchronous:
        out, received = hvd.synchronize(hvd.alltoall_async(inputs[r], splits[r], name=name))
    else:
        out, received = hvd.alltoall(inputs[r], splits=splits[r], name=name)
    want = []
    for k in range(n):
        start = sum(splits[k][:r])
        want.append(inputs[k][start:start + splits[k][r]])
    assert _same(out, torch.cat(want))
    assert received.tolist() == [splits[k][r] for k in range(n)]
    assert received.dtype == torch.int32


def test_alltoall_equal_splits(hvd):
    n, r = hvd.size(), hvd.rank()
    x = torch.arange(2 * n) + 100 * r
    out = hvd.alltoall(x, name="a2a.equal")
    assert out.tolist() == [100 * k + 2 * r + i for k in range(n) for i in range(2)]
    with pytest.raises(ValueError, match="divide"):
        hvd.alltoall(torch.arange(2 * n + 1), name="a2a.bad")
    with pytest.raises(ValueError, match="entries"):
        hvd.alltoall(x, splits=[1] * (n + 1), name="a2a.bad2")


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16, torch.bfloat16,
                                   torch.complex64])
@pytest.mark.parametrize("op", ["Sum", "Average", "Max"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_reducescatter(hvd, dtype, op, asynchronous):
    n, r = hvd.size(), hvd.rank()
    op_v = OPS[op]
    seed = 800 + DTYPES.index(dtype) * 10 + list(OPS).index(op) * 2 + int(asynchronous)
    rows = 2 * n + 1  # not divisible: the first rows % n ranks get one more
    inputs = [rank_input(k, dtype, (rows, 2), seed) for k in range(n)]
    name = "rs.%d" % seed
    if not allowed(op_v, dtype):
        with pytest.raises(TypeError, match="complex"):
            hvd.reducescatter(inputs[r], op=op_v, name=name)
        return
    if asynchronous:
        out = hvd.synchronize(hvd.reducescatter_async(inputs[r], op=op_v, name=name))
    else:
        out = hvd.reducescatter(inputs[r], op=op_v, name=name)
    full = reference(inputs, op_v, dtype)
    counts = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
    start = sum(counts[:r])
    assert_close(out, full[start:start + counts[r]], dtype)


def test_reducescatter_default_is_average(hvd):
    n, r = hvd.size(), hvd.rank()
    out = hvd.reducescatter(torch.full((n, 2), float(r)), name="rs.default")
    assert torch.allclose(out, torch.full((1, 2), (n - 1) / 2))


def test_poll_and_handles(hvd):
    h = hvd.allreduce_async(torch.ones(3), op=hvd.Sum, name="poll")
    while not hvd.poll(h):
        pass
    assert hvd.synchronize(h).tolist() == [hvd.size()] * 3
    with pytest.raises(ValueError, match="not a handle"):
        hvd.synchronize(h)
    with pytest.raises(ValueError, match="not a handle"):
        hvd.poll(12345678)


def test_barrier(hvd):
    hvd.barrier()
    hvd.barrier()


def test_duplicate_name_in_flight(hvd):
    """Rank 0 submits "dup" twice while the other ranks have not submitted it
    yet (they wait at a barrier rank 0 joins only afterwards), so the first
    is certainly still in flight."""
    x = torch.ones(4)
    if hvd.rank() == 0:
        h = hvd.allreduce_async(x, name="dup", op=hvd.Sum)
        with pytest.raises(hvd.InvalidArgumentError, match="dup"):
            hvd.allreduce_async(x, name="dup", op=hvd.Sum)
        hvd.barrier()
    else:
        hvd.barrier()
        h = hvd.allreduce_async(x, name="dup", op=hvd.Sum)
    assert hvd.synchronize(h).tolist() == [hvd.size()] * 4
    # Once finished, the name can be used again.
    assert hvd.allreduce(x, name="dup", op=hvd.Sum).tolist() == [hvd.size()] * 4


def test_mismatch_names_ranks(hvd):
    n, r = hvd.size(), hvd.rank()
    with pytest.raises(hvd.MismatchError) as err:
        hvd.allreduce(torch.ones(r + 1), name="mismatch.shape", op=hvd.Sum)
    msg = str(err.value)
    assert "mismatch.shape" in msg
    for k in range(n):
        assert "rank %d" % k in msg or "ranks" in msg and str(k) in msg
    with pytest.raises(hvd.MismatchError, match="dtype"):
        hvd.allreduce(torch.ones(2, dtype=torch.float32 if r == 0 else torch.float64),
                      name="mismatch.dtype", op=hvd.Sum)


def test_bad_input(hvd):
    with pytest.raises(TypeError, match="torch.Tensor"):
        hvd.allreduce([1, 2, 3])
    with pytest.raises(TypeError, match="sparse"):
        hvd.allreduce(torch.eye(2).to_sparse())
    with pytest.raises(TypeError, match="name must be a str"):
        hvd.allreduce(torch.ones(1), name=3)
    with pytest.raises(ValueError, match="unknown op"):
        hvd.allreduce(torch.ones(1), op=99)
    with pytest.raises(ValueError, match="scalar"):
        hvd.allgather(torch.tensor(1.0))
    with pytest.raises(TypeError, match="root_rank"):
        hvd.broadcast(torch.ones(1), "0")
    with pytest.raises(hvd.InvalidArgumentError, match="root"):
        hvd.broadcast(torch.ones(1), hvd.size(), name="badroot")
    # Integers a C int cannot hold are refused, not wrapped by ctypes
    # (2**32 broadcast from rank 0, issue 16); every rank raises alike.
    for root in (2**32, 2**32 + 1, 2**31, -2**32, 2**64):
        with pytest.raises(ValueError, match="root_rank %d" % root):
            hvd.broadcast(torch.ones(1), root, name="wrapped.root")
        with pytest.raises(ValueError, match="root_rank %d" % root):
            hvd.broadcast_(torch.ones(1), root, name="wrapped.root_")
    n = hvd.size()
    with pytest.raises(ValueError, match=r"splits\[0\] %d is out of range" % (2**64 + n)):
        hvd.alltoall(torch.ones(n), splits=[2**64 + n] + [0] * (n - 1), name="wrapped.splits")
    with pytest.raises(TypeError, match="must be a ProcessSet"):
        hvd.allreduce(torch.ones(1), process_set=[0])


def test_names_with_nul_are_refused(hvd):
    """'a\\0rank0' and 'a\\0rank1' were both cut to 'a' at the C ABI and
    reduced together (issue 16); every binding refuses such names."""
    r = hvd.rank()
    x = torch.ones(2) * (r + 1)
    with pytest.raises(ValueError, match="NUL"):
        hvd.allreduce(x, name="a\0rank%d" % r)
    with pytest.raises(ValueError, match="NUL"):
        hvd.grouped_allreduce([x, x], name="g\0rank%d" % r)
    with pytest.raises(ValueError, match="NUL"):
        hvd.broadcast(x, 0, name="b\0rank%d" % r)
    with pytest.raises(ValueError, match="NUL"):
        hvd.allgather(x, name="c\0rank%d" % r)
    # the job goes on: nothing was submitted
    assert torch.equal(hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after.nul"),
                       torch.ones(1) * hvd.size())


def test_join_uneven(hvd):
    """Rank r has r + 1 batches; joined ranks contribute the identity."""
    n, r = hvd.size(), hvd.rank()
    for step in range(n):
        if step > r:
            break
        out = hvd.allreduce(torch.ones(3) * (r + 1), op=hvd.Sum, name="join.step.%d" % step)
        # Ranks with more than `step` batches are still active.
        assert out.tolist() == [sum(k + 1 for k in range(n) if k >= step)] * 3
    assert hvd.join() == n - 1


def test_stats(hvd):
    hvd.stats_reset()
    hs = [hvd.allreduce_async(torch.ones(256), op=hvd.Sum, name="st.%d" % i) for i in range(20)]
    for h in hs:
        hvd.synchronize(h)
    s = hvd.stats()
    assert s["tensors"] == 20
    assert s["bytes"] == 20 * 256 * 4
    assert 1 <= s["responses"] <= 20
