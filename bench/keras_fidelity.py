#!/usr/bin/env python3
"""Does Keras data-parallel training work? The same check with plait and with
Horovod, on Keras 3 (tf.keras in TensorFlow 2.16+) or on tf_keras
(TF_USE_LEGACY_KERAS=1): prints facts, not timings.

    plaitrun -np 2 <tf python> bench/keras_fidelity.py --impl plait
    horovodrun -np 2 -H localhost:2 --gloo <horovod tf python> \
        bench/keras_fidelity.py --impl horovod

Each rank starts from different random weights and fits its own shard of the
data, with DistributedOptimizer and BroadcastGlobalVariablesCallback(0) as
Horovod's documentation has it. Printed by rank 0, one line each:
  broadcast_callback: ok, or the exception it raised;
  optimizer_reduces: whether fit's weights are those of one process on the
    concatenated batches (max difference), the proof that gradients were
    averaged; run from identical weights without the broadcast callback, so
    that it is judged alone;
  ranks_identical: whether every rank ends with the same weights (bytes).
The exit status is 0 whatever the answers (a report, not a test).
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--impl", choices=["plait", "horovod"], required=True)
args = parser.parse_args()

if args.impl == "plait":
    import plait.tensorflow as hvd_tf
    import plait.tensorflow.keras as hvd
else:
    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.keras as hvd

hvd.init()
R, N, B, STEPS = hvd.rank(), hvd.size(), 8, 6
rng = np.random.default_rng(1)
X = rng.normal(size=(STEPS * N * B, 8)).astype("float32")
Y = (X @ rng.normal(size=(8, 1))).astype("float32")
idx = np.concatenate([np.arange(k * N * B + R * B, k * N * B + (R + 1) * B) for k in range(STEPS)])


def model(seed):
    m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(6, activation="tanh"),
                          keras.layers.Dense(1)])
    g = np.random.default_rng(seed)
    m.set_weights([g.normal(size=w.shape).astype("float32") for w in m.get_weights()])
    return m


def gathered(m):
    flat = np.concatenate([w.reshape(-1) for w in m.get_weights()]).reshape(1, -1)
    return np.asarray(hvd_tf.allgather(tf.constant(flat)))


def say(s):
    if R == 0:
        print(s, flush=True)


LEGACY = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
if LEGACY:
    import tf_keras
    KERAS_VERSION = "tf_keras %s" % tf_keras.__version__
else:
    KERAS_VERSION = "Keras %s" % keras.__version__
say("keras_fidelity: impl=%s, %d ranks, TensorFlow %s, tf.keras is %s" % (
    args.impl, N, tf.__version__, KERAS_VERSION))

# 1. BroadcastGlobalVariablesCallback, from different weights on each rank.
m = model(100 + R)
m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.0)), loss="mse")
try:
    m.fit(X[idx], Y[idx], batch_size=B, shuffle=False, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    g = gathered(m)
    say("broadcast_callback: %s" % ("ok (all ranks hold rank 0's weights)"
                                    if all(np.array_equal(g[i], g[0]) for i in range(N))
                                    else "ran, but the ranks' weights still differ"))
except Exception as e:  # noqa: BLE001 - the report says what happened
    say("broadcast_callback: FAILS: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:150]))

# 2. DistributedOptimizer alone, from identical weights.
m = model(7)
try:
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
    m.fit(X[idx], Y[idx], batch_size=B, epochs=2, shuffle=False, verbose=0)
    ref = model(7)
    ref.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    ref.fit(X, Y, batch_size=B * N, epochs=2, shuffle=False, verbose=0)
    diff = max(float(np.abs(a - b).max()) for a, b in zip(m.get_weights(), ref.get_weights()))
    solo = model(7)
    solo.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    solo.fit(X[idx], Y[idx], batch_size=B, epochs=2, shuffle=False, verbose=0)
    solo_diff = max(float(np.abs(a - b).max())
                    for a, b in zip(solo.get_weights(), ref.get_weights()))
    say("optimizer_reduces: %s (max |w - w_one_process| = %.3g; training alone would give %.3g)"
        % ("yes" if diff < 1e-4 else "NO", diff, solo_diff))
    g = gathered(m)
    same = all(np.array_equal(g[i], g[0]) for i in range(N))
    spread = float(np.abs(g - g[0]).max())
    say("ranks_identical: %s (max difference between ranks %.3g)" % ("yes" if same else "NO",
                                                                     spread))
except Exception as e:  # noqa: BLE001
    say("optimizer: FAILS: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:150]))
sys.exit(0)
