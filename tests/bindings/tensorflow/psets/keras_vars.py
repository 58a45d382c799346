"""A variable the optimizer of the Keras in use (Keras 3 or tf_keras) updates."""

import os

import tensorflow as tf


def make_var(value, name):
    if os.environ.get("TF_USE_LEGACY_KERAS", "0") not in ("", "0", "false", "False"):
        return tf.Variable(value, name=name)
    import keras
    return keras.Variable(value, name=name)
