"""plait.common.elastic's State and ObjectState, and plait.torch.elastic.run's
loop, on 2 ranks started by plaitrun without the elastic driver: commit,
restore and sync; host updates decided by rank 0 and raised on every rank
at the same commit; a HostsUpdatedInterrupt resets (a real shutdown and
init on the same ranks) without restoring; a HorovodInternalError is raised
to the caller (fixed ranks cannot re-form); no collective runs before the
wrapped function."""

import pytest

import plait.common.elastic as elastic
from plait.common.elastic import HostUpdateResult, ObjectState, State
from plait.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


def object_state(hvd, **kwargs):
    return ObjectState(bcast_object=hvd.broadcast_object, get_rank=hvd.rank, **kwargs)


def test_not_elastic_without_driver(hvd):
    assert elastic.enabled() is False
    assert elastic.epoch() == 0
    assert elastic.removed() is False


def test_object_state_commit_restore_sync(hvd):
    r = hvd.rank()
    state = object_state(hvd, epoch=0, batch=10 * r, seen=[r])
    assert (state.epoch, state.batch, state.seen) == (0, 10 * r, [r])
    state.sync()
    assert (state.batch, state.seen) == (0, [0])  # rank 0's, on every rank
    state.batch = 5
    state.commit()
    state.batch = 7 + r
    state.epoch = 3
    state.restore()
    assert (state.epoch, state.batch) == (0, 5)
    state.batch = 100 + r
    state.sync()  # sync broadcasts the last commit, as Horovod's
    assert state.batch == 5


def test_state_needs_save_restore_sync(hvd):
    state = State(bcast_object=hvd.broadcast_object, get_rank=hvd.rank)
    for method in (state.save, state.restore, state.sync):
        with pytest.raises(NotImplementedError, match="State"):
            method()
    state.reset()  # optional: does nothing


def test_on_reset_calls_reset_then_callbacks_in_order(hvd):
    calls = []

    class Tracked(ObjectState):
        def reset(self):
            calls.append("reset")

    state = Tracked(hvd.broadcast_object, hvd.rank, x=1)
    state.register_reset_callbacks([lambda: calls.append("a")])
    state.register_reset_callbacks([lambda: calls.append("b")])
    state.on_hosts_updated(5, HostUpdateResult.added)
    state.on_reset()
    assert calls == ["reset", "a", "b"]
    state.check_host_updates()  # the message was forgotten by on_reset: no interrupt


def test_host_updates_rank0_decides_every_rank_raises(hvd):
    state = object_state(hvd, x=0)
    # Rank 1's own notes do not count: rank 0 heard of nothing.
    if hvd.rank() == 1:
        state.on_hosts_updated(9, HostUpdateResult.added)
    state.commit()
    if hvd.rank() == 0:
        state.on_hosts_updated(1, HostUpdateResult.added)
    with pytest.raises(HostsUpdatedInterrupt) as e:
        state.commit()
    assert e.value.skip_sync is False
    # Not newer than the last one acted on: nothing.
    if hvd.rank() == 0:
        state.on_hosts_updated(1, HostUpdateResult.removed)
    state.commit()
    # Only removals: the sync after the reset may be skipped.
    if hvd.rank() == 0:
        state.on_hosts_updated(2, HostUpdateResult.removed)
    with pytest.raises(HostsUpdatedInterrupt) as e:
        state.commit()
    assert e.value.skip_sync is True
    # Added and removed since the last commit: a full sync.
    if hvd.rank() == 0:
        state.on_hosts_updated(3, HostUpdateResult.removed)
        state.on_hosts_updated(4, HostUpdateResult.added)
    with pytest.raises(HostsUpdatedInterrupt) as e:
        state.commit()
    assert e.value.skip_sync is False


def test_host_update_result_from_c_bits():
    assert elastic.host_update_result(0) == HostUpdateResult.no_update
    assert elastic.host_update_result(1) == HostUpdateResult.added      # PLAIT_HOSTS_ADDED
    assert elastic.host_update_result(2) == HostUpdateResult.removed    # PLAIT_HOSTS_REMOVED
    assert elastic.host_update_result(3) == HostUpdateResult.mixed
    assert (HostUpdateResult.removed, HostUpdateResult.added) == (1, 2)  # Horovod's values


@pytest.mark.parametrize("skip_sync", [False, True])
def test_hosts_updated_interrupt_resets_without_restore(hvd, skip_sync):
    r = hvd.rank()
    state = object_state(hvd, step=0, mine=r)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    calls = []

    @hvd.elastic.run
    def train(state, limit):
        calls.append((state.step, state.mine))
        if len(calls) == 1:
            state.step = 1
            state.commit()
            state.step = 2            # not committed: kept (no restore)
            state.mine = 10 + r       # differs per rank
            raise HostsUpdatedInterrupt(skip_sync)
        return limit

    assert train(state, 42) == 42
    assert resets == [hvd.size()]
    assert hvd.is_initialized()
    # First call: after the sync (rank 0's values). Second: no restore; the
    # sync either ran (ObjectState's sync sends rank 0's last commit, as
    # Horovod's) or was skipped (each rank keeps what it had).
    assert calls[0] == (0, 0)
    assert calls[1] == ((2, 10 + r) if skip_sync else (1, 0))


def test_not_elastic_internal_error_is_raised(hvd):
    state = object_state(hvd, step=0)
    restored = []
    state.restore = lambda: restored.append(1)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        raise HorovodInternalError("a rank was lost")

    with pytest.raises(HorovodInternalError, match="a rank was lost"):
        train(state)
    assert calls == [1] and restored == []
    assert hvd.is_initialized()


def test_other_errors_are_raised(hvd):
    state = object_state(hvd, step=0)

    @hvd.elastic.run
    def train(state):
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        train(state)


def test_no_collective_before_the_function(hvd):
    import torch
    from plait.torch.elastic import ElasticSampler, TorchState

    before = hvd.stats()["tensors"]
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sampler = ElasticSampler(list(range(10)))
    state = TorchState(model, optimizer, sampler=sampler, epoch=0)
    seen = []

    @hvd.elastic.run
    def train(state):
        seen.append(hvd.stats()["tensors"])

    assert hvd.stats()["tensors"] == before  # making states and decorating: none
    train(state)
    assert seen[0] > before  # the sync ran first, inside the wrapper
