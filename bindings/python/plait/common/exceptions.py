"""The exception classes Horovod scripts catch, under plait's name
(horovod.common.exceptions -> plait.common.exceptions).

plait's own error classes (plait.PeerLostError, plait.MismatchError, ...:
one per result code of the C library, made in plait._core) derive from these
and from the builtin classes Horovod 0.28.1 raises in the same situations,
so `except HorovodInternalError` and `pytest.raises(ValueError)` written for
Horovod catch what plait raises (docs/horovod-comparison.md lists the map).

Framework-independent: plait.torch, and later plait.tensorflow and
plait.mxnet, import these classes from here. This module imports nothing
from plait, so plait._core can use it while it loads.
"""

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt", "HorovodVersionMismatchError",
           "get_version_mismatch_message"]


class HorovodInternalError(RuntimeError):
    """A collective failed while running: a lost or silent rank, operations
    that do not match across ranks, a stall, a transport failure, or an
    operation submitted before init or after shutdown.

    In elastic training (plait.common.elastic.run_fn, each framework's
    elastic.run) it is recoverable: the state goes back to its last commit
    and the job is re-formed by the driver. Without the driver (fixed
    ranks) elastic.run raises it to the caller."""


class HostsUpdatedInterrupt(RuntimeError):
    """Elastic training's interrupt: the host list changed. State.commit()
    (check_host_updates) raises it on every rank at the same commit when
    rank 0 learned of a change from the driver; elastic.run then re-forms
    the job without restoring the state. skip_sync: True when hosts were
    only removed (every remaining rank has the state already, so the sync
    after the reset is skipped)."""

    def __init__(self, skip_sync):
        super().__init__(skip_sync)
        self.skip_sync = skip_sync


def get_version_mismatch_message(name, version, installed_version):
    """The text of HorovodVersionMismatchError."""
    return ("framework %s is version %s here, but plait's bindings were checked against "
            "version %s; reinstall plait's Python package for this version"
            % (name, version, installed_version))


class HorovodVersionMismatchError(ImportError):
    """A framework's version differs from the one the bindings were built
    for. plait's bindings use ctypes and build nothing against a framework,
    so plait never raises it; it is here for scripts that import it."""

    def __init__(self, name, version, installed_version):
        super().__init__(get_version_mismatch_message(name, version, installed_version))
        self.name = name
        self.version = version
        self.installed_version = installed_version
