"""plait.torch basics: life cycle, queries, reduction ops and the global
process set, with horovod.torch's names."""

import atexit

from plait import _core
from plait._core import PlaitError
from plait.torch import _handles

# Reduction operations, with Horovod's names. Values are plait's op codes.
Sum = _core.op_code("sum")
Average = _core.op_code("average")
Min = _core.op_code("min")
Max = _core.op_code("max")
Product = _core.op_code("product")
# Horovod's Adasum has no plait equivalent: refused with a clear error.
Adasum = -1

_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max",
             Product: "Product", Adasum: "Adasum"}

# Horovod's error for a failed collective (e.g. a lost peer).
HorovodInternalError = PlaitError

# --------------------------------------------------------------------------
# Life cycle and queries (Horovod's names)
# --------------------------------------------------------------------------

def init(comm=None, process_sets=None):
    """Joins the job (plait_init). comm and process_sets are Horovod's MPI
    and process-set arguments, which plait does not have."""
    if comm is not None:
        raise NotImplementedError("plait.torch.init: plait does not use MPI "
                                  "communicators (comm=%r); launch with plaitrun, "
                                  "mpirun, srun or torchrun instead" % (comm,))
    _check_process_set(process_sets)
    _core.init()
    global _atexit_registered
    if not _atexit_registered:
        # As Horovod: leave the job cleanly when the script ends without
        # shutdown(), so the other ranks are not told this one was lost.
        atexit.register(_shutdown_at_exit)
        _atexit_registered = True


_atexit_registered = False


def _shutdown_at_exit():
    try:
        if _core.is_initialized():
            shutdown()
    except PlaitError:
        pass


def shutdown():
    _handles.clear()
    _core.shutdown()


is_initialized = _core.is_initialized
rank = _core.rank
size = _core.size
local_rank = _core.local_rank
local_size = _core.local_size
cross_rank = _core.cross_rank
cross_size = _core.cross_size


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


def start_timeline(file_path, mark_cycles=False):
    _core.timeline_start(file_path)


def stop_timeline():
    _core.timeline_stop()


def mpi_threads_supported():
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return is_initialized() and _core.transport_name() == "gloo"


def gloo_built():
    return True


def nccl_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


class _GlobalProcessSet:
    """Horovod's global process set: plait has only this one."""
    process_set_id = 0

    def size(self):
        return size()

    def rank(self):
        return rank()

    def included(self):
        return True

    def __repr__(self):
        return "ProcessSet(process_set_id=0, ranks=all)"


global_process_set = _GlobalProcessSet()


def _check_process_set(process_set):
    if process_set is None or process_set is global_process_set:
        return
    if isinstance(process_set, (list, tuple)) and not process_set:
        return
    raise NotImplementedError("plait has no process sets other than the global "
                              "one (got %r)" % (process_set,))

