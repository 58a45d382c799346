"""plait.torch.elastic: horovod.torch.elastic's names (run, TorchState,
ElasticSampler), refused with NotImplementedError when used: plait has no
elastic mode yet (plait.common.elastic says what is missing).

`@hvd.elastic.run` may decorate a function (the script loads); calling the
function, or making a TorchState or an ElasticSampler, raises.
"""

from plait.common.elastic import run_fn
from plait.torch.basics import init, shutdown  # noqa: F401
from plait.torch.elastic.sampler import ElasticSampler
from plait.torch.elastic.state import TorchState


def run(func):
    """Horovod's decorator for elastic training; the wrapped function
    raises NotImplementedError when called."""
    return run_fn(func, _reset)


def _reset():
    shutdown()
    init()


__all__ = ["TorchState", "ElasticSampler", "run"]
