#!/usr/bin/env python3
"""Data-parallel training with plait.tensorflow, start to finish: a custom
TensorFlow 2 training loop with DistributedGradientTape (Horovod's
tensorflow2 examples, with `import plait.tensorflow as hvd`). A small Keras
network learns a generated classification task, each rank training on its
own shard of the data.

    plaitrun -np 2 python examples/tensorflow2_train.py [--epochs 4]

Rank 0 prints the loss and accuracy of every epoch (averaged over the ranks),
the throughput and what plait's fusion did. At the end every rank checks that
the weights are bit-for-bit the same on all ranks; the exit status is non-zero
if they differ or if the loss did not go down, so the script is also a check.
"""

import argparse
import hashlib
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import plait  # noqa: E402
import plait.tensorflow as hvd  # noqa: E402
from plait_fusion_report import fusion_report  # noqa: E402

parser = argparse.ArgumentParser(
    description="Train a small network on a generated task with plait.tensorflow",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--epochs", type=int, default=4, help="passes over the training set")
parser.add_argument("--batch-size", type=int, default=64, help="samples per step per rank")
parser.add_argument("--train-samples", type=int, default=8192, help="training set (all ranks)")
parser.add_argument("--test-samples", type=int, default=2048, help="test set (all ranks)")
parser.add_argument("--features", type=int, default=32, help="input features")
parser.add_argument("--classes", type=int, default=8, help="classes")
parser.add_argument("--hidden", type=int, default=128, help="width of the hidden layers")
parser.add_argument("--lr", type=float, default=0.05, help="learning rate for one rank")
parser.add_argument("--seed", type=int, default=42, help="seed of the generated data")
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 compression")
parser.add_argument("--threads", type=int, default=0,
                    help="TensorFlow intra-op threads per rank (0: cores / ranks on this host)")


def make_dataset(n, args, seed):
    """n samples: each class a mixture of 4 Gaussian blobs (not linearly
    separable), the same on every rank for a given seed."""
    centres = np.random.default_rng(args.seed).standard_normal(
        (args.classes * 4, args.features))
    rng = np.random.default_rng(seed)
    which = rng.integers(0, len(centres), n)
    x = centres[which] + 1.3 * rng.standard_normal((n, args.features))
    return x.astype(np.float32), (which % args.classes).astype(np.int64)


def shard(x, y):
    """Rows rank, rank + size, ...: every rank gets the same number."""
    n = len(x) // hvd.size() * hvd.size()
    return x[hvd.rank():n:hvd.size()], y[hvd.rank():n:hvd.size()]


def weights_digest(model):
    h = hashlib.sha256()
    for v in model.variables:
        h.update(v.numpy().tobytes())
    return h.hexdigest()


def main():
    args = parser.parse_args()
    hvd.init()
    threads = args.threads or max(1, (os.cpu_count() or 1) // hvd.local_size())
    tf.config.threading.set_intra_op_parallelism_threads(threads)

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    train_x, train_y = shard(*make_dataset(args.train_samples, args, args.seed + 1))
    test_x, test_y = shard(*make_dataset(args.test_samples, args, args.seed + 2))
    steps_per_epoch = len(train_x) // args.batch_size

    tf.random.set_seed(1000 + hvd.rank())  # different initial weights on each rank
    model = tf.keras.Sequential([
        tf.keras.Input((args.features,)),
        tf.keras.layers.Dense(args.hidden, activation="relu"),
        tf.keras.layers.Dense(args.hidden, activation="relu"),
        tf.keras.layers.Dense(args.classes)])
    # Horovod: scale the learning rate by the number of ranks.
    opt = tf.keras.optimizers.SGD(args.lr * hvd.size(), momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        # Horovod: wrap the tape; gradient() returns the averaged gradients.
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # Horovod: start every rank from rank 0's weights.
    hvd.broadcast_variables(model.variables, root_rank=0)
    log("tensorflow2_train: %d ranks (transport %s, plait %s, TensorFlow %s, %d thread(s) "
        "per rank); %d weights in %d tensors; %d steps of %d per epoch per rank"
        % (hvd.size(), hvd.transport_name(), plait.__version__, tf.__version__, threads,
           sum(int(np.prod(v.shape)) for v in model.trainable_variables),
           len(model.trainable_variables), steps_per_epoch, args.batch_size))

    plait.stats_reset()
    losses = []
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        order = np.random.default_rng(epoch * 1000 + hvd.rank()).permutation(len(train_x))
        total = 0.0
        for step in range(steps_per_epoch):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            total += float(train_step(tf.constant(train_x[idx]), tf.constant(train_y[idx])))
        elapsed = time.perf_counter() - t0
        pred = np.argmax(model(test_x, training=False).numpy(), axis=1)
        correct = int(hvd.allreduce(tf.constant(int((pred == test_y).sum())), op=hvd.Sum,
                                    name="correct"))
        train_loss = float(hvd.allreduce(tf.constant(total / steps_per_epoch), name="loss"))
        losses.append(train_loss)
        log("epoch %d/%d: train loss %.4f, test accuracy %.1f%%, %.0f samples/s (all ranks), "
            "%.2f s" % (epoch, args.epochs, train_loss,
                        100.0 * correct / (len(test_x) * hvd.size()),
                        steps_per_epoch * args.batch_size * hvd.size() / elapsed, elapsed))
    elapsed = time.perf_counter() - start
    stats = plait.stats()
    steps = steps_per_epoch * args.epochs
    log("trained %d steps in %.1f s: %.2f ms per step" % (steps, elapsed, 1e3 * elapsed / steps))
    log("plait fusion statistics, rank 0, over the training steps:")
    for line in fusion_report(stats, steps):
        log("  " + line)

    digests = hvd.allgather_object(weights_digest(model))
    same = all(d == digests[0] for d in digests)
    decreased = losses[-1] < losses[0]
    if same:
        log("weights identical on all %d ranks (sha256 %s)" % (hvd.size(), digests[0][:16]))
    else:
        print("rank %d: weights differ across ranks: %s" % (hvd.rank(), digests),
              file=sys.stderr, flush=True)
    if decreased:
        log("loss went down: %.4f -> %.4f" % (losses[0], losses[-1]))
    else:
        print("rank %d: loss did not go down: %s" % (hvd.rank(), losses), file=sys.stderr)
    hvd.shutdown()
    return 0 if same and decreased else 1


if __name__ == "__main__":
    sys.exit(main())
