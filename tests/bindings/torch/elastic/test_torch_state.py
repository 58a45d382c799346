"""plait.torch.elastic.TorchState on 2 ranks without the driver: a model and
an optimizer saved at commit, restored after a HorovodInternalError raised
inside the wrapped function, then synced from rank 0. Fixed ranks re-raise a
HorovodInternalError (test_state.py); here the worker is made to take the
elastic path (plait.common.elastic.enabled answers True), and the reset is
the real one: shutdown() and init() on the same 2 ranks."""

import copy

import pytest
import torch

import plait.common.elastic as elastic
from plait.common.exceptions import HorovodInternalError
from plait.torch.elastic import ElasticSampler, TorchState


@pytest.fixture
def as_elastic(monkeypatch):
    """The run loop's elastic path on fixed ranks (no driver to re-form the job)."""
    monkeypatch.setattr(elastic, "enabled", lambda: True)


def model_and_optimizer(seed):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, optimizer


def step(model, optimizer, scale):
    optimizer.zero_grad()
    loss = (model(torch.ones(2, 4)) * scale).sum()
    loss.backward()
    optimizer.step()


def momentum(optimizer):
    return [optimizer.state[p]["momentum_buffer"].clone()
            for g in optimizer.param_groups for p in g["params"]]


def test_restore_after_internal_error_then_sync_from_rank0(hvd, as_elastic):
    r = hvd.rank()
    model, optimizer = model_and_optimizer(seed=100 + r)  # different on each rank
    state = TorchState(model, optimizer, epoch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.rank())])
    seen = {}

    @hvd.elastic.run
    def train(state):
        params = [p.detach().clone() for p in state.model.parameters()]
        everyone = hvd.allgather_object(params)
        assert all(torch.equal(a, b) for a, b in zip(everyone[0], everyone[1])), \
            "the wrapper syncs the model from rank 0 before calling"
        if "committed" in seen:
            seen["after"] = (copy.deepcopy(state.model.state_dict()), momentum(state.optimizer),
                             state.epoch)
            return "done"
        step(state.model, state.optimizer, 1.0)
        state.epoch = 1
        state.commit()
        seen["committed"] = (copy.deepcopy(state.model.state_dict()),
                             momentum(state.optimizer))
        step(state.model, state.optimizer, 3.0)  # lost by the restore
        state.epoch = 2
        if r == 1:
            # Rank 1 saves something else (save alone is local): the sync
            # after the restore must bring rank 0's commit back.
            with torch.no_grad():
                for p in state.model.parameters():
                    p.add_(1.0)
            state.save()
        raise HorovodInternalError("simulated: a collective failed")

    assert train(state) == "done"
    assert resets == [r]
    model_after, momentum_after, epoch_after = seen["after"]
    model_commit, momentum_commit = seen["committed"]
    assert epoch_after == 1
    for k in model_commit:
        assert torch.equal(model_after[k], model_commit[k]), k
    for a, b in zip(momentum_after, momentum_commit):
        assert torch.equal(a, b)


def test_assigning_a_handled_attribute_saves_it(hvd):
    model, optimizer = model_and_optimizer(seed=1)
    state = TorchState(model, optimizer)
    other, _ = model_and_optimizer(seed=2)
    state.model = other
    assert state.model is other
    with torch.no_grad():
        for p in other.parameters():
            p.zero_()
    state.restore()  # back to other's weights when it was assigned
    torch.manual_seed(2)
    fresh = torch.nn.Linear(4, 3)
    for a, b in zip(other.parameters(), fresh.parameters()):
        assert torch.equal(a, b)


def test_sampler_in_state_merges_recorded_indices(hvd):
    sampler = ElasticSampler(list(range(20)), shuffle=False)
    state = TorchState(sampler=sampler, epoch=0)
    state.sync()
    mine = sampler.get_indices(0, 3)
    assert mine == list(range(hvd.rank(), 20, hvd.size()))[:3]
    sampler.record_indices(mine)
    state.commit()  # every rank's processed samples, merged
    done = set().union(*[set(range(k, 20, hvd.size())[:3]) for k in range(hvd.size())])
    assert sampler.processed_indices == done
    sampler.record_indices([19])  # not committed: forgotten by the restore
    state.restore()
    assert sampler.processed_indices == done
    assert sorted(sampler.remaining_indices) == sorted(set(range(20)) - done)
    assert set(sampler) & done == set()


@pytest.mark.parametrize("record", ["batch", "indices"])
@pytest.mark.parametrize("skip_sync", [False, True])
def test_sampler_resumes_after_a_reset_each_sample_once(hvd, skip_sync, record):
    """Two epochs of 40 samples, batches of 2, a commit after each batch and a
    host change after the second: after the reset the rest of the epoch is
    partitioned again, and every sample is trained on once per epoch
    (processed samples counted by record_batch, or named by record_indices)."""
    from plait.common.exceptions import HostsUpdatedInterrupt
    sampler = ElasticSampler(list(range(40)), shuffle=True, seed=5)
    state = TorchState(sampler=sampler, epoch=0)
    seen = []
    interrupted = []

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, 2):
            mine = list(state.sampler)
            for b in range(0, len(mine) // 2):
                seen.extend((state.epoch, i) for i in mine[2 * b:2 * b + 2])
                if record == "batch":
                    state.sampler.record_batch(b, 2)
                else:
                    state.sampler.record_indices(state.sampler.get_indices(b, 2))
                state.commit()
                if b == 1 and not interrupted:
                    interrupted.append(b)
                    raise HostsUpdatedInterrupt(skip_sync)
            state.sampler.set_epoch(state.epoch + 1)
            state.commit()

    train(state)
    everyone = [x for part in hvd.allgather_object(seen) for x in part]
    for epoch in (0, 1):
        samples = sorted(i for e, i in everyone if e == epoch)
        assert samples == list(range(40)), epoch
    assert interrupted == [1]
