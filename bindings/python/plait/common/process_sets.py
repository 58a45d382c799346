"""Process sets with Horovod 0.28's Python interface
(horovod.common.process_sets -> plait.common.process_sets), on plait's
process sets (plait_process_set_add and the process_set field of every
operation; docs/process-sets.md).

Sets known at init: init(process_sets=[ProcessSet(...), ...]) hands them to
plait_init (PLAIT_PROCESS_SETS), which gives them ids 1, 2, ... in order, on
every rank. Dynamic sets: init(process_sets="dynamic") or
HOROVOD_DYNAMIC_PROCESS_SETS=1 (or PLAIT_DYNAMIC_PROCESS_SETS=1), then
add_process_set / remove_process_set, called by every rank in the same
order. Every operation takes process_set=; global_process_set is the
default.
"""

import os

from plait import _core
from plait.common.names import AUTO_NAMES

__all__ = ["ProcessSet", "global_process_set", "add_process_set", "remove_process_set"]

def _is_iterable(x):
    try:
        iter(x)
    except TypeError:
        return False
    return True


class ProcessSet:
    """A set of ranks that runs collectives together (Horovod's ProcessSet).
    Made from a list of global ranks; Horovod's other form, an mpi4py
    communicator, needs MPI, which plait does not use.

    process_set_id is 0 for global_process_set, the id plait gave it once
    registered (init(process_sets=...) or add_process_set), else None.
    ranks is the sorted list of ranks."""

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        if _is_iterable(ranks_or_comm):
            ranks = sorted(ranks_or_comm)
            if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
                raise ValueError("ProcessSet takes a list of integer ranks (or, in Horovod, an "
                                 "mpi4py communicator); got %r" % (ranks_or_comm,))
            self.ranks = ranks
        else:
            raise ValueError("ProcessSet(%r): a process set from an MPI communicator needs MPI, "
                             "and plait does not use MPI (mpi_built() is False); give a list "
                             "of ranks" % (ranks_or_comm,))

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set; None while it is not registered."""
        if self.process_set_id is None:
            return None
        return _core.process_set_size(self.process_set_id)

    def rank(self):
        """This process's rank within the set (its position among the set's
        ranks); None while it is not registered. A process outside the set
        gets ValueError, with Horovod 0.28.1's words."""
        if self.process_set_id is None:
            return None
        r = _core.process_set_rank(self.process_set_id)
        if r < 0:
            raise ValueError("Process is not part of provided process set.")
        return r

    def included(self):
        """Whether this process belongs to the set; None without ranks."""
        if self.ranks is None:
            return None
        return _core.rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)" % (
            self.process_set_id, self.ranks, self.mpi_comm)


# The set of all ranks. Its ranks are filled in by init (empty before, as in Horovod).
global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _is_global(process_set):
    return process_set is global_process_set or (
        isinstance(process_set, ProcessSet) and process_set.process_set_id == 0)


def _id(process_set, what="this operation"):
    """The id of process_set for an operation (None: the global set). Every
    operation takes its set through here; plait checks membership (a rank
    outside the set gets ValueError naming the set and its ranks)."""
    if process_set is None or process_set is global_process_set:
        return 0
    if isinstance(process_set, ProcessSet):
        if process_set.process_set_id is None:
            raise ValueError("%s: %s is not registered: pass it to init(process_sets=[...]) "
                             "or add_process_set() first" % (what, process_set))
        return process_set.process_set_id
    raise TypeError("%s: process_set must be a ProcessSet (e.g. hvd.global_process_set), "
                    "not %s" % (what, type(process_set).__name__))


def _check(process_set, what="this operation"):
    """For the bindings that do not pass process sets to plait yet
    (plait.tensorflow, plait.mxnet): raises unless process_set is the global
    set (or None, or an empty list); any other set is NotImplementedError
    naming what is missing, never a silent run on every rank."""
    if process_set is None or _is_global(process_set):
        return
    if isinstance(process_set, (list, tuple)) and not process_set:
        return
    if isinstance(process_set, (ProcessSet, list, tuple)):
        raise NotImplementedError(
            "%s: process_set=%s: this binding runs every operation on the global process set; "
            "other process sets are in plait's C ABI and plait.torch only so far "
            "(docs/process-sets.md)" % (what, process_set))
    raise TypeError("%s: process_set must be a ProcessSet (e.g. hvd.global_process_set), "
                    "not %s" % (what, type(process_set).__name__))


# --------------------------------------------------------------------------
# What init does with its process_sets argument
# --------------------------------------------------------------------------

_dynamic = False


def _parse_bool_env(name):
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ValueError("%s=%r: expected 1/0, true/false, yes/no or on/off"
                     % (name, os.environ[name]))


def _check_init_sets(process_sets):
    """Checks init's process_sets argument before plait starts; returns
    (whether it asks for dynamic process sets, the list of sets to add)."""
    if process_sets is None:
        return False, []
    if isinstance(process_sets, str):
        if process_sets.lower() == "dynamic":
            return True, []
        raise ValueError("init(process_sets=%r): expected a list of ProcessSet objects or "
                         "\"dynamic\"" % (process_sets,))
    sets = list(process_sets)
    for i, ps in enumerate(sets):
        if not isinstance(ps, ProcessSet):
            raise TypeError("init: process_sets entry number %d is %s, not a ProcessSet"
                            % (i, type(ps).__name__))
        if ps is global_process_set:
            raise ValueError("init: process_sets entry number %d is hvd.global_process_set, "
                             "which is always there; list only other sets" % i)
        if not ps.ranks:
            raise ValueError("init: process_sets entry number %d (%s) has no ranks" % (i, ps))
    return False, sets


class _InitEnvironment:
    """Around plait_init: the sets of init(process_sets=[...]) go in
    PLAIT_PROCESS_SETS (plait_init adds them, ids 1, 2, ... in order) and
    "dynamic" in PLAIT_DYNAMIC_PROCESS_SETS; the environment is restored
    after."""

    def __init__(self, dynamic, sets):
        self.values = {}
        if sets:
            self.values["PLAIT_PROCESS_SETS"] = ";".join(
                ",".join(str(r) for r in ps.ranks) for ps in sets)
        if dynamic:
            self.values["PLAIT_DYNAMIC_PROCESS_SETS"] = "1"
        self.saved = {}

    def __enter__(self):
        for k, v in self.values.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False


def _started(dynamic, fresh, sets=()):
    """Called by every init once plait runs: the global set gets its ranks,
    the sets given to the init that started plait their ids. Whether sets may
    be added is decided by that init too, as in Horovod (a later
    init(process_sets="dynamic") changes nothing)."""
    global _dynamic
    if fresh:
        _dynamic = (dynamic or _parse_bool_env("HOROVOD_DYNAMIC_PROCESS_SETS") or
                    _parse_bool_env("PLAIT_DYNAMIC_PROCESS_SETS"))
        for i, ps in enumerate(sets):
            ps.process_set_id = i + 1
    ranks = list(range(_core.size()))
    if global_process_set.ranks != ranks:
        global_process_set.ranks = ranks


_DYNAMIC_ONLY = ("Set HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow %s process sets after Horovod "
                 "initialization.")


def add_process_set(process_set):
    """Horovod's add_process_set (ranks or a ProcessSet): collective (every
    rank, in the same order); returns the ProcessSet, now registered.
    ValueError without dynamic process sets, for bad ranks, and for a set of
    the same ranks as one that exists (the global set too), as Horovod."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if not _core.is_initialized():
        _core.rank()  # raises NotInitializedError (a ValueError, as Horovod's)
    if not _dynamic:
        raise ValueError(_DYNAMIC_ONLY % "adding")
    size = _core.size()
    bad = [r for r in process_set.ranks if r < 0 or r >= size]
    if bad or len(set(process_set.ranks)) != len(process_set.ranks) or not process_set.ranks:
        raise ValueError("add_process_set: %s has %s; ranks are 0..%d, each at most once"
                         % (process_set, "rank %d" % bad[0] if bad else
                            "a rank twice" if process_set.ranks else "no rank", size - 1))
    process_set.process_set_id = _core.process_set_add(process_set.ranks)
    return process_set


def remove_process_set(process_set):
    """Horovod's remove_process_set: collective; False for a set that is not
    registered and for the global set (which is never removed), else True
    once removed. As in Horovod the object is unregistered first, even when
    the removal then fails (ValueError without dynamic process sets)."""
    process_set_id = process_set.process_set_id
    if process_set_id is None or process_set_id == 0:
        return False
    if not _core.is_initialized():
        _core.rank()  # raises NotInitializedError (a ValueError, as Horovod's)
    process_set._invalidate()
    if not _dynamic:
        raise ValueError(_DYNAMIC_ONLY % "removing")
    _core.process_set_remove(process_set_id)
    # ids are reused: a set added later under this id counts from 0
    AUTO_NAMES.forget(process_set_id)
    return True
