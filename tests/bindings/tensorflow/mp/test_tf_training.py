"""DistributedGradientTape, PartialDistributedGradientTape and the TF1
DistributedOptimizer train to the weights one process reaches on the
concatenated batch, and every rank ends bit-identical; fusion happens
inside tf.function (plait.stats shows several tensors per collective)."""

import numpy as np
import pytest
import tensorflow as tf

import plait
import plait.tensorflow as hvd

LAYERS = [(6, 8), (8, 8), (8, 8), (8, 1)]
BATCH = 4  # rows per rank
STEPS = 5
LR = 0.05


def data(n):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((BATCH * n, LAYERS[0][0]))
    y = rng.standard_normal((BATCH * n, 1))
    return x, y


def init_weights(seed):
    rng = np.random.default_rng(seed)
    ws = []
    for a, b in LAYERS:
        ws.append(rng.standard_normal((a, b)) * 0.5)
        ws.append(rng.standard_normal((b,)) * 0.1)
    return ws


def forward(vs, x):
    h = x
    for i in range(0, len(vs), 2):
        h = tf.matmul(h, vs[i]) + vs[i + 1]
        if i + 2 < len(vs):
            h = tf.tanh(h)
    return h


def loss_fn(vs, x, y):
    return tf.reduce_mean(tf.square(forward(vs, x) - y))


def reference(n, lr=LR):
    """One process, the concatenated batch, plain SGD, float64."""
    x, y = data(n)
    vs = [tf.Variable(w) for w in init_weights(0)]
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(vs, x, y)
        for v, g in zip(vs, tape.gradient(loss, vs)):
            v.assign_sub(lr * g)
    return [v.numpy() for v in vs]


def check_identical(vs):
    """Every rank's weights equal rank 0's, bit for bit."""
    for i, v in enumerate(vs):
        b = hvd.broadcast(tf.constant(v), 0, name="check.%d" % i).numpy()
        assert np.array_equal(b.view(np.uint8), np.asarray(v).view(np.uint8)), \
            "weights %d differ between rank 0 and rank %d" % (i, hvd.rank())


@pytest.mark.parametrize("in_function", [False, True], ids=["eager", "function"])
def test_distributed_gradient_tape_matches_one_process(hvd, in_function):
    n, r = hvd.size(), hvd.rank()
    x, y = data(n)
    xr, yr = x[r * BATCH:(r + 1) * BATCH], y[r * BATCH:(r + 1) * BATCH]
    vs = [tf.Variable(w) for w in init_weights(100 + r)]  # different on every rank
    hvd.broadcast_variables(vs, root_rank=0)
    if r != 0:
        # rank 0 started from seed 100; the reference from seed 0: restart all
        for v, w in zip(vs, init_weights(0)):
            v.assign(w)
    else:
        for v, w in zip(vs, init_weights(0)):
            v.assign(w)

    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(vs, xb, yb)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, vs)
        for v, g in zip(vs, grads):
            v.assign_sub(LR * g)
        return loss
    if in_function:
        step = tf.function(step)
    for _ in range(STEPS):
        step(tf.constant(xr), tf.constant(yr))
    got = [v.numpy() for v in vs]
    for i, (g, w) in enumerate(zip(got, reference(n))):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, err_msg="weight %d" % i)
    check_identical(got)


def test_broadcast_variables_syncs_different_starts(hvd):
    r = hvd.rank()
    vs = [tf.Variable(w) for w in init_weights(100 + r)]
    hvd.broadcast_variables(vs, root_rank=0)
    for v, w in zip(vs, init_weights(100)):
        assert np.array_equal(v.numpy(), w)


def test_fusion_inside_tf_function(hvd):
    """A model with many small gradients: the tape's allreduces run as one
    tf.function, all in flight at once, and plait fuses them."""
    vs = [tf.Variable(tf.ones([16]) * i) for i in range(24)]

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.add_n([tf.reduce_sum(v * v) for v in vs])
        grads = hvd.DistributedGradientTape(tape).gradient(loss, vs)
        for v, g in zip(vs, grads):
            v.assign_sub(0.01 * g)
    step()  # trace, negotiate, fill the response cache
    hvd.barrier()
    before = plait.stats()
    for _ in range(5):
        step()
    hvd.barrier()
    after = plait.stats()
    tensors = after["tensors"] - before["tensors"]
    responses = after["responses"] - before["responses"]
    fused = after["fused_tensors"] - before["fused_tensors"]
    print("fusion: %d tensors in %d collectives (%d fused)" % (tensors, responses, fused))
    assert tensors >= 5 * 24
    assert fused >= 2 * 5 and tensors / responses > 2, (tensors, responses, fused)


def test_partial_distributed_gradient_tape(hvd):
    """A local source keeps its own gradient, divided by size
    (scale_local_gradients); the others are averaged."""
    n, r = hvd.size(), hvd.rank()
    shared = tf.Variable([1.0, 2.0], dtype=tf.float64)
    local = tf.Variable([3.0], dtype=tf.float64)
    with tf.GradientTape() as tape:
        loss = (r + 1) * (tf.reduce_sum(shared) + tf.reduce_sum(local))
    tape = hvd.DistributedGradientTape(tape)
    tape.register_local_source(local)
    gs, gl = tape.gradient(loss, [shared, local])
    np.testing.assert_allclose(gs.numpy(), [(n + 1) / 2.0] * 2)
    np.testing.assert_allclose(gl.numpy(), [(r + 1) / n])

    class Layer:  # what PartialDistributedGradientTape reads of a Keras layer
        trainable_weights = [local]
    with tf.GradientTape() as tape:
        loss = (r + 1) * (tf.reduce_sum(shared) + tf.reduce_sum(local))
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=Layer(),
                                              scale_local_gradients=False)
    local_pairs, global_pairs = tape.get_local_and_global_gradients(loss, [shared, local])
    assert [v for v, _ in local_pairs] == [local] and [v for v, _ in global_pairs] == [shared]
    np.testing.assert_allclose(local_pairs[0][1].numpy(), [r + 1.0])
    np.testing.assert_allclose(global_pairs[0][1].numpy(), [(n + 1) / 2.0] * 2)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_tape_sparse_gradients(hvd, sparse_as_dense):
    n, r = hvd.size(), hvd.rank()
    emb = tf.Variable(tf.zeros([n, 2], tf.float32))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(emb, [r]) * float(r + 1))
    g, = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense).gradient(loss, [emb])
    assert isinstance(g, tf.IndexedSlices) != sparse_as_dense
    dense = tf.convert_to_tensor(g).numpy()
    want = np.array([[k + 1.0] * 2 for k in range(n)], np.float32) / np.float32(n)
    np.testing.assert_allclose(dense, want, rtol=1e-6)


def test_tf1_distributed_optimizer_graph(hvd):
    """TF1 graph and session: DistributedOptimizer(GradientDescentOptimizer)
    trains to the one-process weights; BroadcastGlobalVariablesHook-like
    broadcast_global_variables first."""
    n, r = hvd.size(), hvd.rank()
    x, y = data(n)
    xr, yr = x[r * BATCH:(r + 1) * BATCH], y[r * BATCH:(r + 1) * BATCH]
    with tf.Graph().as_default():
        vs = [tf.compat.v1.Variable(w) for w in init_weights(0 if r == 0 else 100 + r)]
        loss = loss_fn(vs, tf.constant(xr), tf.constant(yr))
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(LR))
        train = opt.minimize(loss, var_list=vs)
        bcast = hvd.broadcast_global_variables(0)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(bcast)
            for _ in range(STEPS):
                sess.run(train)
            got = sess.run(vs)
    # The TF1 optimizer turns the learning rate into a float32 tensor first.
    for i, (g, w) in enumerate(zip(got, reference(n, float(np.float32(LR))))):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, err_msg="weight %d" % i)
    check_identical(got)


def test_tf1_backward_passes_per_step(hvd):
    """backward_passes_per_step=2 with average_aggregated_gradients: two
    passes over the same batch apply their averaged gradient once, so 2 x
    STEPS passes reach the one-process weights of STEPS steps."""
    n, r = hvd.size(), hvd.rank()
    x, y = data(n)
    xr, yr = x[r * BATCH:(r + 1) * BATCH], y[r * BATCH:(r + 1) * BATCH]
    with tf.Graph().as_default():
        vs = [tf.compat.v1.Variable(w) for w in init_weights(0)]
        loss = loss_fn(vs, tf.constant(xr), tf.constant(yr))
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(LR),
                                       backward_passes_per_step=2,
                                       average_aggregated_gradients=True)
        train = opt.minimize(loss, var_list=vs)
        with tf.compat.v1.Session() as sess:
            sess.run([tf.compat.v1.global_variables_initializer(),
                      tf.compat.v1.local_variables_initializer()])
            for _ in range(2 * STEPS):
                sess.run(train)
            got = sess.run(vs)
    for i, (g, w) in enumerate(zip(got, reference(n, float(np.float32(LR))))):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, err_msg="weight %d" % i)
    check_identical(got)


def test_keras3_variables_broadcast_and_tape(hvd):
    """Keras 3 variables (tf.keras in TF 2.21) with broadcast_variables and
    DistributedGradientTape inside tf.function: ranks that start apart end
    identical."""
    r = hvd.rank()
    model = tf.keras.Sequential([tf.keras.Input((6,)), tf.keras.layers.Dense(8, activation="tanh"),
                                 tf.keras.layers.Dense(1)])
    for i, v in enumerate(model.variables):
        v.assign(tf.fill(v.shape, float(r + i)))
    hvd.broadcast_variables(model.variables, root_rank=0)
    for i, v in enumerate(model.variables):
        assert np.all(v.numpy() == float(i)), (i, v.numpy())
    opt = tf.keras.optimizers.SGD(0.01)
    x, y = data(hvd.size())

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(xb) - yb))
        grads = hvd.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    for _ in range(3):
        step(tf.constant(x[r::hvd.size()], tf.float32), tf.constant(y[r::hvd.size()], tf.float32))
    check_identical([v.numpy() for v in model.variables])


def test_sync_batch_normalization(hvd):
    """In training, SyncBatchNormalization normalizes with the mean and
    variance of every rank's batch together: each rank's output equals its
    rows of a plain BatchNormalization over the concatenated batch."""
    n, r = hvd.size(), hvd.rank()
    rng = np.random.default_rng(3)
    full = rng.standard_normal((4 * n, 5)).astype(np.float32) * 3 + 1
    mine = full[4 * r:4 * (r + 1)]
    sync = hvd.SyncBatchNormalization(axis=-1, epsilon=1e-3)
    plain = tf.keras.layers.BatchNormalization(axis=-1, epsilon=1e-3)
    got = sync(tf.constant(mine), training=True).numpy()
    want = plain(tf.constant(full), training=True).numpy()[4 * r:4 * (r + 1)]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError):
        hvd.SyncBatchNormalization(fused=True)


@pytest.mark.parametrize("groups", ["count", "list"])
@pytest.mark.parametrize("in_function", [False, True], ids=["eager", "function"])
def test_tape_groups(hvd, groups, in_function):
    """groups=2 or a list of variable lists (Keras 3 variables too): the
    gradients are allreduced in grouped allreduces, with the same result."""
    n, r = hvd.size(), hvd.rank()
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2),
                                 tf.keras.layers.Dense(1)])
    hvd.broadcast_variables(model.variables, root_rank=0)
    vs = model.trainable_variables
    g_arg = 2 if groups == "count" else [[vs[0], vs[3]], [vs[1]]]

    def grads():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(tf.ones([1, 3]) * (r + 1)))
        return hvd.DistributedGradientTape(tape, groups=g_arg).gradient(loss, vs)
    fn = tf.function(grads) if in_function else grads
    got = [g.numpy() for g in fn()]
    with tf.GradientTape() as tape:
        loss = tf.add_n([tf.reduce_sum(model(tf.ones([1, 3]) * (k + 1))) for k in range(n)]) / n
    want = [g.numpy() for g in tape.gradient(loss, vs)]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
