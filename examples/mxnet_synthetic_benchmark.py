#!/usr/bin/env python3
"""Synthetic benchmark of data-parallel training with plait.mxnet, as
Horovod's synthetic benchmarks measure it: a gluon model-zoo network trained
on random images with DistributedTrainer; prints images/sec per rank and in
all, with the spread over the timed iterations.

    plaitrun -np 2 python examples/mxnet_synthetic_benchmark.py --model resnet18_v1

A script written for horovod.mxnet runs the same with `import horovod.mxnet
as hvd` (--horovod does that, for side-by-side runs under horovodrun).
"""

import argparse
import sys
import timeit

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

parser = argparse.ArgumentParser(description="MXNet synthetic benchmark (plait.mxnet)",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--model", default="resnet18_v1", help="gluon model zoo name")
parser.add_argument("--batch-size", type=int, default=16, help="images per rank per step")
parser.add_argument("--image-size", type=int, default=64, help="height and width of the images")
parser.add_argument("--classes", type=int, default=100, help="output classes")
parser.add_argument("--num-warmup-batches", type=int, default=2, help="untimed steps first")
parser.add_argument("--num-batches-per-iter", type=int, default=5, help="steps per timed iteration")
parser.add_argument("--num-iters", type=int, default=5, help="timed iterations")
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 compression")
parser.add_argument("--num-groups", type=int, default=0, help="DistributedTrainer num_groups")
parser.add_argument("--horovod", action="store_true", help="import horovod.mxnet instead")


def main():
    args = parser.parse_args()
    if args.horovod:
        import horovod.mxnet as hvd
    else:
        import plait.mxnet as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()

    def log(s):
        if rank == 0:
            print(s, flush=True)

    net = gluon.model_zoo.vision.get_model(args.model, classes=args.classes)
    net.initialize(mx.init.Xavier(magnitude=2))
    net.hybridize()
    data = mx.nd.random.uniform(shape=(args.batch_size, 3, args.image_size, args.image_size))
    label = mx.nd.array(np.random.randint(0, args.classes, size=args.batch_size))
    net(data)  # deferred initialisation, so the broadcast sees every parameter
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.01 * size,
                                                     "momentum": 0.9},
                                     compression=compression, num_groups=args.num_groups)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step():
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(args.batch_size)
        mx.nd.waitall()  # the step is over when its updates are

    log("Model: %s" % args.model)
    log("Batch size: %d, image size %d" % (args.batch_size, args.image_size))
    log("Number of ranks: %d (%s)" % (size, "horovod.mxnet" if args.horovod else
                                      "plait.mxnet over %s" % hvd.transport_name()))
    log("Running warmup...")
    timeit.timeit(step, number=args.num_warmup_batches)
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        t = timeit.timeit(step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per rank" % (x, img_sec))
        img_secs.append(img_sec)
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per rank: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
    log("Total img/sec on %d rank(s): %.1f +-%.1f" % (size, size * img_sec_mean,
                                                       size * img_sec_conf))
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
