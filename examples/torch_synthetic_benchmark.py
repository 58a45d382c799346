#!/usr/bin/env python3
"""Synthetic training benchmark with plait.torch, in the style of Horovod's
pytorch_synthetic_benchmark.py: a real model, random data, DistributedOptimizer;
prints images/sec per rank and in total, then what plait's fusion did.

    plaitrun -np 2 python3 examples/torch_synthetic_benchmark.py --model mlp
    plaitrun -np 2 python3 examples/torch_synthetic_benchmark.py --model convnet --fp16-allreduce

A Horovod script becomes a plait one by changing its import; everything
below `import plait.torch as hvd` is Horovod's API, except the statistics
at the end (plait.stats()).
"""

import argparse
import os
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import plait
import plait.torch as hvd
from plait_fusion_report import fusion_report

parser = argparse.ArgumentParser(
    description="PyTorch synthetic benchmark on plait",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--model", default="mlp", choices=["mlp", "convnet"],
                    help="mlp: 3072-2048-1024-1024-1024-10 (10.5M parameters); "
                         "convnet: a small ResNet (3 stages of residual blocks)")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size per rank")
parser.add_argument("--num-warmup-batches", type=int, default=5,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=10,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=5, help="number of benchmark iterations")
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads per rank (0: cores / ranks on this host)")


class MLP(nn.Module):
    """A plain multi-layer perceptron on flattened 3x32x32 images."""

    def __init__(self, widths=(3 * 32 * 32, 2048, 1024, 1024, 1024), classes=10):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.head = nn.Linear(widths[-1], classes)

    def forward(self, x):
        x = x.flatten(1)
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.head(x)


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convolutions and a shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ConvNet(nn.Module):
    """A small ResNet for 32x32 images: a stem, then stages of basic blocks
    that halve the resolution and double the channels, then a linear head."""

    def __init__(self, channels=(32, 64, 128, 256), blocks=2, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels[0], 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(channels[0]), nn.ReLU())
        stages, cin = [], channels[0]
        for i, cout in enumerate(channels):
            for b in range(blocks):
                stages.append(BasicBlock(cin, cout, 2 if (b == 0 and i > 0) else 1))
                cin = cout
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def main():
    args = parser.parse_args()
    hvd.init()

    # Ranks on one host share its cores; one intra-op pool per rank that
    # covers every core would oversubscribe them.
    threads = args.threads or max(1, (os.cpu_count() or 1) // hvd.local_size())
    torch.set_num_threads(threads)
    torch.manual_seed(1234)

    model = MLP() if args.model == "mlp" else ConvNet()

    # By default, Horovod scales the learning rate by the number of workers.
    optimizer = optim.SGD(model.parameters(), lr=0.01 * hvd.size(), momentum=0.9)

    # Horovod: (optional) compression algorithm.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    # Horovod: wrap optimizer with DistributedOptimizer.
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression, op=hvd.Average)

    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Set up fixed fake data.
    data = torch.randn(args.batch_size, 3, 32, 32)
    target = torch.randint(0, 10, (args.batch_size,))

    def benchmark_step():
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    nparams = sum(p.numel() for p in model.parameters())
    log("Model: %s, %.2fM parameters in %d tensors"
        % (args.model, nparams / 1e6, len(list(model.parameters()))))
    log("Batch size: %d" % args.batch_size)
    log("Number of ranks: %d (transport %s, plait %s, torch %s, %d thread(s) per rank)"
        % (hvd.size(), hvd.transport_name(), plait.__version__, torch.__version__, threads))
    log("fp16 allreduce: %s" % args.fp16_allreduce)

    # Warm-up
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)

    # Benchmark
    log("Running benchmark...")
    plait.stats_reset()
    img_secs = []
    for x in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per rank" % (x, img_sec))
        img_secs.append(img_sec)
    stats = plait.stats()

    # Results
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per rank: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
    log("Total img/sec on %d rank(s): %.1f +-%.1f"
        % (hvd.size(), hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))

    # plait's view of the same steps (rank 0's coordinator).
    log("plait fusion statistics, rank 0, over %d steps:"
        % (args.num_iters * args.num_batches_per_iter))
    for line in fusion_report(stats, args.num_iters * args.num_batches_per_iter):
        log("  " + line)
    hvd.shutdown()


if __name__ == "__main__":
    main()
