"""SyncBatchNorm: batch normalization over the batches of all ranks
(horovod.torch.SyncBatchNorm), on CPU as well as CUDA tensors.

In training, the mean and variance are those of the concatenation of every
rank's batch: each rank sends its (count, mean, sum of squared deviations)
per channel in one allgather and all ranks combine them the same way
(Chan et al.'s pairwise formula, in float64, which avoids the cancellation of
E[x^2] - E[x]^2). The backward pass needs two global sums per channel (of the
output gradient and of the output gradient times the centred input); they
travel in one allreduce. Gradients of weight and bias are this rank's share,
left for DistributedOptimizer to average as for any other parameter.
"""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from plait.torch._handles import synchronize
from plait.torch.basics import Sum, size
from plait.torch.mpi_ops import allgather_async, allreduce_async


def _reduce_dims(x):
    return [0] + list(range(2, x.dim()))


def _channel_view(v, x):
    """v (one value per channel) shaped to broadcast against x (N, C, ...)."""
    return v.reshape((1, -1) + (1,) * (x.dim() - 2))


def _compute_dtype(x):
    return x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32


class _SyncBatchNormFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum):
        channels = x.shape[1]
        dims = _reduce_dims(x)
        xc = x.to(_compute_dtype(x))
        count = x.numel() // channels if channels else 0

        # This rank's statistics per channel, then everyone's.
        row = torch.zeros(1, 2 * channels + 1, dtype=torch.float64, device=x.device)
        row[0, 0] = count
        if count:
            mean = xc.mean(dims)
            row[0, 1:channels + 1] = mean
            row[0, channels + 1:] = ((xc - _channel_view(mean, xc)) ** 2).sum(dims)
        rows = synchronize(allgather_async(row, name="sync_batch_norm.stats"))
        counts = rows[:, :1]
        total = float(counts.sum())
        if total <= 1:
            # The same on every rank, so every rank raises.
            raise ValueError("SyncBatchNorm: expected more than 1 value per channel when "
                             "training over all ranks, got %d (input size %s on this rank)"
                             % (total, tuple(x.shape)))
        means = rows[:, 1:channels + 1]
        mean = (counts * means).sum(0) / total
        m2 = rows[:, channels + 1:].sum(0) + (counts * (means - mean) ** 2).sum(0)
        var = m2 / total
        invstd = torch.rsqrt(var + eps)

        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
        if running_var is not None:
            unbiased = m2 / (total - 1)
            running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))

        mean = mean.to(xc.dtype)
        invstd = invstd.to(xc.dtype)
        scale = invstd if weight is None else invstd * weight.to(xc.dtype)
        y = (xc - _channel_view(mean, xc)) * _channel_view(scale, xc)
        if bias is not None:
            y = y + _channel_view(bias.to(xc.dtype), xc)
        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.total = total
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight, mean, invstd = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dims = _reduce_dims(x)
        xc = x.to(mean.dtype)
        dy = grad_out.to(mean.dtype)
        xmu = xc - _channel_view(mean, xc)
        sum_dy = dy.sum(dims)
        sum_dy_xmu = (dy * xmu).sum(dims)

        grad_x = grad_w = grad_b = None
        if need_x:
            # Every sample of every rank moves the batch statistics, so the
            # input gradient needs the global sums.
            channels = x.shape[1]
            both = torch.cat([sum_dy, sum_dy_xmu]).to(torch.float64)
            both = synchronize(allreduce_async(both, name="sync_batch_norm.grad", op=Sum))
            mean_dy = both[:channels].to(dy.dtype) / ctx.total
            mean_dy_xmu = both[channels:].to(dy.dtype) / ctx.total
            scale = invstd if weight is None else invstd * weight.to(dy.dtype)
            grad_x = (dy - _channel_view(mean_dy, dy)
                      - xmu * _channel_view(invstd * invstd * mean_dy_xmu, dy))
            grad_x = (grad_x * _channel_view(scale, dy)).to(x.dtype)
        if weight is not None and need_w:
            grad_w = (sum_dy_xmu * invstd).to(weight.dtype)
        if need_b:
            grad_b = sum_dy.to(grad_out.dtype)
        return grad_x, grad_w, grad_b, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose training statistics cover the batches of
    all ranks (horovod.torch.SyncBatchNorm; torch.nn.SyncBatchNorm's role).

    Takes (N, C, ...) input like BatchNorm1d/2d/3d. In training (or
    whenever track_running_stats=False) every rank must call forward, and
    backward, in the same order: each is collective. In eval mode with
    running statistics it is plain batch norm, without communication.
    Ranks may hold batches of different sizes, including empty ones.

    Arguments are those of torch.nn.BatchNorm2d: num_features (C), eps,
    momentum (None: cumulative average), affine, track_running_stats.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("SyncBatchNorm: expected at least 2D input (N, C, ...), got "
                             "%dD input" % input.dim())
        if input.shape[1] != self.num_features:
            raise ValueError("SyncBatchNorm: expected %d channels (dimension 1), got input "
                             "of shape %s" % (self.num_features, tuple(input.shape)))

    def forward(self, input):
        self._check_input_dim(input)
        # torch's _BatchNorm: the factor for the running averages.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        batch_stats = self.training or self.running_mean is None
        # Running statistics are read in eval mode, updated in training.
        track = not self.training or self.track_running_stats
        running_mean = self.running_mean if track else None
        running_var = self.running_var if track else None
        if not batch_stats or size() == 1:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                batch_stats, factor, self.eps)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                            running_var, self.eps, factor)
