"""Elastic training's worker side, framework-independent, with Horovod
0.28.1's semantics (horovod.common.elastic -> plait.common.elastic).

A worker started by plaitrun's elastic driver (plaitrun --min-np/--max-np/
--host-discovery-script; docs/elastic.md) is told its rank by the driver at
every plait_init. The training function, wrapped by run_fn (each framework's
elastic.run), goes round this loop:

    state.sync()                     rank 0's state to every rank (skipped
                                     after a removal: everyone has it)
    func(state, ...)                 training; state.commit() now and then
      HorovodInternalError  ->       state.restore() (the last commit), then reset
      HostsUpdatedInterrupt ->       keep the state as it is, then reset
    reset: shutdown() and init()     the driver forms the next job (new ranks)
    state.on_reset()                 state.reset() and the reset callbacks

commit() = save() + check_host_updates(): rank 0 asks the driver whether the
host list changed (plait_elastic_host_updates: a poll at commit where Horovod
has a notification service pushing to every worker) and broadcasts the
answer, so every rank raises HostsUpdatedInterrupt at the same commit.

A worker the driver leaves out of the next job (its host removed, the job
above --max-np, the reset limit reached, training over) sees init fail;
plait then prints the driver's reason and exits with status 0 (leave_if_removed).

Not elastic (no driver: plaitrun -np N, mpirun, ...): run_fn runs the
function on the fixed ranks; a HorovodInternalError is raised to the caller
(no rank can come back), a HostsUpdatedInterrupt the script raises itself
resets on the same ranks. Nothing here runs a collective before the wrapped
function starts (making a state does not either).

The states of the frameworks build on State: plait.torch.elastic.TorchState,
plait.tensorflow.elastic's and the Keras states.
"""

import enum
import functools
import queue
import sys

from plait import _core
from plait.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["State", "ObjectState", "run_fn", "HostUpdateResult", "HorovodInternalError",
           "HostsUpdatedInterrupt", "enabled", "epoch", "removed", "leave_if_removed"]


class HostUpdateResult(enum.IntFlag):
    """What changed in the host list, with Horovod's values (its
    horovod.runner.elastic.worker.HostUpdateResult): State.on_hosts_updated
    takes these."""
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


def host_update_result(bits):
    """The HostUpdateResult for plait_elastic_host_updates' PLAIT_HOSTS_*
    bits (plait numbers them the other way round)."""
    res = HostUpdateResult.no_update
    if bits & _core.HOSTS_ADDED:
        res |= HostUpdateResult.added
    if bits & _core.HOSTS_REMOVED:
        res |= HostUpdateResult.removed
    return res


def enabled():
    """True when this process was started by plaitrun's elastic driver
    (PLAIT_ELASTIC_DRIVER set); needs no init."""
    return _core.elastic_enabled()


def epoch():
    """The number of the job this worker is in: 1 for the driver's first, one
    more for each job it re-formed; 0 when not elastic. Needs init."""
    return _core.elastic_epoch()


def removed():
    """True when the last init failed because the driver has no place for
    this worker in the next job (the reason is the init error's text)."""
    return _core.elastic_removed()


def leave_if_removed(error):
    """Called with the exception of a failed init: when the driver removed
    this worker, prints the driver's reason (error's text) and exits the
    process with status 0 (the driver ignores a removed worker's status).
    Otherwise returns, and the caller raises error."""
    if not removed():
        return
    print("plait elastic: %s; this worker exits (status 0)" % error, file=sys.stderr, flush=True)
    sys.exit(0)


class State:
    """State kept in memory across resets of an elastic job.

    bcast_object(obj): returns rank 0's obj on every rank (a collective);
    get_rank(): this worker's current rank. Subclasses define save, restore
    and sync; reset is optional."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = 0
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """callbacks: functions (no arguments) called after every reset, in
        order, once the new job runs (e.g. to scale the learning rate by the
        new size)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """After a reset: forgets host messages, calls reset(), then the
        reset callbacks."""
        self._host_messages = queue.Queue()
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Notes a host-list change (timestamp: the driver's count of changes;
        update_res: a HostUpdateResult); the next check_host_updates acts on
        rank 0's notes."""
        self._host_messages.put((timestamp, update_res))

    def commit(self):
        """save(), then check_host_updates(): may raise HostsUpdatedInterrupt
        (on every rank together). A commit copies the state (maybe from a
        device to host memory) and runs a collective: commit every few
        batches, trading the work lost at a failure against its cost."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when rank 0 learned of a
        host-list change newer than the last one acted on. Rank 0 asks the
        driver (when elastic) and broadcasts what it knows: a collective,
        every rank calls it."""
        if self._rank() == 0 and enabled():
            timestamp, bits = _core.elastic_host_updates()
            if bits:
                self.on_hosts_updated(timestamp, host_update_result(bits))
        last = prev = self._last_updated_timestamp
        update = HostUpdateResult.no_update
        while not self._host_messages.empty():
            timestamp, res = self._host_messages.get()
            if timestamp > last:
                last = timestamp
                update |= res
        # Rank 0's view decides, so every rank raises at the same commit.
        prev, last, update = self._bcast_object((prev, last, int(update)))
        self._last_updated_timestamp = last
        if last > prev:
            raise HostsUpdatedInterrupt(update == HostUpdateResult.removed)

    def save(self):
        """Copies the state to host memory (the commit restore goes back to)."""
        raise NotImplementedError("%s.save" % type(self).__name__)

    def restore(self):
        """Goes back to the last commit, undoing what changed since."""
        raise NotImplementedError("%s.restore" % type(self).__name__)

    def sync(self):
        """Makes every rank's state rank 0's (a collective)."""
        raise NotImplementedError("%s.sync" % type(self).__name__)

    def reset(self):
        """Called after a reset, before the callbacks and the next sync (e.g.
        a sampler re-partitions its data over the new ranks). Default: nothing."""


class ObjectState(State):
    """State of plain Python objects: each keyword argument becomes an
    attribute, saved by commit (by reference, as Horovod: an object changed
    in place after a commit stays changed), restored, and synced with
    bcast_object (so each must be picklable)."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def _reset_or_leave(reset):
    """reset(); a worker the driver removed exits there (leave_if_removed)."""
    try:
        reset()
    except Exception as e:  # noqa: BLE001 - re-raised unless the driver removed us
        if enabled():
            leave_if_removed(e)
        raise


def run_fn(func, reset):
    """Wraps func(state, *args, **kwargs) in elastic training's loop (the
    module's docstring); reset() leaves the job and joins the next (each
    framework's: shutdown() then init()). The wrapper returns func's result."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                if not enabled():
                    raise  # fixed ranks: a lost rank does not come back
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            _reset_or_leave(reset)
            state.on_reset()
    return wrapper


# plait.tensorflow and plait._keras refuse elastic training until they have
# theirs (issue 33); plait.torch.elastic has it.
MISSING = ("elastic training is not implemented in plait for this framework yet "
           "(plait.torch.elastic has it); train with fixed ranks, saving checkpoints to "
           "restart from")


def refuse(what):
    """The NotImplementedError for using what of an elastic module that
    plait does not have yet."""
    return NotImplementedError("%s: %s" % (what, MISSING))
