"""Life cycle, queries, timeline and build queries with Horovod 0.28's
semantics (horovod.common.basics -> plait.common.basics), for every framework
binding (plait.torch; later plait.tensorflow and plait.mxnet).

As in Horovod 0.28.1 (horovod/common/basics.py, operations.cc):
- init() is idempotent: a second call while plait runs does nothing (its
  arguments are still checked the same way); init() after shutdown() starts a
  new session. An init that fails raises ValueError (plait's class for the
  failure, e.g. PlaitTimeoutError, made a ValueError too).
- shutdown() before init, or twice, does nothing, and it never raises: a
  failure found while leaving (e.g. a peer already lost) is a RuntimeWarning.
- rank(), size(), ... before init raise ValueError (plait.NotInitializedError).
- The build queries say what this installation of plait has: gloo_built() is
  True only when the Gloo transport plugin is found and loads, as plait_init
  would find it.

In a worker of plaitrun's elastic driver, init() asks the driver for this
worker's place in the next job; when the driver has none for it (its host
removed, the job full, training over: plait.common.elastic), init prints the
driver's reason and exits the process with status 0.
"""

import atexit
import os
import threading
import warnings

from plait import _core
from plait._core import PlaitError
from plait.common import elastic as _elastic
from plait.common import process_sets as _ps
from plait.common.names import AUTO_NAMES

__all__ = [
    "init", "shutdown", "is_initialized", "start_timeline", "stop_timeline", "size",
    "local_size", "cross_size", "rank", "local_rank", "cross_rank", "is_homogeneous",
    "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built", "transport_built",
    "Average", "Sum", "Adasum", "Min", "Max", "Product",
]

# Reduction operations, with Horovod's names and Horovod 0.28's values (a script
# may store or compare them as integers); c_op() gives plait's C op code.
Average = 0
Sum = 1
Adasum = 2  # no plait equivalent: operations refuse it clearly
Min = 3
Max = 4
Product = 5

_C_OPS = {Average: _core.op_code("average"), Sum: _core.op_code("sum"),
          Min: _core.op_code("min"), Max: _core.op_code("max"),
          Product: _core.op_code("product")}


def c_op(op):
    """plait's C op code (plait_op_t) for one of the constants above."""
    return _C_OPS[op]

# --------------------------------------------------------------------------
# Life cycle
# --------------------------------------------------------------------------

_lock = threading.RLock()
_atexit_registered = False
_shutdown_hooks = []


def add_shutdown_hook(fn):
    """fn() runs in shutdown() before plait stops (e.g. plait.torch forgets
    its handles). Framework bindings register here once, at import."""
    if fn not in _shutdown_hooks:
        _shutdown_hooks.append(fn)


def _check_comm(comm):
    """comm as Horovod takes it: None, a list of ranks, or an mpi4py
    communicator. Returns the list of ranks (empty: all)."""
    if comm is None:
        return []
    if isinstance(comm, (str, bytes)) or not _ps._is_iterable(comm):
        raise ValueError("init(comm=%r): a communicator needs MPI, and plait does not use MPI "
                         "(mpi_built() is False); start the ranks with plaitrun, mpirun, srun "
                         "or torchrun and call init() without comm" % (comm,))
    ranks = list(comm)
    if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
        raise ValueError("init(comm=%r): expected a list of integer ranks" % (comm,))
    return ranks


_init_failure_classes = {}


def _as_init_failure(e):
    """Horovod raises ValueError when init fails: plait's class for the
    failure, made a ValueError as well (same name, code and message)."""
    if isinstance(e, ValueError):
        return e
    cls = type(e)
    mixed = _init_failure_classes.get(cls)
    if mixed is None:
        mixed = type(cls.__name__, (cls, ValueError), {"__module__": cls.__module__})
        _init_failure_classes[cls] = mixed
    return mixed(e.code, str(e))


def init(comm=None, process_sets=None):
    """Joins the job (idempotent, as Horovod's).

    comm: None, or a list of ranks: plait runs on every rank of the launch,
    so the list must name them all (a subset is refused with
    NotImplementedError). An MPI communicator is refused with ValueError (as
    Horovod built without MPI does).
    process_sets: None, "dynamic" (add_process_set/remove_process_set
    allowed), or a list of ProcessSet objects that plait_init registers, ids
    1, 2, ... in order (plait.common.process_sets).
    """
    global _atexit_registered
    ranks = _check_comm(comm)
    dynamic, sets = _ps._check_init_sets(process_sets)
    with _lock:
        fresh = not _core.is_initialized()
        if fresh:
            try:
                with _ps._InitEnvironment(dynamic, sets):
                    _core.init()
            except PlaitError as e:
                if _elastic.enabled():
                    _elastic.leave_if_removed(e)  # the driver has no place for us: exit 0
                raise _as_init_failure(e) from None
            # A new job counts its unnamed operations from 0 on every rank,
            # including ranks that join it fresh (elastic): docs/python.md.
            AUTO_NAMES.reset()
        if not _atexit_registered:
            # As Horovod: leave the job cleanly when the script ends without
            # shutdown(), so the other ranks are not told this one was lost.
            atexit.register(_shutdown_at_exit)
            _atexit_registered = True
        _ps._started(dynamic, fresh, sets)
    # A second init ignores comm, as Horovod's does.
    if fresh and ranks and sorted(ranks) != list(range(_core.size())):
        raise NotImplementedError(
            "init(comm=%r): plait runs every collective on all %d ranks of the launch and "
            "cannot restrict the job to some of them; start only the ranks you need"
            % (comm, _core.size()))


def _shutdown_at_exit():
    try:
        shutdown()
    except Exception:  # the interpreter is going away: nothing left to tell
        pass


def shutdown():
    """Leaves the job. Does nothing before init or after shutdown; never
    raises (a failure found on the way out is a RuntimeWarning)."""
    with _lock:
        if not _core.is_initialized():
            return
        for hook in _shutdown_hooks:
            hook()
        try:
            _core.shutdown()
        except PlaitError as e:
            warnings.warn("plait: shutdown: %s: %s" % (type(e).__name__, e), RuntimeWarning,
                          stacklevel=2)


def is_initialized():
    """True between init() and shutdown()."""
    return _core.is_initialized()


# --------------------------------------------------------------------------
# Queries (ValueError before init, as Horovod: plait.NotInitializedError)
# --------------------------------------------------------------------------

size = _core.size
local_size = _core.local_size
cross_size = _core.cross_size
rank = _core.rank
local_rank = _core.local_rank
cross_rank = _core.cross_rank


def is_homogeneous():
    """True when every host runs the same number of ranks (this rank's view:
    size == local_size * cross_size)."""
    return _core.size() == _core.local_size() * _core.cross_size()


# --------------------------------------------------------------------------
# Timeline
# --------------------------------------------------------------------------

def start_timeline(file_path, mark_cycles=False):
    """Starts writing the timeline (Chrome trace JSON) to file_path; a
    timeline already running is closed and replaced, as in Horovod.

    As in Horovod, rank 0 writes the file and the other ranks write nothing
    (every rank may pass the same path). plait's timeline shows the events of
    the rank that writes it; put "%r" in the path to have every rank write
    its own file ("%r" becomes the rank), as PLAIT_TIMELINE does.
    mark_cycles: mark the coordinator cycles that did work (CYCLE instants).
    Unlike Horovod, no HOROVOD_TIMELINE=DYNAMIC is needed beforehand.
    Raises ValueError (plait.NotInitializedError) before init."""
    if not isinstance(file_path, (str, bytes, os.PathLike)):
        raise TypeError("start_timeline: file_path must be a path (str), not %s"
                        % type(file_path).__name__)
    path = os.fsdecode(file_path)
    r = _core.rank()  # ValueError before init, as Horovod's
    if not path:
        raise ValueError("start_timeline: file_path is empty")
    _set_mark_cycles(bool(mark_cycles))
    if "%r" in path:
        _core.timeline_start(path.replace("%r", str(r)))
    elif r == 0:
        _core.timeline_start(path)
    else:
        _core.timeline_stop()  # the new timeline replaces this rank's own, if any


def _set_mark_cycles(on):
    _core.config_set("PLAIT_TIMELINE_MARK_CYCLES", "1" if on else "0")


def stop_timeline():
    """Stops the timeline and closes its file (valid JSON). Does nothing when
    no timeline runs; ValueError (plait.NotInitializedError) before init."""
    _core.timeline_stop()


# --------------------------------------------------------------------------
# Build queries: what this installation of plait has
# --------------------------------------------------------------------------

def transport_built(name):
    """True when the transport plugin name (gloo, ofi, nccl) is found and
    loads as plait_init would load it (plait's own query; Horovod has one
    per library). The library answers (plait_transport_query)."""
    return bool(_core.transport_query(name).found)


def mpi_threads_supported():
    """As Horovod without MPI: ValueError (plait does not use MPI)."""
    raise ValueError("mpi_threads_supported: plait does not use MPI (mpi_enabled() is False)")


def mpi_enabled():
    """False: plait does not use MPI (ranks may still be started by mpirun)."""
    return False


def mpi_built():
    """False: plait is not built on MPI."""
    return False


def gloo_enabled():
    """True while plait runs on the Gloo transport."""
    return _core.is_initialized() and _core.transport_name() == "gloo"


def gloo_built():
    """True when the Gloo transport plugin is installed and loads."""
    return transport_built("gloo")


def nccl_built():
    """As Horovod: the NCCL version code (e.g. 21803) when plait has its NCCL
    transport (the plugin is found and loads), else 0."""
    info = _core.transport_query("nccl", "ncclGetVersion")
    if not info.found:
        return 0
    return info.library_version or 1


def ddl_built():
    """False: plait has no IBM DDL support."""
    return False


def ccl_built():
    """False: plait has no oneCCL support."""
    return False


def cuda_built():
    """True when an installed transport plugin handles CUDA device memory."""
    return any(_core.transport_query(name).device_memory for name in _core.transport_list())


def rocm_built():
    """False: plait has no ROCm support."""
    return False
