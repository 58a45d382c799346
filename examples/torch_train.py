#!/usr/bin/env python3
"""Data-parallel training with plait.torch, start to finish: a small network
learns a generated classification task, each rank training on its own shard
of the data, with Horovod's API (`import plait.torch as hvd`).

    plaitrun -np 2 python3 examples/torch_train.py [--epochs 8]
    PLAIT_TRANSPORT=nccl plaitrun -np 2 python3 examples/torch_train.py --cuda

With --cuda each rank trains on GPU local_rank (one GPU per rank); with
PLAIT_TRANSPORT=nccl the gradients are reduced on the GPUs, with gloo they
are staged through host memory (docs/python.md, "CUDA tensors").

Rank 0 prints the loss and accuracy of every epoch (averaged over the ranks),
the throughput, and what plait's fusion did. At the end every rank checks
that the parameters are bit-for-bit the same on all ranks. The exit status is
non-zero if they differ or if the loss did not go down, so this script is
also a check (ci/demo runs it).

The task: points in 32 dimensions, each class a mixture of a few Gaussian
blobs (so the classes are not linearly separable and overlap a little), and
an MLP learns to classify them. Every rank generates the same data from the
same seed and keeps its shard (rank, rank + size, ...), as a
DistributedSampler would.
"""

import argparse
import hashlib
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import plait
import plait.torch as hvd
from plait_fusion_report import fusion_report

parser = argparse.ArgumentParser(
    description="Train a small network on a generated task with plait.torch",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--epochs", type=int, default=8, help="passes over the training set")
parser.add_argument("--batch-size", type=int, default=64, help="samples per step per rank")
parser.add_argument("--train-samples", type=int, default=16384, help="training set size (all ranks)")
parser.add_argument("--test-samples", type=int, default=4096, help="test set size (all ranks)")
parser.add_argument("--features", type=int, default=32, help="input features")
parser.add_argument("--classes", type=int, default=8, help="classes")
parser.add_argument("--clusters", type=int, default=4, help="Gaussian blobs per class")
parser.add_argument("--noise", type=float, default=1.3, help="standard deviation of each blob")
parser.add_argument("--hidden", type=int, default=256, help="width of the hidden layers")
parser.add_argument("--lr", type=float, default=0.05, help="learning rate for one rank")
parser.add_argument("--seed", type=int, default=42, help="seed of the generated data")
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 compression of gradients")
parser.add_argument("--cuda", action="store_true",
                    help="train on GPU local_rank (CUDA tensors end to end)")
parser.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads per rank (0: cores / ranks on this host)")


def make_dataset(n, args, seed):
    """n samples of the task, identical on every rank for a given seed.

    Each class is a mixture of --clusters Gaussian blobs whose centres are
    fixed by --seed (the same for the training and the test set), so the
    classes are not linearly separable and overlap a little."""
    g = torch.Generator().manual_seed(args.seed)
    centres = torch.randn(args.classes * args.clusters, args.features, generator=g)
    g.manual_seed(seed)
    which = torch.randint(0, len(centres), (n,), generator=g)
    x = centres[which] + args.noise * torch.randn(n, args.features, generator=g)
    return x, which % args.classes


def shard(x, y):
    """This rank's part of a dataset: rows rank, rank + size, ...; every rank
    gets the same number, so all ranks run the same number of steps."""
    n = len(x) // hvd.size() * hvd.size()
    return x[hvd.rank():n:hvd.size()], y[hvd.rank():n:hvd.size()]


class Net(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(args.features, args.hidden), nn.ReLU(),
            nn.Linear(args.hidden, args.hidden), nn.ReLU(),
            nn.Linear(args.hidden, args.hidden), nn.ReLU(),
            nn.Linear(args.hidden, args.classes))

    def forward(self, x):
        return self.net(x)


def metric_average(value, name, device):
    """The average of a number over all ranks (Horovod's examples do this)."""
    return hvd.allreduce(torch.tensor(float(value), device=device), name=name).item()


def parameter_digest(model):
    """A hash of every parameter's bytes, in a fixed order."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    args = parser.parse_args()
    if args.cuda and not torch.cuda.is_available():
        print("torch_train: --cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    hvd.init()
    device = torch.device("cpu")
    if args.cuda:
        device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    threads = args.threads or max(1, (os.cpu_count() or 1) // hvd.local_size())
    torch.set_num_threads(threads)

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    train_x, train_y = shard(*make_dataset(args.train_samples, args, args.seed + 1))
    test_x, test_y = shard(*make_dataset(args.test_samples, args, args.seed + 2))
    train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))
    steps_per_epoch = len(train_x) // args.batch_size

    # Each rank starts from different random weights: broadcast_parameters
    # below makes them rank 0's.
    torch.manual_seed(1000 + hvd.rank())
    model = Net(args).to(device)
    # Scale the learning rate by the number of ranks (the effective batch is
    # size x batch-size), as Horovod recommends.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    nparams = sum(p.numel() for p in model.parameters())
    log("torch_train: %d ranks (transport %s, plait %s, torch %s, %d thread(s) per rank, %s)"
        % (hvd.size(), hvd.transport_name(), plait.__version__, torch.__version__, threads,
           device.type))
    log("model: %d parameters in %d tensors; data: %d training samples (%d per rank), "
        "%d test samples, %d classes; %d steps of %d per epoch per rank"
        % (nparams, len(list(model.parameters())), len(train_x) * hvd.size(), len(train_x),
           len(test_x) * hvd.size(), args.classes, steps_per_epoch, args.batch_size))

    plait.stats_reset()
    losses = []
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        # A new order every epoch, different on each rank (DistributedSampler.set_epoch).
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(
            epoch * 1000 + hvd.rank()))
        total = 0.0
        for step in range(steps_per_epoch):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            optimizer.step()
            total += loss.item()
            if (step + 1) % max(1, steps_per_epoch // 4) == 0 and step + 1 < steps_per_epoch:
                log("  epoch %d: %3d%% (step %d of %d), loss %.4f (rank 0)"
                    % (epoch, 100 * (step + 1) // steps_per_epoch, step + 1,
                       steps_per_epoch, total / (step + 1)))
        elapsed = time.perf_counter() - t0

        model.eval()
        with torch.no_grad():
            correct = (model(test_x).argmax(1) == test_y).sum()
        correct = hvd.allreduce(correct, name="correct", op=hvd.Sum).item()
        train_loss = metric_average(total / steps_per_epoch, "train_loss", device)
        losses.append(train_loss)
        log("epoch %d/%d: train loss %.4f, test accuracy %.1f%%, %.0f samples/s "
            "(all ranks), %.2f s"
            % (epoch, args.epochs, train_loss, 100.0 * correct / (len(test_x) * hvd.size()),
               steps_per_epoch * args.batch_size * hvd.size() / elapsed, elapsed))
    elapsed = time.perf_counter() - start
    stats = plait.stats()
    steps = steps_per_epoch * args.epochs
    log("trained %d steps in %.1f s: %.0f samples/s over %d ranks, %.2f ms per step"
        % (steps, elapsed, steps * args.batch_size * hvd.size() / elapsed, hvd.size(),
           1e3 * elapsed / steps))

    log("plait fusion statistics, rank 0, over the %d training steps:" % steps)
    for line in fusion_report(stats, steps):
        log("  " + line)

    # Every rank must end with exactly the same parameters.
    digests = hvd.allgather_object(parameter_digest(model))
    same = all(d == digests[0] for d in digests)
    decreased = losses[-1] < losses[0]
    if same:
        log("parameters identical on all %d ranks (sha256 %s)" % (hvd.size(), digests[0][:16]))
    else:
        print("rank %d: parameters differ across ranks: %s"
              % (hvd.rank(), ", ".join("rank %d %s" % (r, d[:16]) for r, d in enumerate(digests))),
              file=sys.stderr, flush=True)
    if decreased:
        log("loss went down: %.4f -> %.4f" % (losses[0], losses[-1]))
    else:
        print("rank %d: loss did not go down: %.4f -> %.4f" % (hvd.rank(), losses[0], losses[-1]),
              file=sys.stderr, flush=True)
    hvd.shutdown()
    return 0 if same and decreased else 1


if __name__ == "__main__":
    sys.exit(main())
