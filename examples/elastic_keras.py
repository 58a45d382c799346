#!/usr/bin/env python3
"""Elastic Keras training with plait: model.fit goes on while workers die,
leave or join (docs/elastic.md), on Keras 3 or, with TF_USE_LEGACY_KERAS=1,
on tf_keras.

    plaitrun -np 3 --min-np 2 --max-np 3 -H 127.0.0.1:1,127.0.0.2:1,127.0.0.3:1 \\
        <python with tensorflow> examples/elastic_keras.py

Horovod's elastic Keras API with `import plait.tensorflow.keras as hvd`
(`import plait.keras as hvd` is the same for Keras 3): a `KerasState` holds
the model (and its optimizer) and the epoch and batch counters; the
callbacks keep them current (`UpdateEpochStateCallback`,
`UpdateBatchStateCallback`) and commit the state every few batches
(`CommitStateCallback`); `hvd.elastic.run` restarts `model.fit` from the last
commit after a worker is lost, or from where it was when hosts were added or
removed, on the new set of workers, with the learning rate scaled to it (a
reset callback).

Each worker trains on its shard of a generated task (rows rank, rank +
size, ... of the current job: the shards change with the workers). At the
end every rank checks that it holds the same weights as the others, and
rank 0 that the loss went down; the exit status says whether they did.
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

import plait.tensorflow as hvd_tf  # noqa: E402  (allgather_object)
import plait.tensorflow.keras as hvd  # noqa: E402

parser = argparse.ArgumentParser(
    description="Elastic Keras training with plait.tensorflow.keras",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--epochs", type=int, default=6, help="epochs")
parser.add_argument("--steps", type=int, default=24, help="steps per epoch (all workers together)")
parser.add_argument("--batch-size", type=int, default=32, help="samples per step per worker")
parser.add_argument("--batches-per-commit", type=int, default=4, help="commit every N batches")
parser.add_argument("--samples", type=int, default=4096, help="training samples (all workers)")
parser.add_argument("--features", type=int, default=16, help="input features")
parser.add_argument("--classes", type=int, default=4, help="classes")
parser.add_argument("--hidden", type=int, default=64, help="width of the hidden layers")
parser.add_argument("--lr", type=float, default=0.02, help="learning rate for one worker")
parser.add_argument("--seed", type=int, default=7, help="seed of the data and the first weights")
parser.add_argument("--step-delay", type=float, default=0.0,
                    help="seconds each step sleeps (a slower job, to watch it or break it)")


def say(text):
    print(text, flush=True)


def make_data(args):
    rng = np.random.default_rng(args.seed)
    centres = rng.normal(size=(args.classes, args.features)) * 2
    y = rng.integers(0, args.classes, size=args.samples)
    x = centres[y] + rng.normal(size=(args.samples, args.features))
    return x.astype("float32"), y.astype("int32")


def make_model(args):
    keras.utils.set_random_seed(args.seed)
    return keras.Sequential([
        keras.Input((args.features,)),
        keras.layers.Dense(args.hidden, activation="tanh"),
        keras.layers.Dense(args.hidden, activation="tanh"),
        keras.layers.Dense(args.classes),
    ])


def build_optimizer(model):
    """The optimizer's variables, made without a collective (no collective may
    run before hvd.elastic.run: a joining worker would run it alone)."""
    opt = model.optimizer
    if hasattr(opt, "build"):
        opt.build(model.trainable_variables)  # Keras 3
    else:
        opt._create_all_weights(model.trainable_variables)  # tf_keras


def weights_digest(model):
    h = hashlib.sha256()
    for w in model.get_weights():
        h.update(np.ascontiguousarray(w).tobytes())
    return h.hexdigest()


class Delay(keras.callbacks.Callback):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.seconds)


class Progress(keras.callbacks.Callback):
    """Rank 0's line per epoch; every epoch's loss kept for the check."""

    def __init__(self, losses):
        super().__init__()
        self.losses = losses

    def on_epoch_end(self, epoch, logs=None):
        loss = float((logs or {}).get("loss", float("nan")))
        self.losses.append(loss)
        if hvd.rank() == 0:
            say("epoch %d: loss %.4f on %d workers" % (epoch, loss, hvd.size()))


def main():
    args = parser.parse_args()
    hvd.init()
    x, y = make_data(args)
    model = make_model(args)
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(args.lr * hvd.size(), momentum=0.9))
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    build_optimizer(model)
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    losses = []

    def on_reset():
        state.model.optimizer.learning_rate.assign(args.lr * hvd.size())
        say("reset: now rank %d of %d" % (hvd.rank(), hvd.size()))

    state.register_reset_callbacks([on_reset])
    callbacks = [
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.CommitStateCallback(state, batches_per_commit=args.batches_per_commit),
        Progress(losses),
    ]
    if args.step_delay:
        callbacks.append(Delay(args.step_delay))

    @hvd.elastic.run
    def train(state):
        say("elastic worker %s pid %d: rank %d of %d, epoch %d"
            % (os.environ.get("PLAIT_ELASTIC_WORKER", "-"), os.getpid(), hvd.rank(), hvd.size(),
               state.epoch))
        n = len(x) // hvd.size() * hvd.size()
        shard = (x[hvd.rank():n:hvd.size()], y[hvd.rank():n:hvd.size()])
        data = tf.data.Dataset.from_tensor_slices(shard).repeat().batch(args.batch_size)
        state.model.fit(data, steps_per_epoch=max(1, args.steps // hvd.size()),
                        initial_epoch=state.epoch, epochs=args.epochs, callbacks=callbacks,
                        verbose=0)
        digests = hvd_tf.allgather_object(weights_digest(state.model))
        return digests

    digests = train(state)
    mine = weights_digest(model)
    if any(d != mine for d in digests):
        say("FAILED: rank %d: the weights differ between ranks" % hvd.rank())
        return 1
    if hvd.rank() == 0:
        if len(losses) < 2 or not losses[-1] < losses[0]:
            say("FAILED: the loss did not go down: %s" % losses)
            return 1
        say("loss %.4f -> %.4f; the same weights on all %d ranks (sha256 %s)"
            % (losses[0], losses[-1], hvd.size(), mine[:16]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
