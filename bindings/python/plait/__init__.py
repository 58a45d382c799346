"""plait: collective communication for data-parallel training.

The framework-neutral layer: life cycle, queries, configuration, statistics
and the timeline, as the C library has them. plait.common is Horovod's
framework-independent layer (horovod.common: exceptions, life cycle and
queries with Horovod's semantics, process sets), shared by the frameworks:
plait.torch (Horovod's horovod.torch API).
The C library is found through PLAIT_LIBRARY, beside this package, or on the
system's library path (docs/python.md).
"""

from plait._core import (  # noqa: F401
    PlaitError, ERRORS, init, shutdown, is_initialized, rank, size, local_rank,
    local_size, cross_rank, cross_size, transport_name, transport_algorithm, config_dump,
    config_help, config_set,
    stats, stats_reset, timeline_start, timeline_stop, version, library_path,
)
from plait import _core

# PeerLostError, MismatchError, StalledError, ...: one class per result code.
for _cls in ERRORS.values():
    globals()[_cls.__name__] = _cls
del _cls

__version__ = _core.version()
