"""plait.torch: a drop-in replacement for horovod.torch (0.28).

    import plait.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Every public name of horovod.torch 0.28.1 is here with the same signature
(tests/bindings/torch/test_fidelity_api.py checks it against a list taken from
Horovod); docs/horovod-comparison.md lists what differs and why.
"""

from plait._core import PlaitError  # noqa: F401
from plait import stats, stats_reset, transport_name, config_dump  # noqa: F401
from plait import ERRORS as _ERRORS
from plait.torch import elastic  # noqa: F401
from plait.torch.compression import Compression  # noqa: F401
from plait.torch._handles import poll, synchronize  # noqa: F401
from plait.torch.basics import (  # noqa: F401
    init, shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, is_homogeneous, mpi_threads_supported,
    mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built,
    cuda_built, rocm_built, ProcessSet, global_process_set, add_process_set,
    remove_process_set, Average, Sum, Adasum, Min, Max, Product, HorovodInternalError,
)
from plait.torch import mpi_ops as _mpi_ops
from plait.torch.mpi_ops import (  # noqa: F401
    allreduce, allreduce_, allreduce_async, allreduce_async_,
    grouped_allreduce, grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    allgather, allgather_async, broadcast, broadcast_, broadcast_async, broadcast_async_,
    alltoall, alltoall_async, reducescatter, reducescatter_async,
    join, barrier,
    grouped_allgather, grouped_allgather_async, grouped_reducescatter,
    grouped_reducescatter_async, sparse_allreduce_async,
)

# horovod.torch operations that plait.torch.mpi_ops gains in another change
# of issue 10; exported here as soon as mpi_ops has them.
for _name in ("sparse_allreduce_async", "grouped_allgather", "grouped_allgather_async",
              "grouped_reducescatter", "grouped_reducescatter_async"):
    if hasattr(_mpi_ops, _name):
        globals()[_name] = getattr(_mpi_ops, _name)
del _name

from plait.torch.optimizer import DistributedOptimizer  # noqa: F401,E402
from plait.torch.functions import (  # noqa: F401,E402
    broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object,
)
from plait.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401,E402

# PeerLostError, MismatchError, ...: plait's class for each result code.
for _cls in _ERRORS.values():
    globals()[_cls.__name__] = _cls
del _cls
