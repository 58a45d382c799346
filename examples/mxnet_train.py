#!/usr/bin/env python3
"""Data-parallel training with plait.mxnet, start to finish: a gluon network
learns a generated classification task, each rank training on its own shard
of the data, with Horovod's MXNet API (`import plait.mxnet as hvd`).

    plaitrun -np 2 python examples/mxnet_train.py [--epochs 6]

(python: one with mxnet 1.9.1, e.g. the venv ci/lib/mxnet.sh makes.)
Rank 0 prints the loss and accuracy of every epoch (averaged over the
ranks), the throughput, and what plait's fusion did. At the end every rank checks that the parameters
are bit-for-bit the same on all ranks. The exit status is non-zero if they
differ or if the loss did not go down, so this script is also a check.

The task: points in 16 dimensions, each class a mixture of Gaussian blobs
(not linearly separable). Every rank generates the same data from the same
seed and keeps its shard (rank, rank + size, ...).
"""

import argparse
import hashlib
import sys
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import plait.mxnet as hvd
from plait_fusion_report import fusion_report

parser = argparse.ArgumentParser(
    description="Train a gluon network on a generated task with plait.mxnet",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--epochs", type=int, default=6, help="passes over the training set")
parser.add_argument("--batch-size", type=int, default=64, help="samples per step per rank")
parser.add_argument("--train-samples", type=int, default=8192, help="training set (all ranks)")
parser.add_argument("--features", type=int, default=16, help="input features")
parser.add_argument("--classes", type=int, default=4, help="classes")
parser.add_argument("--hidden", type=int, default=128, help="width of the hidden layers")
parser.add_argument("--lr", type=float, default=0.05, help="learning rate for one rank")
parser.add_argument("--noise", type=float, default=2.5, help="standard deviation of each blob")
parser.add_argument("--seed", type=int, default=42, help="seed of the generated data")
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 compression of gradients")


def make_dataset(n, args):
    rng = np.random.RandomState(args.seed)
    centres = rng.normal(0, 2.0, size=(args.classes, 3, args.features))
    labels = rng.randint(0, args.classes, size=n)
    blob = rng.randint(0, 3, size=n)
    x = centres[labels, blob] + rng.normal(0, args.noise, size=(n, args.features))
    return x.astype(np.float32), labels.astype(np.float32)


def build_net(args):
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(gluon.nn.Dense(args.hidden, activation="relu"))
        net.add(gluon.nn.Dense(args.hidden, activation="relu"))
        net.add(gluon.nn.Dense(args.classes))
    return net


def main():
    args = parser.parse_args()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    mx.random.seed(1000 + rank)  # different initial values on every rank ...

    x, y = make_dataset(args.train_samples, args)
    x, y = x[rank::size], y[rank::size]
    net = build_net(args)
    net.initialize(mx.init.Xavier())  # deferred: shapes come with the first batch
    net.hybridize()
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)  # ... rank 0's after the first forward

    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    trainer = hvd.DistributedTrainer(params, "sgd",
                                     {"learning_rate": args.lr * size, "momentum": 0.9},
                                     compression=compression)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    steps = len(x) // args.batch_size
    losses = []
    hvd.stats_reset()
    start = time.time()
    for epoch in range(args.epochs):
        total, correct = 0.0, 0.0
        for i in range(steps):
            xb = mx.nd.array(x[i * args.batch_size:(i + 1) * args.batch_size])
            yb = mx.nd.array(y[i * args.batch_size:(i + 1) * args.batch_size])
            with autograd.record():
                out = net(xb)
                loss = loss_fn(out, yb)
            loss.backward()
            trainer.step(args.batch_size)
            total += loss.mean().asscalar()
            correct += (out.argmax(axis=1) == yb).mean().asscalar()
        stats = hvd.allreduce(mx.nd.array([total / steps, correct / steps]),
                              name="epoch.%d" % epoch).asnumpy()
        losses.append(float(stats[0]))
        if rank == 0:
            print("epoch %d: loss %.4f, accuracy %.3f" % (epoch, stats[0], stats[1]),
                  flush=True)
    mx.nd.waitall()
    elapsed = time.time() - start
    stats = hvd.stats()
    if rank == 0:
        samples = args.epochs * steps * args.batch_size * size
        print("%d ranks, %.1f s, %.0f samples/s (all ranks)" % (size, elapsed,
                                                                 samples / elapsed))
        # The gradients are allreduced inside MXNet's engine as backward
        # produces them, so several are in flight at once and fuse.
        for line in fusion_report(stats, args.epochs * steps):
            print(line)

    digest = hashlib.sha256()
    for name, p in sorted(params.items()):
        digest.update(p.data().asnumpy().tobytes())
    digests = hvd.allgather_object(digest.hexdigest(), name="final.params")
    ok = True
    if len(set(digests)) != 1:
        print("rank %d: parameters differ between ranks: %s" % (rank, digests), file=sys.stderr)
        ok = False
    if not losses[-1] < losses[0]:
        print("rank %d: the loss did not go down: %s" % (rank, losses), file=sys.stderr)
        ok = False
    if ok and rank == 0:
        print("parameters identical on all %d ranks; loss %.4f -> %.4f"
              % (size, losses[0], losses[-1]))
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
