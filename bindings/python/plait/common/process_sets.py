"""Process sets with Horovod 0.28's Python interface
(horovod.common.process_sets -> plait.common.process_sets).

plait's engine runs every collective on all ranks of the job: it has the
global process set only. Sets of other ranks are refused with
NotImplementedError naming what is missing (the engine's support, which a
later change adds), at the first place Horovod would use them: init(
process_sets=[...]), add_process_set() and the process_set= argument of every
operation. Everything else (constructing ProcessSet objects, their queries,
remove_process_set, init(process_sets="dynamic")) behaves as in Horovod, and
global_process_set works everywhere.
"""

import os

from plait import _core

__all__ = ["ProcessSet", "global_process_set", "add_process_set", "remove_process_set"]

_MISSING = ("plait runs every collective on all ranks of the job: its engine has no process "
            "sets other than the global one yet (hvd.global_process_set)")


def _is_iterable(x):
    try:
        iter(x)
    except TypeError:
        return False
    return True


class ProcessSet:
    """A set of ranks that would run collectives together (Horovod's
    ProcessSet). Made from a list of global ranks; Horovod's other form, an
    mpi4py communicator, needs MPI, which plait does not use.

    process_set_id is 0 for global_process_set and None for any other set
    (plait registers none). ranks is the sorted list of ranks."""

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
        _check(self, "ProcessSet.size")
        return _core.size()

    def rank(self):
        """This process's rank within the set; None while it is not registered."""
        if self.process_set_id is None:
            return None
        _check(self, "ProcessSet.rank")
        return _core.rank()

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


def _check(process_set, what="this operation"):
    """Raises unless process_set is the global set (or None, plait's
    default meaning the global set). The check every operation makes."""
    if process_set is None or _is_global(process_set):
        return
    if isinstance(process_set, (list, tuple)) and not process_set:
        return
    if isinstance(process_set, ProcessSet):
        raise NotImplementedError("%s: process_set=%s: %s" % (what, process_set, _MISSING))
    if isinstance(process_set, (list, tuple)):  # ranks where a ProcessSet belongs
        raise NotImplementedError("%s: process_set=%r: %s" % (what, process_set, _MISSING))
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
    whether it asks for dynamic process sets."""
    if process_sets is None:
        return False
    if isinstance(process_sets, str):
        if process_sets.lower() == "dynamic":
            return True
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
    if sets:
        raise NotImplementedError("init(process_sets=[%s]): %s"
                                  % (", ".join(str(ps) for ps in sets), _MISSING))
    return False


def _started(dynamic, fresh):
    """Called by every init once plait runs: the global set gets its ranks.
    Whether sets may be added is decided by the init that started plait, as
    in Horovod (a later init(process_sets="dynamic") changes nothing)."""
    global _dynamic
    if fresh:
        _dynamic = dynamic or _parse_bool_env("HOROVOD_DYNAMIC_PROCESS_SETS")
    ranks = list(range(_core.size()))
    if global_process_set.ranks != ranks:
        global_process_set.ranks = ranks


def add_process_set(process_set):
    """Horovod's add_process_set (ranks or a ProcessSet). Checked as Horovod
    checks it (a bad list of ranks, before init, without dynamic process
    sets: ValueError), then refused: plait has only the global set."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if not _core.is_initialized():
        _core.rank()  # raises NotInitializedError (a ValueError, as Horovod's)
    if not _dynamic:
        raise ValueError("add_process_set: process sets can only be added after init when "
                         "init(process_sets=\"dynamic\") or HOROVOD_DYNAMIC_PROCESS_SETS=1 "
                         "asked for it")
    size = _core.size()
    bad = [r for r in process_set.ranks if r < 0 or r >= size]
    if bad or len(set(process_set.ranks)) != len(process_set.ranks):
        raise ValueError("add_process_set: %s has %s; ranks are 0..%d, each at most once"
                         % (process_set, "rank %d" % bad[0] if bad else "a rank twice",
                            size - 1))
    raise NotImplementedError("add_process_set(%s): %s" % (process_set, _MISSING))


def remove_process_set(process_set):
    """Horovod's remove_process_set: False for a set that is not registered
    and for the global set (which is never removed); plait registers no
    other set, so it is always False."""
    process_set_id = process_set.process_set_id
    if process_set_id is None or process_set_id == 0:
        return False
    if not _core.is_initialized():
        _core.rank()  # raises NotInitializedError (a ValueError, as Horovod's)
    process_set._invalidate()
    return False
