"""horovod.torch.elastic.state's TorchState (Horovod 0.28.1's semantics): the
state of a PyTorch training process for plait.torch.elastic.run.

Each keyword argument becomes an attribute. Those of a type with a handler
(a torch.nn.Module, a torch.optim.Optimizer, an ElasticSampler: the
registry, get_handler_registry/set_handler_registry) are saved as a copy of
their state_dict and synced with plait.torch's broadcasts; any other value
is kept as ObjectState keeps it (by reference, synced with broadcast_object).
"""

import copy

import torch

from plait.common.elastic import ObjectState
from plait.torch.basics import rank
from plait.torch.elastic.sampler import ElasticSampler
from plait.torch.functions import (
    allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters,
)

__all__ = ["TorchState", "StateHandler", "ModelStateHandler", "OptimizerStateHandler",
           "SamplerStateHandler", "get_handler_registry", "set_handler_registry"]


class TorchState(ObjectState):
    """TorchState(model=None, optimizer=None, **kwargs): commit() copies the
    model's and optimizer's state_dict (and the other attributes), restore()
    loads the copies back, sync() broadcasts rank 0's parameters, optimizer
    state and attributes. Assigning a handled attribute (state.model =
    other) takes the new object and saves it at once. Making one runs no
    collective."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(dict(model=model, optimizer=optimizer))
        self._handlers, kwargs = _get_handlers(kwargs)
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **kwargs)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def reset(self):
        """After a reset: each handled object adapts to the new job (a
        sampler re-partitions its unprocessed samples over the new ranks,
        also when the sync is skipped; Horovod 0.28.1's does it only in the
        sync)."""
        for handler in self._handlers.values():
            handler.reset()
        super().reset()

    def __setattr__(self, name, value):
        if hasattr(self, name) and name in self._handlers:
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)


class StateHandler:
    """Saves, restores and syncs one object of a TorchState."""

    def __init__(self, value):
        self.value = value

    def save(self):
        raise NotImplementedError("%s.save" % type(self).__name__)

    def restore(self):
        raise NotImplementedError("%s.restore" % type(self).__name__)

    def sync(self):
        raise NotImplementedError("%s.sync" % type(self).__name__)

    def reset(self):
        """After a reset, before the sync. Default: nothing."""

    def set_value(self, value):
        self.value = value
        self.save()


class _StateDictHandler(StateHandler):
    """An object with state_dict()/load_state_dict(): a deep copy is saved."""

    def __init__(self, value):
        super().__init__(value)
        self._saved = copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)


class ModelStateHandler(_StateDictHandler):
    """A torch.nn.Module: synced with broadcast_parameters from rank 0."""

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(_StateDictHandler):
    """A torch.optim.Optimizer: synced with broadcast_optimizer_state."""

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(_StateDictHandler):
    """An ElasticSampler: save() merges the samples every rank recorded with
    record_indices (a collective: commit runs on every rank), sync() loads
    rank 0's position everywhere."""

    def save(self):
        # Every rank's processed samples, kept by the sampler too: a reset
        # that skips the sync re-partitions from what all ranks processed.
        self.value.processed_indices = set().union(
            *allgather_object(self.value.processed_indices, name="elastic.sampler.processed"))
        self._saved = copy.deepcopy(self.value.state_dict())

    def sync(self):
        self.value.load_state_dict(
            broadcast_object(self.value.state_dict(), name="elastic.sampler.state"))

    def reset(self):
        self.value.reset()


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    """The (type, handler class) pairs TorchState looks a value up in, in order."""
    return _handler_registry


def set_handler_registry(registry):
    """Replaces the registry (e.g. to add a handler for another type)."""
    global _handler_registry
    _handler_registry = registry


def _get_handler(value):
    for handler_type, handler_cls in _handler_registry:
        if isinstance(value, handler_type):
            return handler_cls(value)
    return None


def _get_handlers(kwargs):
    """({name: handler} for the values with one, {name: value} for the rest)."""
    handlers, rest = {}, {}
    for name, value in kwargs.items():
        handler = _get_handler(value)
        if handler is not None:
            handlers[name] = handler
        else:
            rest[name] = value
    return handlers, rest
