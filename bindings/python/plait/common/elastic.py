"""Elastic training's names (horovod.common.elastic -> plait.common.elastic),
refused when used: plait has no elastic mode yet.

Horovod's elastic mode needs a driver that discovers hosts and restarts
workers (horovodrun --host-discovery-script), notifications to the workers
when hosts change (HostsUpdatedInterrupt), and a job that can shrink and grow
(shutdown() and init() with a new set of ranks). plaitrun starts a fixed set
of ranks and plait's engine keeps it for the life of the job, so none of
that exists. The names import, so a script that only mentions them loads;
constructing a state or calling a function wrapped by run raises
NotImplementedError naming this.
"""

import functools

from plait.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401

__all__ = ["State", "ObjectState", "run_fn"]

MISSING = ("elastic training is not implemented in plait: it needs an elastic driver (host "
           "discovery and worker restarts, horovodrun --host-discovery-script), host-change "
           "notifications, and a job that can change its ranks; plaitrun and plait's engine "
           "run a fixed set of ranks. Train without elastic (fixed ranks), saving "
           "checkpoints to restart from")


def refuse(what):
    """The NotImplementedError for using elastic's what."""
    return NotImplementedError("%s: %s" % (what, MISSING))


class State:
    """Horovod's elastic State (commit/restore/sync); refused when made. Its
    methods are here with Horovod's signatures, and refuse too."""

    def __init__(self, bcast_object, get_rank):
        raise refuse(type(self).__module__ + "." + type(self).__qualname__)

    def register_reset_callbacks(self, callbacks):
        raise refuse("State.register_reset_callbacks")

    def on_reset(self):
        raise refuse("State.on_reset")

    def on_hosts_updated(self, timestamp, update_res):
        raise refuse("State.on_hosts_updated")

    def commit(self):
        raise refuse("State.commit")

    def check_host_updates(self):
        raise refuse("State.check_host_updates")

    def save(self):
        raise refuse("State.save")

    def restore(self):
        raise refuse("State.restore")

    def sync(self):
        raise refuse("State.sync")

    def reset(self):
        raise refuse("State.reset")


class ObjectState(State):
    """Horovod's elastic ObjectState; refused when made."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        raise refuse(type(self).__module__ + "." + type(self).__qualname__)

    def save(self):
        raise refuse("ObjectState.save")

    def restore(self):
        raise refuse("ObjectState.restore")

    def sync(self):
        raise refuse("ObjectState.sync")


def run_fn(func, reset):
    """Horovod's elastic wrapper: here a wrapper that refuses to run."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        raise refuse("elastic.run(%s)" % getattr(func, "__name__", func))
    return wrapper
