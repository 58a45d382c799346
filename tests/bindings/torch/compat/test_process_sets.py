"""Process sets, the same tests against Horovod 0.28.1 and plait.torch: the
set known at init (conftest.py: every rank but rank 0) and what each
answers outside it. Dynamic sets (add_process_set) need
HOROVOD_DYNAMIC_PROCESS_SETS=1, which this session does not set: both
refuse them with ValueError here; tests/bindings/torch/psets runs plait's dynamic
sets."""

import pytest
import torch


def test_set_from_init(hvd, process_set):
    if process_set is None:
        pytest.skip("a job of one rank has no set but the global one")
    r, n = hvd.rank(), hvd.size()
    assert process_set.process_set_id == 1
    assert process_set.ranks == list(range(1, n))
    assert process_set.size() == n - 1
    assert process_set.included() == (r != 0)
    if r != 0:
        assert process_set.rank() == r - 1
    else:
        with pytest.raises(ValueError):
            process_set.rank()


def test_operations_on_the_set(hvd, process_set):
    if process_set is None:
        pytest.skip("a job of one rank has no set but the global one")
    r, n = hvd.rank(), hvd.size()
    if r == 0:
        with pytest.raises(ValueError):  # Horovod: "Rank 0 is not a member ..."
            hvd.allreduce(torch.ones(2), name="cps.outside", process_set=process_set)
        return
    members = list(range(1, n))
    x = torch.tensor([float(r), 1.0])
    assert hvd.allreduce(x, name="cps.avg", process_set=process_set).tolist() == \
        [sum(members) / len(members), 1.0]
    assert hvd.allreduce(x, op=hvd.Sum, name="cps.sum", process_set=process_set).tolist() == \
        [float(sum(members)), float(len(members))]
    g = hvd.allgather(torch.full((r, 1), float(r)), name="cps.ag", process_set=process_set)
    assert g[:, 0].tolist() == [float(q) for q in members for _ in range(q)]
    # root_rank is a rank of the job, not a position in the set (measured)
    b = hvd.broadcast(torch.tensor([float(r)]), n - 1, name="cps.bc", process_set=process_set)
    assert b.tolist() == [float(n - 1)]
    a = hvd.alltoall(torch.arange(float(len(members))) + 10 * r, name="cps.a2a",
                     process_set=process_set)
    assert a.tolist() == [10.0 * q + (r - 1) for q in members]
    hvd.barrier(process_set=process_set)


def test_dynamic_sets_need_the_flag(hvd, process_set):
    with pytest.raises(ValueError):
        hvd.add_process_set([0])
    assert hvd.remove_process_set(hvd.global_process_set) is False
