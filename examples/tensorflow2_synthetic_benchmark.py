#!/usr/bin/env python3
"""Synthetic training benchmark with plait.tensorflow, in the style of
Horovod's tensorflow2_synthetic_benchmark.py: a real Keras model, random
data, DistributedGradientTape inside tf.function; prints images/sec per rank
and in total, then what plait's fusion did.

    plaitrun -np 2 python examples/tensorflow2_synthetic_benchmark.py
    plaitrun -np 2 python examples/tensorflow2_synthetic_benchmark.py --model ResNet50 \\
        --image-size 224 --batch-size 32          # Horovod's default (slow on a few cores)

A Horovod script becomes a plait one by changing its import; everything
below `import plait.tensorflow as hvd` is Horovod's API, except the
statistics at the end (plait.stats()).
"""

import argparse
import os
import sys
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import plait  # noqa: E402
import plait.tensorflow as hvd  # noqa: E402
from plait_fusion_report import fusion_report  # noqa: E402

parser = argparse.ArgumentParser(
    description="TensorFlow synthetic benchmark on plait",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--model", type=str, default="convnet",
                    help="convnet (a small ResNet: 3 stages of residual blocks, many small "
                         "gradient tensors) or any tf.keras.applications model (ResNet50, ...)")
parser.add_argument("--image-size", type=int, default=32, help="images are N x N x 3")
parser.add_argument("--classes", type=int, default=10, help="classes")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size per rank")
parser.add_argument("--num-warmup-batches", type=int, default=3,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=10,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=5, help="number of benchmark iterations")
parser.add_argument("--eager", action="store_true", default=False,
                    help="run the step eagerly instead of in a tf.function")
parser.add_argument("--threads", type=int, default=0,
                    help="TensorFlow intra-op threads per rank (0: cores / ranks on this host)")


def convnet(size, classes):
    """A small ResNet: a stem, 3 stages of 2 residual blocks (16, 32, 64
    channels) with batch normalization, global pooling, a dense head."""
    L = tf.keras.layers
    inputs = tf.keras.Input((size, size, 3))
    x = L.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = L.ReLU()(L.BatchNormalization()(x))
    for stage, ch in enumerate([16, 32, 64]):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = L.Conv2D(ch, 3, strides=stride, padding="same", use_bias=False)(x)
            y = L.ReLU()(L.BatchNormalization()(y))
            y = L.Conv2D(ch, 3, padding="same", use_bias=False)(y)
            y = L.BatchNormalization()(y)
            if stride != 1 or x.shape[-1] != ch:
                x = L.BatchNormalization()(L.Conv2D(ch, 1, strides=stride, use_bias=False)(x))
            x = L.ReLU()(L.Add()([x, y]))
    x = L.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, L.Dense(classes)(x))


def main():
    args = parser.parse_args()
    hvd.init()
    threads = args.threads or max(1, (os.cpu_count() or 1) // hvd.local_size())
    tf.config.threading.set_intra_op_parallelism_threads(threads)

    if args.model == "convnet":
        model = convnet(args.image_size, args.classes)
    else:
        model = getattr(tf.keras.applications, args.model)(
            weights=None, input_shape=(args.image_size, args.image_size, 3),
            classes=args.classes)
    opt = tf.keras.optimizers.SGD(0.01)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    rng = np.random.default_rng(hvd.rank())
    data = tf.constant(rng.random((args.batch_size, args.image_size, args.image_size, 3),
                                  dtype=np.float32))
    target = tf.constant(rng.integers(0, args.classes, (args.batch_size,)))

    def benchmark_step(first_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(data, training=True))
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        # Horovod: broadcast after the first step, once the optimizer's
        # variables exist, so every rank starts from rank 0's state.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)

    step = benchmark_step if args.eager else tf.function(benchmark_step)

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    log("Model: %s (%d weights in %d tensors)" % (
        args.model, sum(int(np.prod(v.shape)) for v in model.trainable_variables),
        len(model.trainable_variables)))
    log("Batch size: %d, image %dx%d" % (args.batch_size, args.image_size, args.image_size))
    log("Number of ranks: %d (transport %s, TensorFlow %s, %s)"
        % (hvd.size(), hvd.transport_name(), tf.__version__,
           "eager" if args.eager else "tf.function"))

    step(True)
    log("Running warmup...")
    timeit.timeit(lambda: step(False), number=args.num_warmup_batches)
    log("Running benchmark...")
    plait.stats_reset()
    img_secs = []
    for x in range(args.num_iters):
        t = timeit.timeit(lambda: step(False), number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per rank" % (x, img_sec))
        img_secs.append(img_sec)
    stats = plait.stats()
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per rank: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
    log("Total img/sec on %d rank(s): %.1f +-%.1f"
        % (hvd.size(), hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))
    steps = args.num_iters * args.num_batches_per_iter
    log("plait fusion statistics, rank 0, over the %d timed steps:" % steps)
    for line in fusion_report(stats, steps):
        log("  " + line)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
