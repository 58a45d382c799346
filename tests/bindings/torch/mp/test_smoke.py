import torch

def test_sum(hvd):
    x = torch.ones(3) * (hvd.rank() + 1)
    n = hvd.size()
    assert hvd.allreduce(x, op=hvd.Sum).tolist() == [n * (n + 1) / 2] * 3
