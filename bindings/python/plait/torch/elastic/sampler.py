"""horovod.torch.elastic.sampler's ElasticSampler: refused (no elastic mode)."""

import torch.utils.data

from plait.common.elastic import refuse


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler(dataset, shuffle=True, seed=0); raises
    NotImplementedError when made. Without elastic training,
    torch.utils.data.distributed.DistributedSampler(dataset,
    num_replicas=hvd.size(), rank=hvd.rank()) splits a dataset over ranks."""

    def __init__(self, dataset, shuffle=True, seed=0):
        raise refuse("plait.torch.elastic.ElasticSampler")

    def set_epoch(self, epoch):
        raise refuse("ElasticSampler.set_epoch")

    def record_batch(self, batch_idx, batch_size):
        raise refuse("ElasticSampler.record_batch")

    def load_state_dict(self, state_dict):
        raise refuse("ElasticSampler.load_state_dict")

    def state_dict(self):
        raise refuse("ElasticSampler.state_dict")

    def reset(self):
        raise refuse("ElasticSampler.reset")

    def __iter__(self):
        raise refuse("ElasticSampler.__iter__")

    def __len__(self):
        raise refuse("ElasticSampler.__len__")
