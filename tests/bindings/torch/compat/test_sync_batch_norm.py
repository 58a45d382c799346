"""SyncBatchNorm: Horovod 0.28's needs CUDA tensors (a CPU input raises
ValueError); plait's runs on the CPU and normalises over the whole job's
batch (docs/horovod-comparison.md, row sync-batch-norm-cpu)."""

import pytest
import torch


@pytest.mark.differs("sync-batch-norm-cpu")
def test_sync_batch_norm_cpu(hvd, impl):
    n, me = hvd.size(), hvd.rank()

    def batch(r):
        return torch.arange(8.0 * 3).reshape(8, 3) * (r + 1) % 7 + r

    bn = hvd.SyncBatchNorm(3)
    assert isinstance(bn, torch.nn.modules.batchnorm._BatchNorm)
    x = batch(me).requires_grad_()
    if impl == "horovod":
        with pytest.raises(ValueError):
            bn(x)
        return
    out = bn(x)
    ref_bn = torch.nn.BatchNorm1d(3)
    full = torch.cat([batch(r) for r in range(n)])
    ref = ref_bn(full)
    assert torch.allclose(out, ref[8 * me:8 * me + 8], atol=1e-5)
    assert torch.allclose(bn.running_mean, ref_bn.running_mean, atol=1e-5)
    assert torch.allclose(bn.running_var, ref_bn.running_var, atol=1e-5)
