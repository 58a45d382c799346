"""plait.torch on process sets: Horovod 0.28's interface (ProcessSet,
init(process_sets=...), add_process_set, remove_process_set, process_set=
on every operation, DistributedOptimizer(process_set=...)), with the
values and errors Horovod 0.28.1 gives over Gloo where they were measured
(docs/process-sets.md)."""

import pytest
import torch


def _mine(sets):
    return [(k, ps) for k, ps in sorted(sets.items()) if ps.included()]


def test_ids_ranks_and_queries(hvd, sets):
    n, r = hvd.size(), hvd.rank()
    assert [ps.process_set_id for _, ps in sorted(sets.items())] == list(range(1, len(sets) + 1))
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.global_process_set.size() == n and hvd.global_process_set.rank() == r
    for _, ps in sorted(sets.items()):
        assert ps.size() == len(ps.ranks)
        assert ps.included() == (r in ps.ranks)
        if ps.included():
            assert ps.rank() == ps.ranks.index(r)
        else:  # Horovod 0.28.1's class and words
            with pytest.raises(ValueError, match="Process is not part of provided process set"):
                ps.rank()


def test_every_operation_on_each_set(hvd, sets):
    r = hvd.rank()
    for key, ps in _mine(sets):
        m, me, members = ps.size(), ps.rank(), ps.ranks
        x = torch.tensor([float(r), 1.0])
        out = hvd.allreduce(x, name="ops.avg." + key, process_set=ps)
        assert out.tolist() == [sum(members) / m, 1.0]
        outs = hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, name="ops.g." + key, process_set=ps)
        assert outs[1].tolist() == [2.0 * sum(members), 2.0 * m]
        g = hvd.allgather(torch.full((me + 1, 2), float(r)), name="ops.ag." + key, process_set=ps)
        assert g[:, 0].tolist() == [float(q) for i, q in enumerate(members) for _ in range(i + 1)]
        root = members[-1]  # a rank of the job, as in Horovod
        b = hvd.broadcast(torch.tensor([float(r)]), root, name="ops.bc." + key, process_set=ps)
        assert b.tolist() == [float(root)]
        a2a = hvd.alltoall(torch.arange(float(m)) + 10 * r, name="ops.a2a." + key, process_set=ps)
        assert a2a.tolist() == [10.0 * q + me for q in members]
        rs = hvd.reducescatter(torch.ones(m, 2) * (r + 1), op=hvd.Sum, name="ops.rs." + key,
                               process_set=ps)
        assert rs.tolist() == [[float(sum(q + 1 for q in members))] * 2]
        hvd.barrier(process_set=ps)
        obj = hvd.broadcast_object({"from": r}, root_rank=root, name="ops.obj." + key,
                                   process_set=ps)
        assert obj == {"from": root}


def test_same_names_on_two_sets_at_once(hvd, sets):
    """Each set matches names on its own: the same names in flight on two
    sets at once (rank 1 is in both), many small tensors fused per set."""
    r = hvd.rank()
    handles = []
    for key, ps in _mine(sets):
        for i in range(20):
            t = torch.full((3,), float((r + 1) * (i + 1)))
            handles.append((ps, i, t, hvd.allreduce_async_(t, op=hvd.Sum, name="same.%d" % i,
                                                           process_set=ps)))
    for ps, i, t, h in handles:
        hvd.synchronize(h)
        assert t.tolist() == [float(sum((q + 1) * (i + 1) for q in ps.ranks))] * 3


def test_outside_the_set_is_refused_by_name(hvd, sets):
    r = hvd.rank()
    for key, ps in sorted(sets.items()):
        if ps.included():
            continue
        with pytest.raises(ValueError, match="rank %d is not a member of process set %d"
                           % (r, ps.process_set_id)):
            hvd.allreduce(torch.ones(2), name="outside." + key, process_set=ps)
        with pytest.raises(ValueError, match="not a member"):
            hvd.barrier(process_set=ps)
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(1), name="unregistered", process_set=hvd.ProcessSet([0]))
    with pytest.raises(TypeError, match="must be a ProcessSet"):
        hvd.allreduce(torch.ones(1), name="list", process_set=[0])


def test_gradients_stay_in_the_set(hvd, sets):
    ps = sets["A"]
    if not ps.included():
        return
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = hvd.allreduce(x * (hvd.rank() + 1), op=hvd.Sum, name="grad.a", process_set=ps)
    y.sum().backward()
    # Horovod's gradient: the incoming gradient (ones) allreduced (Sum) over
    # A, the set's size, times this rank's factor
    assert x.grad.tolist() == [float(ps.size() * (hvd.rank() + 1))] * 2


def test_distributed_optimizer_on_a_set(hvd, sets):
    """Gradients are averaged over the set's ranks only; a rank outside it
    keeps its own (Horovod: no hooks, synchronize() does nothing)."""
    ps = sets["A"]
    r = hvd.rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), process_set=ps)
    loss = model(torch.tensor([[float(r + 1), 0.0]])).sum()
    loss.backward()
    opt.step()
    if ps.included():
        mean = sum(q + 1 for q in ps.ranks) / ps.size()
        assert model.weight.tolist() == [[1.0 - mean, 1.0]]
    else:
        assert model.weight.tolist() == [[1.0 - (r + 1), 1.0]]


def test_dynamic_add_use_remove(hvd, sets):
    n, r = hvd.size(), hvd.rank()
    ps = hvd.add_process_set([n - 1, 0])
    assert ps.process_set_id == len(sets) + 1 and ps.ranks == [0, n - 1]
    if ps.included():
        out = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="dyn.ar", process_set=ps)
        assert out.tolist() == [2.0]
    hvd.barrier()
    assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None
    assert hvd.remove_process_set(ps) is False
    assert hvd.remove_process_set(hvd.global_process_set) is False
    with pytest.raises(ValueError, match="exists already"):  # Horovod: a duplicate
        hvd.add_process_set(list(sets["A"].ranks))
    with pytest.raises(ValueError, match="exists already"):
        hvd.add_process_set(list(range(n)))
    again = hvd.add_process_set([0, n - 1])  # the freed id is given again
    assert again.process_set_id == len(sets) + 1
    assert hvd.remove_process_set(again) is True


def test_mismatched_add_names_the_ranks(hvd):
    n, r = hvd.size(), hvd.rank()
    from plait import MismatchError
    with pytest.raises(MismatchError, match="process set ranks"):
        hvd.add_process_set([0, n - 1] if r == 0 else [n - 1])


def test_unnamed_operations_are_counted_per_set(hvd, sets):
    """Unnamed operations on a set are numbered within the set: the members
    of A run unnamed operations of every kind that the other ranks do not,
    then every rank's unnamed operations on the global set still match,
    and so do the set's next ones. (One count per kind for every set put
    the members ahead of the others for good.)"""
    n, r = hvd.size(), hvd.rank()
    a = sets["A"]
    for _ in range(2):
        if a.included():
            assert hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=a).tolist() == [2.0] * 2
            assert hvd.allgather(torch.ones(1), process_set=a).tolist() == [1.0] * 2
            assert hvd.alltoall(torch.ones(2), process_set=a).tolist() == [1.0] * 2
        assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(n)] * 2
        assert hvd.allgather(torch.ones(1)).tolist() == [1.0] * n
        assert hvd.alltoall(torch.ones(n)).tolist() == [1.0] * n
