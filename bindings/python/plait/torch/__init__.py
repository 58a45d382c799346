"""plait.torch: a drop-in replacement for horovod.torch.

    import plait.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

See docs/python.md for what differs from Horovod.
"""

from plait._core import PlaitError  # noqa: F401
from plait import stats, stats_reset, transport_name, config_dump  # noqa: F401
from plait import ERRORS as _ERRORS
from plait.torch.compression import Compression  # noqa: F401
from plait.torch._handles import poll, synchronize  # noqa: F401
from plait.torch.basics import (  # noqa: F401
    init, shutdown, is_initialized, rank, size, local_rank, local_size, cross_rank,
    cross_size, is_homogeneous, start_timeline, stop_timeline, mpi_threads_supported,
    mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built,
    cuda_built, rocm_built, global_process_set, HorovodInternalError,
    Sum, Average, Min, Max, Product, Adasum,
)
from plait.torch.mpi_ops import (  # noqa: F401
    allreduce, allreduce_, allreduce_async, allreduce_async_,
    grouped_allreduce, grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    allgather, allgather_async, broadcast, broadcast_, broadcast_async, broadcast_async_,
    alltoall, alltoall_async, reducescatter, reducescatter_async,
    join, barrier,
    grouped_allgather, grouped_allgather_async, grouped_reducescatter,
    grouped_reducescatter_async, sparse_allreduce_async,
)

from plait.torch.optimizer import DistributedOptimizer  # noqa: F401
from plait.torch.functions import (  # noqa: F401
    broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object,
)
from plait.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401

for _cls in _ERRORS.values():
    globals()[_cls.__name__] = _cls
del _cls
