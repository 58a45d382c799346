#!/usr/bin/env python3
"""Data-parallel Keras training with plait.tensorflow.keras, start to finish:
model.fit with Horovod's DistributedOptimizer and callbacks, each rank on its
own shard of the data (`import plait.tensorflow.keras as hvd`).

    plaitrun -np 2 <python with tensorflow> examples/keras_train.py [--epochs 4]

tf.keras is Keras 3 in TensorFlow 2.16+; with TF_USE_LEGACY_KERAS=1 (and
tf_keras installed) the same script runs on Keras 2. Rank 0 prints the loss
and accuracy of every epoch (averaged over the ranks by
MetricAverageCallback), the learning rate, the throughput and what plait's
fusion did. Every rank starts from different random weights;
BroadcastGlobalVariablesCallback makes them rank 0's. At the end every rank
checks that the weights are bit-for-bit the same on all ranks; the exit
status is non-zero if they differ or if the loss did not go down, so this
script is also a check (ci/demo tensorflow runs it).

The task: points in 32 dimensions, each class a mixture of Gaussian blobs,
classified by an MLP (as examples/torch_train.py).
"""

import argparse
import hashlib
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

import plait  # noqa: E402
import plait.tensorflow.keras as hvd  # noqa: E402

parser = argparse.ArgumentParser(
    description="Train a small Keras network on a generated task with plait.tensorflow.keras",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--epochs", type=int, default=4, help="passes over the training set")
parser.add_argument("--batch-size", type=int, default=64, help="samples per step per rank")
parser.add_argument("--train-samples", type=int, default=8192, help="training set size (all ranks)")
parser.add_argument("--test-samples", type=int, default=2048, help="test set size (all ranks)")
parser.add_argument("--features", type=int, default=32, help="input features")
parser.add_argument("--classes", type=int, default=8, help="classes")
parser.add_argument("--clusters", type=int, default=4, help="Gaussian blobs per class")
parser.add_argument("--noise", type=float, default=1.3, help="standard deviation of each blob")
parser.add_argument("--hidden", type=int, default=128, help="width of the hidden layers")
parser.add_argument("--lr", type=float, default=0.02, help="learning rate for one rank")
parser.add_argument("--warmup-epochs", type=int, default=1, help="learning-rate warmup epochs")
parser.add_argument("--seed", type=int, default=42, help="seed of the generated data")
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 compression of gradients")


def make_dataset(n, args, seed):
    """n samples, identical on every rank for a given seed."""
    rng = np.random.default_rng(args.seed)
    centres = rng.normal(size=(args.classes * args.clusters, args.features))
    rng = np.random.default_rng(seed)
    which = rng.integers(0, len(centres), size=n)
    x = centres[which] + args.noise * rng.normal(size=(n, args.features))
    return x.astype("float32"), (which % args.classes).astype("int32")


def shard(x, y):
    """Rows rank, rank + size, ...: every rank the same number of rows."""
    n = len(x) // hvd.size() * hvd.size()
    return x[hvd.rank():n:hvd.size()], y[hvd.rank():n:hvd.size()]


def make_model(args):
    return keras.Sequential([
        keras.Input((args.features,)),
        keras.layers.Dense(args.hidden, activation="relu"),
        keras.layers.Dense(args.hidden, activation="relu"),
        keras.layers.Dense(args.hidden, activation="relu"),
        keras.layers.Dense(args.classes),
    ])


def weights_digest(model):
    h = hashlib.sha256()
    for w in model.get_weights():
        h.update(np.ascontiguousarray(w).tobytes())
    return h.hexdigest()


def main():
    args = parser.parse_args()
    hvd.init()

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    train_x, train_y = shard(*make_dataset(args.train_samples, args, args.seed + 1))
    test_x, test_y = shard(*make_dataset(args.test_samples, args, args.seed + 2))
    steps = len(train_x) // args.batch_size

    # Different random weights on every rank: the broadcast callback makes them rank 0's.
    keras.utils.set_random_seed(1000 + hvd.rank())
    model = make_model(args)
    # The effective batch is size x batch-size: scale the learning rate (Horovod's advice);
    # the warmup callback starts from lr / size.
    lr = args.lr * hvd.size()
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=0.9),
                                   compression=compression)
    model.compile(optimizer=opt,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=lr, warmup_epochs=args.warmup_epochs,
                                                 verbose=1),
    ]

    if "tf_keras" in type(opt).__module__:
        import tf_keras
        keras_kind = "tf_keras %s" % tf_keras.__version__
    else:
        keras_kind = "Keras %s" % keras.__version__
    log("keras_train: %d ranks (transport %s, plait %s, TensorFlow %s, %s)"
        % (hvd.size(), plait.transport_name(), plait.__version__, tf.__version__, keras_kind))
    log("model: %d weights in %d tensors; data: %d training samples (%d per rank), %d classes; "
        "%d steps of %d per epoch per rank"
        % (model.count_params(), len(model.weights), len(train_x) * hvd.size(), len(train_x),
           args.classes, steps, args.batch_size))

    plait.stats_reset()
    start = time.perf_counter()
    hist = model.fit(train_x, train_y, batch_size=args.batch_size, epochs=args.epochs,
                     steps_per_epoch=steps, callbacks=callbacks, verbose=0, shuffle=True)
    elapsed = time.perf_counter() - start
    losses = hist.history["loss"]
    for e, (loss, acc, lr_e) in enumerate(zip(losses, hist.history["accuracy"],
                                              hist.history["lr"])):
        log("epoch %d: loss %.4f accuracy %.3f lr %.4f" % (e + 1, loss, acc, lr_e))
    test = model.evaluate(test_x, test_y, batch_size=256, verbose=0, return_dict=True)
    test_acc = float(hvd.allreduce(test["accuracy"], name="test_accuracy"))
    samples = args.epochs * steps * args.batch_size * hvd.size()
    log("test accuracy %.3f (all ranks); %.0f samples/s over %d ranks in %.1f s"
        % (test_acc, samples / elapsed, hvd.size(), elapsed))
    s = plait.stats()
    if s.get("responses"):
        log("plait fusion: %d tensors in %d collectives (%.1f tensors per collective), "
            "%d bytes" % (s["tensors"], s["responses"], s["tensors"] / s["responses"],
                          s["bytes"]))

    # Check: the same weights on every rank, bit for bit, and a loss that went down.
    digest = weights_digest(model)
    digests = hvd.allgather(np.frombuffer(bytes.fromhex(digest), dtype=np.uint8).reshape(1, -1))
    same = all(np.array_equal(np.asarray(d), np.asarray(digests)[0]) for d in np.asarray(digests))
    ok = True
    if not same:
        print("keras_train: rank %d: the weights differ between ranks" % hvd.rank(),
              file=sys.stderr)
        ok = False
    if not losses[-1] < losses[0]:
        print("keras_train: rank %d: the loss did not go down (%.4f -> %.4f)"
              % (hvd.rank(), losses[0], losses[-1]), file=sys.stderr)
        ok = False
    if ok:
        log("keras_train: OK: loss %.4f -> %.4f, weights identical on all %d ranks (sha256 %s)"
            % (losses[0], losses[-1], hvd.size(), digest[:16]))
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
