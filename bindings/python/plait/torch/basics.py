"""plait.torch basics: life cycle, queries, reduction ops, timeline, build
queries and process sets with horovod.torch's names and semantics.

The framework-independent part is plait.common (basics, process_sets,
exceptions); this module adds what is torch's: the integer handles of
operations in flight are forgotten at shutdown.
"""

from plait.common import basics as _basics
from plait.common import ops as _ops
from plait.common.basics import (  # noqa: F401
    init, shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, is_homogeneous, mpi_threads_supported,
    mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built,
    cuda_built, rocm_built, Average, Sum, Adasum, Min, Max, Product,
)
from plait.common.exceptions import HorovodInternalError  # noqa: F401
from plait.common.process_sets import (  # noqa: F401
    ProcessSet, global_process_set, add_process_set, remove_process_set,
)
from plait.common.process_sets import _id as _process_set_id
from plait.torch import _handles

_OP_NAMES = _ops.OP_NAMES

# Operations in flight are finished by plait's shutdown; their handles go.
_basics.add_shutdown_hook(_handles.clear)


def _check_process_set(process_set, what="this operation"):
    """The id of process_set for plait (0: the global set); TypeError or
    ValueError for something no operation can run on."""
    return _process_set_id(process_set, what)
