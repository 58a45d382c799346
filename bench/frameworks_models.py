"""The one small CNN of `ci/bench frameworks` (bench/frameworks.py), and its
training loop in PyTorch, TensorFlow (Keras 3) and MXNet (gluon).

SPEC is the model, the data and the optimizer; the three builders read it
layer by layer, so the three frameworks train the same network: 28x28x1
synthetic images, conv 3x3x32 + ReLU, conv 3x3x64 + ReLU, max-pool 2x2,
flatten, dense 128 + ReLU, dense 10; softmax cross-entropy averaged over the
batch; plain SGD. Each framework draws the initial weights with its own
default initialiser from SPEC's seed (the same on every rank of a run);
every rank trains on its own synthetic batches (seeded by rank), so ranks
that did not average their gradients end with different weights.

A step is forward, backward, the gradient exchange and the update, and ends
when the loss is back on the host (the framework has finished). Every
process computes with one thread, so a 2-rank run uses 2 cores and the
1-process run one.

run(framework, impl, rank_env, ...) is called by `frameworks.py --worker`,
under the framework's own python; this file imports no framework at the top.
"""

import hashlib
import os
import time

SPEC = {
    "input": [1, 28, 28],  # channels, height, width
    "classes": 10,
    "batch": 32,           # per rank
    "lr": 0.01,
    "seed": 42,
    "batches": 4,          # synthetic batches per rank, cycled
    "layers": [
        {"type": "conv", "filters": 32, "kernel": 3, "relu": True},
        {"type": "conv", "filters": 64, "kernel": 3, "relu": True},
        {"type": "maxpool", "size": 2},
        {"type": "flatten"},
        {"type": "dense", "units": 128, "relu": True},
        {"type": "dense", "units": 10, "relu": False},
    ],
}


def spec_parameters(spec=SPEC):
    """(parameters, gradient tensors) of SPEC's network, computed from the
    spec alone: what every framework's model must report."""
    c, h, w = spec["input"]
    params = tensors = 0
    flat = None
    for layer in spec["layers"]:
        t = layer["type"]
        if t == "conv":
            k = layer["kernel"]
            params += layer["filters"] * c * k * k + layer["filters"]
            c, h, w = layer["filters"], h - k + 1, w - k + 1
            tensors += 2
        elif t == "maxpool":
            h, w = h // layer["size"], w // layer["size"]
        elif t == "flatten":
            flat = c * h * w
        elif t == "dense":
            params += flat * layer["units"] + layer["units"]
            flat = layer["units"]
            tensors += 2
        else:
            raise ValueError("SPEC: unknown layer type %r" % t)
    return params, tensors


def batches(spec, rank):
    """The synthetic batches of RANK: NCHW float32 images N(0,1), int labels."""
    import numpy as np
    rs = np.random.RandomState(spec["seed"] * 1000 + rank)
    return [(rs.standard_normal([spec["batch"]] + spec["input"]).astype("float32"),
             rs.randint(0, spec["classes"], size=spec["batch"]).astype("int64"))
            for _ in range(spec["batches"])]


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.tobytes())
    return h.hexdigest()


# ------------------------------------------------------------------ torch --

def torch_model(spec):
    import torch.nn as nn
    c = spec["input"][0]
    mods, flat = [], None
    for layer in spec["layers"]:
        t = layer["type"]
        if t == "conv":
            mods.append(nn.Conv2d(c, layer["filters"], layer["kernel"]))
            c = layer["filters"]
        elif t == "maxpool":
            mods.append(nn.MaxPool2d(layer["size"]))
        elif t == "flatten":
            mods.append(nn.Flatten())
            flat = c * _out_hw(spec) ** 2
        elif t == "dense":
            mods.append(nn.Linear(flat, layer["units"]))
            flat = layer["units"]
        if layer.get("relu"):
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def _out_hw(spec):
    hw = spec["input"][1]
    for layer in spec["layers"]:
        if layer["type"] == "conv":
            hw -= layer["kernel"] - 1
        elif layer["type"] == "maxpool":
            hw //= layer["size"]
        elif layer["type"] == "flatten":
            return hw
    return hw


def torch_run(spec, impl, hvd, rank, size, steps, warmup):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(spec["seed"])
    model = torch_model(spec)
    opt = torch.optim.SGD(model.parameters(), lr=spec["lr"])
    if hvd is not None:
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    elif impl == "native":
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        dist.init_process_group("gloo", rank=rank, world_size=size)
        model = DistributedDataParallel(model)
    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches(spec, rank)]

    def step(i):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    out = timed(step, steps, warmup, hvd if impl == "plait" else None)
    params = list(model.parameters())
    out.update(n_params=sum(p.numel() for p in params), n_tensors=len(params),
               digest=digest(p.detach().numpy() for p in params), version=torch.__version__)
    if impl == "native":
        torch.distributed.destroy_process_group()
    return out


# ------------------------------------------------------------- tensorflow --

def keras_model(spec, keras):
    layers = keras.layers
    c, h, w = spec["input"]
    x = inputs = keras.Input((h, w, c))
    for layer in spec["layers"]:
        t = layer["type"]
        act = "relu" if layer.get("relu") else None
        if t == "conv":
            x = layers.Conv2D(layer["filters"], layer["kernel"], activation=act)(x)
        elif t == "maxpool":
            x = layers.MaxPooling2D(layer["size"])(x)
        elif t == "flatten":
            x = layers.Flatten()(x)
        elif t == "dense":
            x = layers.Dense(layer["units"], activation=act)(x)
    return keras.Model(inputs, x)


def tf_run(spec, impl, hvd, rank, size, steps, warmup):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    import keras
    strategy = None
    if impl == "native":
        comm = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=comm)
    keras.utils.set_random_seed(spec["seed"])
    if strategy is not None:
        with strategy.scope():
            model = keras_model(spec, keras)
            opt = keras.optimizers.SGD(learning_rate=spec["lr"])
            opt.build(model.trainable_variables)
    else:
        model = keras_model(spec, keras)
        opt = keras.optimizers.SGD(learning_rate=spec["lr"])
        opt.build(model.trainable_variables)
    variables = model.trainable_variables
    if hvd is not None:
        hvd.broadcast_variables([v.value for v in variables], root_rank=0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    data = [(tf.constant(np.transpose(x, (0, 2, 3, 1))), tf.constant(y))
            for x, y in batches(spec, rank)]
    step_fn = _tf_step(tf, model, opt, loss_fn, variables, hvd, strategy, size)
    out = timed(lambda i: float(step_fn(*data[i % len(data)])), steps, warmup,
                hvd if impl == "plait" else None)
    out.update(n_params=sum(int(np.prod(v.shape)) for v in variables), n_tensors=len(variables),
               digest=digest(np.asarray(v.numpy()) for v in variables),
               version="%s (Keras %s)" % (tf.__version__, keras.__version__))
    return out


def _tf_step(tf, model, opt, loss_fn, variables, hvd, strategy, size):
    if strategy is not None:
        @tf.function
        def step(x, y):
            def replica(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True)) / size
                opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
                return loss
            return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica, (x, y)),
                                   axis=None)
        return step
    # Horovod's DistributedGradientTape calls .ref() on its sources, which
    # Keras 3 variables lack: the tf.Variables under them (v.value), for
    # plait too (the same code; as bench/tf_bench.py).
    sources = [v.value for v in variables] if hvd is not None else variables

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        if hvd is not None:
            tape = hvd.DistributedGradientTape(tape)
        opt.apply_gradients(zip(tape.gradient(loss, sources), variables))
        return loss
    return step


# ------------------------------------------------------------------ mxnet --

def mxnet_model(spec, gluon):
    net = gluon.nn.HybridSequential()
    for layer in spec["layers"]:
        t = layer["type"]
        act = "relu" if layer.get("relu") else None
        if t == "conv":
            net.add(gluon.nn.Conv2D(layer["filters"], layer["kernel"], activation=act))
        elif t == "maxpool":
            net.add(gluon.nn.MaxPool2D(layer["size"]))
        elif t == "flatten":
            net.add(gluon.nn.Flatten())
        elif t == "dense":
            net.add(gluon.nn.Dense(layer["units"], activation=act))
    return net


def mxnet_run(spec, impl, hvd, rank, size, steps, warmup):
    import mxnet as mx
    from mxnet import autograd, gluon
    mx.random.seed(spec["seed"])
    net = mxnet_model(spec, gluon)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    kv = None
    if impl == "native":
        kv = mx.kv.create("dist_sync")
    data = [(mx.nd.array(x), mx.nd.array(y.astype("float32"))) for x, y in batches(spec, rank)]
    with autograd.train_mode():  # deferred init in training mode (see mxnet_bench.py)
        net(data[0][0])
    params = net.collect_params()
    opt = {"learning_rate": spec["lr"]}
    if hvd is not None:
        hvd.broadcast_parameters(params, root_rank=0)
        trainer, scale = hvd.DistributedTrainer(params, "sgd", opt), spec["batch"]
    elif kv is not None:
        import mxnet_bench  # the dist_sync start-up without MXNet 1.9.1's init race
        trainer, scale = gluon.Trainer(params, "sgd", opt, kvstore=kv), spec["batch"] * size
        mxnet_bench.ps_init(trainer, kv, scale)
    else:
        trainer, scale = gluon.Trainer(params, "sgd", opt, kvstore=None), spec["batch"]
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(i):
        x, y = data[i % len(data)]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(scale)
        mx.nd.waitall()  # MXNet's engine is asynchronous: the update (and its allreduce) too
        return float(loss.mean().asscalar())

    out = timed(step, steps, warmup, hvd if impl == "plait" else None)
    arrays = [p.data().asnumpy() for p in params.values() if p.grad_req != "null"]
    out.update(n_params=sum(a.size for a in arrays), n_tensors=len(arrays),
               digest=digest(arrays), version=mx.__version__)
    return out


# ----------------------------------------------------------------- shared --

RUNNERS = {"torch": torch_run, "tensorflow": tf_run, "mxnet": mxnet_run}
HVD_MODULES = {("torch", "plait"): "plait.torch", ("torch", "horovod"): "horovod.torch",
               ("tensorflow", "plait"): "plait.tensorflow",
               ("tensorflow", "horovod"): "horovod.tensorflow",
               ("mxnet", "plait"): "plait.mxnet", ("mxnet", "horovod"): "horovod.mxnet"}


def timed(step, steps, warmup, plait_hvd):
    """Runs WARMUP untimed steps, then STEPS timed ones; plait's statistics
    (plait.stats()) cover the timed steps only."""
    losses = [step(i) for i in range(warmup)]
    if plait_hvd is not None:
        plait_hvd.stats_reset()
    times = []
    for i in range(warmup, warmup + steps):
        t = time.perf_counter()
        losses.append(step(i))
        times.append(time.perf_counter() - t)
    out = {"step_s": times, "losses": losses}
    if plait_hvd is not None:
        out["stats"] = plait_hvd.stats()
    return out


def run(framework, impl, steps, warmup):
    """One rank of one run: rank and size from plait or Horovod, else from
    FW_RANK and FW_SIZE (set by frameworks.py's own launcher)."""
    import importlib
    rank = int(os.environ.get("FW_RANK", "0"))
    size = int(os.environ.get("FW_SIZE", "1"))
    if framework == "tensorflow":  # one thread, set before TensorFlow starts its runtime
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    hvd = None
    if impl in ("plait", "horovod"):
        hvd = importlib.import_module(HVD_MODULES[(framework, impl)])
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
    out = RUNNERS[framework](SPEC, impl, hvd, rank, size, steps, warmup)
    out.update(rank=rank, size=size)
    if hvd is not None:
        hvd.shutdown()
    return out
