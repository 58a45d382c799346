"""horovod.torch.elastic.sampler's ElasticSampler (Horovod 0.28.1's
semantics): a DistributedSampler that remembers how far the epoch went, so a
reset re-partitions only the samples not yet processed over the new ranks."""

import math
import random

import torch.utils.data

from plait.torch.basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions dataset over the ranks, and again over the new ranks after
    each reset, leaving out the samples processed this epoch.

    Use it as Horovod's: give it to the TorchState (its position is then
    committed, restored and synced with the state), call record_batch(batch_idx,
    batch_size) after each batch, and set_epoch(epoch + 1) at the END of each
    epoch (it forgets what was processed).

    Processed samples are counted in the epoch's (shuffled) order, as
    Horovod 0.28.1 does: record_batch adds batch_size * size(), which is right
    when every rank trains full batches of its share in step. Horovod's
    earlier way, record_indices(indices) with get_indices(batch_idx,
    batch_size), names the samples (merged over the ranks at each commit);
    use one way or the other in an epoch.

    Each rank's share is its stride of the unprocessed samples (rank, rank +
    size(), ...), padded by repeating samples so every rank has the same
    number, as DistributedSampler does.

    dataset: anything with len() (assumed not to change); shuffle: shuffle
    the indices, the same way on every rank, differently each epoch (seed +
    epoch); seed: the same on every rank. Needs init (size and rank).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed

        self.epoch = 0
        self.processed_num = 0
        self.processed_indices = set()

        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.indices = []
        self.num_samples = 0
        self.total_size = 0

        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch epoch (call it at the end of the previous one, so an
        epoch interrupted part way is not processed again): forgets the
        processed samples and partitions the new epoch's order."""
        self.epoch = epoch
        self.processed_num = 0
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Notes that every rank processed one more batch of batch_size
        samples (batch_idx is not used, as in Horovod 0.28.1)."""
        self.processed_num += batch_size * self.num_replicas

    def get_indices(self, batch_idx, batch_size):
        """This rank's indices of its batch batch_idx (counted from the last
        reset), for record_indices."""
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def record_indices(self, indices):
        """Notes that this rank processed the samples indices; the
        TorchState merges every rank's at commit."""
        self.processed_indices.update(int(i) for i in indices)

    def state_dict(self):
        return dict(epoch=self.epoch, processed_num=self.processed_num,
                    processed_indices=set(self.processed_indices))

    def load_state_dict(self, state_dict):
        """Takes a state_dict() (or Horovod 0.28.1's: epoch and
        processed_num) and partitions again."""
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.processed_indices = set(state_dict.get("processed_indices", ()))
        self.reset()

    def reset(self):
        """Partitions the samples not processed this epoch over size() ranks;
        this rank takes its stride."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        done = self.processed_indices
        self.remaining_indices = [i for i in order[self.processed_num:] if i not in done]
        n = len(self.remaining_indices)
        self.num_samples = int(math.ceil(n / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        padded = list(self.remaining_indices)
        while n and len(padded) < self.total_size:  # n < size(): repeat more than once
            padded += self.remaining_indices[:self.total_size - len(padded)]
        self.indices = padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(list(self.indices))

    def __len__(self):
        return self.num_samples
