#!/usr/bin/env python3
"""Horovod's elastic Keras MNIST example
(horovod/horovod examples/elastic/tensorflow2/tensorflow2_keras_mnist_elastic.py)
in its shape and elastic calls, written for plait: the import is
`import plait.tensorflow.keras as hvd`; the images are generated (28x28,
10 classes) since the tests run without a network to download MNIST from.
What it asks of the elastic API is Horovod's example's, call for call: a
`DistributedOptimizer(backward_passes_per_step=1,
average_aggregated_gradients=True)`, one `model.fit` step to make the
optimizer's variables before the state, `hvd.elastic.KerasState(model,
batch=0, epoch=0)`, a reset callback that sets the learning rate for the new
size and fits one step, the three elastic callbacks, and `@hvd.elastic.run`
around `model.fit(steps_per_epoch=500 // hvd.size(), epochs=24 - state.epoch)`
(--steps and --epochs make it shorter).

    plaitrun -np 3 --min-np 2 --max-np 3 --host-discovery-script ./hosts.sh \\
        <python with tensorflow> tests/faults/elastic/horovod/tensorflow2_keras_mnist_elastic.py
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import plait.tensorflow.keras as hvd  # noqa: E402

parser = argparse.ArgumentParser(description="Tensorflow 2.0 Keras MNIST Example")
parser.add_argument("--use-mixed-precision", action="store_true", default=False,
                    help="use mixed precision for training")
parser.add_argument("--steps", type=int, default=500, help="steps per epoch, all workers")
parser.add_argument("--epochs", type=int, default=24, help="epochs")
args = parser.parse_args()

if args.use_mixed_precision:
    tf.keras.mixed_precision.set_global_policy("mixed_float16")

hvd.init()

gpus = tf.config.experimental.list_physical_devices("GPU")
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")

rng = np.random.default_rng(hvd.rank())
mnist_labels = rng.integers(0, 10, size=2048)
mnist_images = (rng.random((2048, 28, 28)) * 64 + mnist_labels[:, None, None] * 19).astype("uint8")

dataset = tf.data.Dataset.from_tensor_slices(
    (tf.cast(mnist_images[..., tf.newaxis] / 255.0, tf.float32),
     tf.cast(mnist_labels, tf.int64)))
dataset = dataset.repeat().shuffle(10000).batch(128)

model = tf.keras.Sequential([
    tf.keras.Input((28, 28, 1)),
    tf.keras.layers.Conv2D(8, [3, 3], activation="relu"),
    tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
    tf.keras.layers.Dropout(0.25),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(32, activation="relu"),
    tf.keras.layers.Dropout(0.5),
    tf.keras.layers.Dense(10, activation="softmax"),
])

scaled_lr = 0.001 * hvd.size()
opt = tf.optimizers.Adam(scaled_lr)
opt = hvd.DistributedOptimizer(opt, backward_passes_per_step=1,
                               average_aggregated_gradients=True)
model.compile(loss=tf.losses.SparseCategoricalCrossentropy(), optimizer=opt,
              metrics=["accuracy"])

# the optimizer's variables, so that the state can sync them (Horovod's way)
model.fit(dataset, steps_per_epoch=1, epochs=1, callbacks=None, verbose=0)

state = hvd.elastic.KerasState(model, batch=0, epoch=0)


def on_state_reset():
    state.model.optimizer.learning_rate.assign(0.001 * hvd.size())
    state.model.fit(dataset, steps_per_epoch=1, epochs=1, callbacks=None, verbose=0)


state.register_reset_callbacks([on_state_reset])

callbacks = [
    hvd.elastic.UpdateEpochStateCallback(state),
    hvd.elastic.UpdateBatchStateCallback(state),
    hvd.elastic.CommitStateCallback(state),
]


@hvd.elastic.run
def train(state):
    state.model.fit(dataset, steps_per_epoch=max(1, args.steps // hvd.size()),
                    epochs=args.epochs - state.epoch, callbacks=callbacks,
                    verbose=2 if hvd.rank() == 0 else 0)


train(state)
if hvd.rank() == 0:
    print("trained %d epochs, the last ones on %d workers" % (args.epochs, hvd.size()), flush=True)
