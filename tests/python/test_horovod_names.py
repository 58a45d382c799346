"""What docs/python.md says plait.torch lacks of horovod.torch 0.28 is true:
every name Horovod 0.28 exports is either in plait.torch or in the list
between the not-yet markers of docs/python.md, and no name in that list is
in plait.torch (when one is added, the list must lose it)."""

import os
import re

import plait.torch as hvd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# horovod/torch/__init__.py of Horovod 0.28.1: every name it imports into
# horovod.torch (what `import horovod.torch as hvd` gives a script).
HOROVOD_028 = """
elastic Compression allgather_object broadcast_object broadcast_optimizer_state
broadcast_parameters allreduce allreduce_async allreduce_ allreduce_async_
grouped_allreduce grouped_allreduce_async grouped_allreduce_ grouped_allreduce_async_
sparse_allreduce_async allgather allgather_async grouped_allgather grouped_allgather_async
broadcast broadcast_async broadcast_ broadcast_async_ alltoall alltoall_async
reducescatter reducescatter_async grouped_reducescatter grouped_reducescatter_async
join barrier poll synchronize init shutdown is_initialized start_timeline stop_timeline
size local_size cross_size rank local_rank cross_rank mpi_threads_supported mpi_enabled
mpi_built gloo_enabled gloo_built nccl_built ddl_built ccl_built cuda_built rocm_built
ProcessSet global_process_set add_process_set remove_process_set
Average Sum Adasum Min Max Product HorovodInternalError DistributedOptimizer SyncBatchNorm
""".split()


def documented_missing():
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        text = f.read()
    m = re.search(r"<!-- not-yet-begin -->(.*?)<!-- not-yet-end -->", text, re.S)
    assert m, "docs/python.md has no not-yet-begin/not-yet-end markers"
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", m.group(1)))


def test_every_horovod_name_is_in_plait_torch_or_listed_as_missing():
    listed = documented_missing()
    absent = [n for n in HOROVOD_028 if not hasattr(hvd, n) and n not in listed]
    assert not absent, "in horovod.torch 0.28, not in plait.torch, not listed in docs/python.md: %s" % absent


def test_no_listed_name_is_in_plait_torch():
    present = sorted(n for n in documented_missing() if hasattr(hvd, n))
    assert not present, "docs/python.md lists as missing what plait.torch has: %s" % present


def test_the_list_names_only_horovod_names():
    extra = sorted(documented_missing() - set(HOROVOD_028))
    assert not extra, "docs/python.md lists names horovod.torch 0.28 does not have: %s" % extra
