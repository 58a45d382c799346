"""plait.tensorflow.elastic in TF1 graph mode (eager execution disabled):
TensorFlowState with a session and TensorFlowKerasState with tf_keras's
backend; sync, commit and restore across 2 ranks. Eager execution is off for
the whole process, so this file runs in a pytest session of its own
(python_tf_keras2_elastic_graph2; its name keeps it out of the eager ones).

Run: TF_USE_LEGACY_KERAS=1 plaitrun -np 2 <tf venv python> -m pytest -x \\
     tests/bindings/tensorflow/elastic/tf1_graph_elastic.py
"""

import numpy as np
import pytest
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

import plait.tensorflow as hvd  # noqa: E402
from tensorflow import keras  # noqa: E402

hvd.init()
RANK = hvd.rank()
K = tf.compat.v1.keras.backend


def test_tensorflow_state_with_a_session():
    # A graph of its own: the Keras test below syncs all global variables.
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        v = tf.compat.v1.Variable(np.full((2,), RANK + 1.0, np.float32))
        sess.run(v.initializer)
        state = hvd.elastic.TensorFlowState([v], session=sess, epoch=RANK)
        state.sync()
        np.testing.assert_array_equal(sess.run(v), [1.0, 1.0])
        assert state.epoch == 0
        v.load([5.0, 6.0], sess)
        state.epoch = 2
        state.commit()
        v.load([9.0, 9.0], sess)
        state.epoch = 3
        state.restore()
        np.testing.assert_array_equal(sess.run(v), [5.0, 6.0])
        assert state.epoch == 2


def test_tensorflow_state_needs_a_session_in_graph_mode():
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable([1.0])
        with pytest.raises(ValueError, match="pass session="):
            hvd.elastic.TensorFlowState([v])


def test_keras_state_through_the_backends_session():
    m = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    opt = keras.optimizers.legacy.SGD(0.1)
    m.compile(optimizer=opt, loss="mse")
    m.set_weights([np.full((3, 2), RANK + 1.0), np.full((2,), RANK + 1.0)])
    state = hvd.elastic.TensorFlowKerasState(m, opt, backend=K, batch=RANK)
    state.sync()
    assert state.batch == 0
    np.testing.assert_array_equal(m.get_weights()[1], [1.0, 1.0])
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    m.fit(x, y, verbose=0)
    state.commit()
    committed = m.get_weights()
    m.fit(x, y, verbose=0)
    assert not np.array_equal(m.get_weights()[1], committed[1])
    state.restore()
    for got, want in zip(m.get_weights(), committed):
        np.testing.assert_array_equal(got, want)


def test_keras_state_needs_the_backend_in_graph_mode():
    m = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    with pytest.raises(ValueError, match="pass backend="):
        hvd.elastic.TensorFlowKerasState(m, keras.optimizers.legacy.SGD(0.1))
