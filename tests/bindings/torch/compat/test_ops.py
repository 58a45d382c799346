"""Every operation x every dtype Horovod's torch binding takes x sync /
async / in place, with exact values (torch.equal against what Horovod
computes, horovod_numerics.py). Rank r's input is a function of r, so each
rank computes every rank's input and the expected result locally."""

import warnings

import pytest
import torch

import hvd_expected as hn

# Horovod 0.28's CPU kernels (horovod/torch/mpi_ops_v2.cc): reductions take
# int32, int64, float16, float32, float64; allgather, broadcast and alltoall
# also uint8, int8 and int16.
REDUCE_DTYPES = [torch.int32, torch.int64, torch.float16, torch.float32, torch.float64]
MOVE_DTYPES = [torch.uint8, torch.int8, torch.int16] + REDUCE_DTYPES
OPS = ["Sum", "Average", "Min", "Max", "Product"]
BASE = torch.tensor([[-3, -1, 0], [2, 5, 7]])


def dname(dtype):
    return str(dtype).replace("torch.", "")


def rank_input(r, dtype):
    # r * r: the sums over 2 and 3 ranks are not multiples of the size, so
    # integer Average truncates (toward zero, also for negative sums).
    return (BASE + r * r).to(dtype)


def inputs(hvd, dtype):
    return [rank_input(r, dtype) for r in range(hvd.size())]


@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=dname)
@pytest.mark.parametrize("opname", OPS)
def test_allreduce(hvd, dtype, opname):
    op = getattr(hvd, opname)
    xs = inputs(hvd, dtype)
    mine = xs[hvd.rank()]
    expected = hn.allreduce(hvd, xs, op)
    name = "ar.%s.%s" % (opname, dname(dtype))

    x = mine.clone()
    out = hvd.allreduce(x, op=op, name=name)
    assert out.dtype == dtype and out.shape == mine.shape
    assert torch.equal(out, expected), (out, expected)
    assert torch.equal(x, mine), "allreduce changed its input"

    handle = hvd.allreduce_async(x, op=op, name=name)
    assert isinstance(hvd.poll(handle), bool)
    out = hvd.synchronize(handle)
    assert torch.equal(out, expected) and torch.equal(x, mine)

    y = mine.clone()
    result = hvd.allreduce_(y, op=op, name=name)
    assert result is y and torch.equal(y, expected)

    y = mine.clone()
    result = hvd.synchronize(hvd.allreduce_async_(y, op=op, name=name))
    assert result is y and torch.equal(y, expected)


def test_allreduce_default_op_is_average(hvd):
    xs = inputs(hvd, torch.float32)
    out = hvd.allreduce(xs[hvd.rank()], name="ar.default")
    assert torch.equal(out, hn.allreduce(hvd, xs, hvd.Average))


@pytest.mark.parametrize("average", [True, False])
def test_allreduce_average_argument(hvd, average):
    # Deprecated since 0.19 but still accepted: average=True is Average,
    # False is Sum, with a DeprecationWarning.
    xs = inputs(hvd, torch.float64)
    with pytest.warns(DeprecationWarning):
        out = hvd.allreduce(xs[hvd.rank()], average=average, name="ar.avg.%s" % average)
    assert torch.equal(out, hn.allreduce(hvd, xs, hvd.Average if average else hvd.Sum))


def test_allreduce_op_and_average_refused(hvd):
    x = torch.ones(2)
    for call in (lambda: hvd.allreduce(x, average=True, op=hvd.Sum),
                 lambda: hvd.allreduce_async(x, average=False, op=hvd.Average),
                 lambda: hvd.allreduce_(x, average=True, op=hvd.Sum),
                 lambda: hvd.grouped_allreduce([x], average=True, op=hvd.Sum)):
        with pytest.raises(ValueError):
            call()


def test_allreduce_shapes(hvd):
    # 0-d, empty and many-dimensional tensors.
    n = hvd.size()
    for i, t in enumerate([torch.tensor(2.5), torch.zeros(0), torch.ones(2, 1, 3, 1),
                           torch.arange(4097.0)]):
        out = hvd.allreduce(t, op=hvd.Sum, name="ar.shape.%d" % i)
        assert out.shape == t.shape and torch.equal(out, t * n)


@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=dname)
def test_allgather(hvd, dtype):
    # Rank r contributes r + 1 rows: the first dimension may differ.
    def part(r):
        return (torch.arange((r + 1) * 6).reshape(r + 1, 2, 3) % 50 + r).to(dtype)

    expected = torch.cat([part(r) for r in range(hvd.size())])
    mine = part(hvd.rank())
    out = hvd.allgather(mine, name="ag." + dname(dtype))
    assert out.dtype == dtype and torch.equal(out, expected)
    out = hvd.synchronize(hvd.allgather_async(mine, name="ag." + dname(dtype)))
    assert torch.equal(out, expected)
    assert torch.equal(mine, part(hvd.rank()))


def test_allgather_empty_part(hvd):
    # A rank may contribute no rows at all.
    def part(r):
        return torch.full((r % 2, 3), float(r))

    out = hvd.allgather(part(hvd.rank()), name="ag.empty")
    assert torch.equal(out, torch.cat([part(r) for r in range(hvd.size())]))


@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=dname)
def test_broadcast(hvd, dtype):
    def value(r):
        return (torch.arange(12).reshape(3, 4) % 50 + 7 * r).to(dtype)

    mine = value(hvd.rank())
    for root in sorted({0, hvd.size() - 1}):
        expected = value(root)
        name = "bc.%s.%d" % (dname(dtype), root)
        out = hvd.broadcast(mine, root_rank=root, name=name)
        assert out.dtype == dtype and torch.equal(out, expected)
        assert torch.equal(mine, value(hvd.rank()))
        out = hvd.synchronize(hvd.broadcast_async(mine, root, name=name))
        assert torch.equal(out, expected)
        y = mine.clone()
        result = hvd.broadcast_(y, root, name=name)
        assert result is y and torch.equal(y, expected)
        y = mine.clone()
        result = hvd.synchronize(hvd.broadcast_async_(y, root, name=name))
        assert result is y and torch.equal(y, expected)


def _a2a_rows(sender, receiver, count):
    # Rows a sender sends to a receiver: they say who sent them to whom.
    return torch.stack([torch.tensor([sender, receiver, k]) for k in range(count)]) \
        if count else torch.zeros(0, 3, dtype=torch.int64)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.float16, torch.float64],
                         ids=dname)
def test_alltoall_equal_splits(hvd, dtype):
    n, me = hvd.size(), hvd.rank()
    send = torch.cat([_a2a_rows(me, j, 2) for j in range(n)]).to(dtype)
    expected = torch.cat([_a2a_rows(r, me, 2) for r in range(n)]).to(dtype)
    out = hvd.alltoall(send, name="a2a.eq." + dname(dtype))
    # Without splits Horovod returns the tensor alone...
    assert isinstance(out, torch.Tensor) and torch.equal(out, expected)
    # ...but the async form's handle gives (output, received_splits).
    out, splits = hvd.synchronize(hvd.alltoall_async(send, name="a2a.eq." + dname(dtype)))
    assert torch.equal(out, expected)
    assert splits.tolist() == [2] * n


@pytest.mark.parametrize("form", ["list", "tensor"])
def test_alltoall_splits(hvd, form):
    n, me = hvd.size(), hvd.rank()

    def count(sender, receiver):
        return (sender + 2 * receiver) % 3  # includes zero-row messages

    counts = [count(me, j) for j in range(n)]
    send = torch.cat([_a2a_rows(me, j, count(me, j)) for j in range(n)]).float()
    expected = torch.cat([_a2a_rows(r, me, count(r, me)) for r in range(n)]).float()
    splits = counts if form == "list" else torch.tensor(counts, dtype=torch.int32)
    out, received = hvd.alltoall(send, splits=splits, name="a2a.splits." + form)
    assert torch.equal(out, expected)
    assert received.dtype == torch.int32
    assert received.tolist() == [count(r, me) for r in range(n)]


@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=dname)
@pytest.mark.parametrize("opname", ["Sum", "Average"])
@pytest.mark.parametrize("extra", [0, 1], ids=["even", "uneven"])
def test_reducescatter(hvd, dtype, opname, extra):
    n, me = hvd.size(), hvd.rank()
    op = getattr(hvd, opname)
    rows = 2 * n + extra

    def value(r):
        return (torch.arange(rows * 2).reshape(rows, 2) % 13 - 5 + r * r).to(dtype)

    xs = [value(r) for r in range(n)]
    expected = hn.reducescatter(hvd, xs, op, me)
    name = "rs.%s.%s.%d" % (opname, dname(dtype), extra)
    out = hvd.reducescatter(xs[me], op=op, name=name)
    assert out.dtype == dtype and torch.equal(out, expected), (out, expected)
    out = hvd.synchronize(hvd.reducescatter_async(xs[me], op=op, name=name))
    assert torch.equal(out, expected)
    assert torch.equal(xs[me], value(me))


def test_reducescatter_default_op_is_average(hvd):
    n = hvd.size()
    xs = [torch.arange(2.0 * n) + r for r in range(n)]
    out = hvd.reducescatter(xs[hvd.rank()], name="rs.default")
    assert torch.equal(out, hn.reducescatter(hvd, xs, hvd.Average, hvd.rank()))


def test_barrier(hvd):
    for _ in range(3):
        assert hvd.barrier() is None


def test_poll_and_synchronize(hvd):
    x = torch.ones(4)
    handle = hvd.allreduce_async(x, op=hvd.Sum, name="poll.a")
    while not hvd.poll(handle):
        pass
    assert hvd.poll(handle) is True
    out = hvd.synchronize(handle)
    assert torch.equal(out, x * hvd.size())


@pytest.mark.differs("synchronize-unknown-handle")
def test_synchronize_twice(hvd, impl):
    # Horovod forgets a handle once synchronized: a second synchronize of it
    # returns None. plait raises ValueError naming the handle.
    handle = hvd.allreduce_async(torch.ones(2), op=hvd.Sum, name="sync.twice")
    assert hvd.synchronize(handle) is not None
    if impl == "horovod":
        assert hvd.synchronize(handle) is None
    else:
        with pytest.raises(ValueError):
            hvd.synchronize(handle)
    with pytest.raises(ValueError):  # poll of it: ValueError in both
        hvd.poll(handle)


def test_many_async_in_flight(hvd):
    # Many operations submitted before any is waited on (they may be fused);
    # waited on in reverse order.
    n = hvd.size()
    tensors = [torch.full((i + 1,), float(i)) for i in range(40)]
    handles = [hvd.allreduce_async(t, op=hvd.Sum, name="many.%d" % i)
               for i, t in enumerate(tensors)]
    gathers = [hvd.allgather_async(t[:1], name="many.ag.%d" % i) for i, t in enumerate(tensors)]
    for i in reversed(range(len(tensors))):
        assert torch.equal(hvd.synchronize(handles[i]), tensors[i] * n)
        assert torch.equal(hvd.synchronize(gathers[i]), tensors[i][:1].repeat(n))


def test_unnamed_operations(hvd):
    # Without names every rank must issue the operations in the same order;
    # automatic names keep them apart.
    n = hvd.size()
    a = hvd.allreduce(torch.ones(3), op=hvd.Sum)
    b = hvd.allgather(torch.ones(1, 2) * hvd.rank())
    c = hvd.broadcast(torch.ones(2) * hvd.rank(), root_rank=0)
    handles = [hvd.allreduce_async(torch.full((2,), float(i)), op=hvd.Sum) for i in range(5)]
    assert torch.equal(a, torch.full((3,), float(n)))
    assert b[:, 0].tolist() == list(range(n))
    assert torch.equal(c, torch.zeros(2))
    for i, h in enumerate(handles):
        assert torch.equal(hvd.synchronize(h), torch.full((2,), float(i * n)))


def test_name_reused_after_completion(hvd):
    # A name is free again once its operation completed, also for another
    # kind of operation.
    n = hvd.size()
    for i in range(3):
        assert torch.equal(hvd.allreduce(torch.full((2,), float(i)), op=hvd.Sum, name="reuse"),
                           torch.full((2,), float(i * n)))
    assert hvd.allgather(torch.ones(1), name="reuse").shape == (n,)


def test_duplicate_name_in_flight(hvd):
    # A second operation with the name of one still in flight on this rank
    # is refused at once with ValueError. To know that the first one cannot
    # have completed yet, its peers submit it only after a barrier: rank 0
    # is checked on "dup.b", the others on "dup.a".
    me = hvd.rank()
    x = torch.ones(3)
    first = "dup.b" if me == 0 else "dup.a"
    later = "dup.a" if me == 0 else "dup.b"
    h1 = hvd.allreduce_async(x, op=hvd.Sum, name=first)
    with pytest.raises(ValueError):
        hvd.allreduce_async(x, op=hvd.Sum, name=first)
    hvd.barrier()
    h2 = hvd.allreduce_async(x, op=hvd.Sum, name=later)
    assert torch.equal(hvd.synchronize(h1), x * hvd.size())
    assert torch.equal(hvd.synchronize(h2), x * hvd.size())


def test_process_set_global(hvd):
    # Process sets: only the global one, passed explicitly.
    ps = hvd.global_process_set
    n, me = hvd.size(), hvd.rank()
    assert ps.size() == n and ps.rank() == me and ps.included()
    assert list(ps.ranks) == list(range(n))
    x = torch.ones(2) * (me + 1)
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, name="ps.ar", process_set=ps),
                       torch.full((2,), n * (n + 1) / 2))
    assert hvd.allgather(x[:1], name="ps.ag", process_set=ps).tolist() == \
        [float(r + 1) for r in range(n)]
    assert torch.equal(hvd.broadcast(x, 0, name="ps.bc", process_set=ps), torch.ones(2))
    out = hvd.reducescatter(torch.ones(n, 2), op=hvd.Sum, name="ps.rs", process_set=ps)
    assert torch.equal(out, torch.full((1, 2), float(n)))
    out = hvd.alltoall(torch.arange(float(n)), name="ps.a2a", process_set=ps)
    assert torch.equal(out, torch.full((n,), float(me)))
    out = hvd.grouped_allreduce([x, x * 2], op=hvd.Sum, name="ps.gar", process_set=ps)
    assert torch.equal(out[1], torch.full((2,), float(n * (n + 1))))
    hvd.barrier(process_set=ps)
    assert hvd.broadcast_object({"v": me}, root_rank=0, name="ps.obj", process_set=ps) == {"v": 0}


def test_deprecation_warnings_off_by_default(hvd):
    # The op= form warns about nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        hvd.allreduce(torch.ones(1), op=hvd.Sum, name="nowarn")
