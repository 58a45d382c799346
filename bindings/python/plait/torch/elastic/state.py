"""horovod.torch.elastic.state's TorchState: refused (no elastic mode)."""

from plait.common.elastic import ObjectState, refuse


class TorchState(ObjectState):
    """Horovod's TorchState(model=None, optimizer=None, **kwargs); raises
    NotImplementedError when made."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        raise refuse("plait.torch.elastic.TorchState")

    def save(self):
        raise refuse("TorchState.save")

    def restore(self):
        raise refuse("TorchState.restore")

    def sync(self):
        raise refuse("TorchState.sync")
