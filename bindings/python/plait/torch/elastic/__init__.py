"""plait.torch.elastic: horovod.torch.elastic with Horovod 0.28.1's semantics
(run, TorchState, ElasticSampler) for workers started by plaitrun's elastic
driver (docs/elastic.md; the loop is plait.common.elastic's).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, (x, y) in enumerate(loader):   # sampler=ElasticSampler
                ...
                if state.batch % 10 == 0:
                    state.commit()
            state.sampler.set_epoch(state.epoch + 1)

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)
    train(state)

Without the driver the same script runs on fixed ranks (a failure is raised).
"""

import warnings

from plait.common.elastic import run_fn
from plait.torch.basics import init, shutdown
from plait.torch.elastic import sampler, state  # noqa: F401
from plait.torch.elastic.sampler import ElasticSampler
from plait.torch.elastic.state import TorchState


def run(func):
    """Decorator for the training function func(state, ...): syncs state
    from rank 0 and calls func; after a failed collective (HorovodInternalError)
    it restores the last commit, after a host change (HostsUpdatedInterrupt)
    it keeps the state, and either way leaves the job and joins the one the
    driver forms next, then loops. Run no collective before calling the
    wrapped function: a worker that joins would run it while the others are
    syncing the state."""
    return run_fn(func, _reset)


def _reset():
    with warnings.catch_warnings():
        # A lost rank's failure, raised and handled already, is found again
        # on the way out: not worth a warning at every reset.
        warnings.simplefilter("ignore", RuntimeWarning)
        shutdown()
    init()


__all__ = ["TorchState", "ElasticSampler", "run"]
