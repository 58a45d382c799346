#!/usr/bin/env python3
"""TensorFlow training-step benchmark: plait.tensorflow vs Horovod 0.28.1 vs
tf.distribute.MultiWorkerMirroredStrategy, same model, same data, 2 ranks
(driven by ci/bench tensorflow; docs/performance.md shows the figures).

One worker run (launched by plaitrun, horovodrun, or by this script):

    tf_bench.py --impl plait|horovod --json OUT --round N [--label L]
    tf_bench.py --impl mwms|local --launch 2 --json OUT --round N
        (--launch: this script starts the 2 worker processes itself; mwms
        gives them a TF_CONFIG on loopback ports chosen free now; local runs
        2 independent processes with no communication at all, the floor)

The report:

    tf_bench.py --report OUT [--expect LABEL]... [--markdown FILE]

The model is a ResNet-20-style CNN in Keras 3 (3 stages of 3 residual
blocks, 16/32/64 channels, batch normalisation; 65 gradient tensors,
0.27 M parameters, 1.1 MB of gradients per step) on synthetic 32x32x3
images, batch 16 per rank, trained with SGD+momentum in
a tf.function with a tf.GradientTape. Every rank starts from the same
weights (same seed) and trains on its own synthetic batch (a different one
per rank, so ranks that do not allreduce end with different weights). plait
and Horovod wrap the tape in their DistributedGradientTape (the same code,
only the module differs; the gradients are taken with respect to the
tf.Variables under the Keras 3 variables, v.value, since Horovod's tape
calls .ref() on its sources, which Keras 3 variables lack); MultiWorkerMirroredStrategy runs the step through
strategy.run with CPU RING collectives, the loss scaled by 1/replicas so that
its summed gradients are the average. Each run times every step (up to the
loss read back on the host), after --warmup untimed steps, on rank 0; at the
end every rank writes a digest of its trainable weights, and the report says
whether the ranks of each run ended identical. plait's runs also record
plait.stats() over the timed steps (the fusion statistics).

A contender that could not run is written as {"kind": "missing", "system",
"reason"} (by ci/bench tensorflow or by --launch) and the report says
"NOT MEASURED: <system>: <reason>" first and in the table; so does any label
named with --expect that has no rows.
"""

import argparse
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SYSTEM_ORDER = ["plait-gloo", "plait-ofi-shm", "horovod", "mwms", "local"]
DESCRIBE = {
    "plait-gloo": "plait.tensorflow DistributedGradientTape, gloo transport",
    "plait-ofi-shm": "plait.tensorflow DistributedGradientTape, libfabric shm",
    "horovod": "Horovod 0.28.1 DistributedGradientTape, horovodrun --gloo",
    "mwms": "tf.distribute.MultiWorkerMirroredStrategy, RING collectives",
    "local": "2 independent processes, no allreduce (the floor; ranks differ)",
}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def append_json(path, rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


# --------------------------------------------------------------------------
# The launcher for mwms and local: 2 processes started here
# --------------------------------------------------------------------------

def launch(args, argv):
    n = args.launch
    ports = [free_port() for _ in range(n)]
    child_argv = [a for a in argv]
    i = child_argv.index("--launch")
    del child_argv[i:i + 2]
    procs = []
    for rank in range(n):
        env = dict(os.environ)
        env["TF_BENCH_RANK"] = str(rank)
        env["TF_BENCH_SIZE"] = str(n)
        if args.impl == "mwms":
            env["TF_CONFIG"] = json.dumps({
                "cluster": {"worker": ["127.0.0.1:%d" % p for p in ports]},
                "task": {"type": "worker", "index": rank}})
        procs.append(subprocess.Popen([sys.executable, __file__] + child_argv, env=env))
    deadline = time.monotonic() + args.timeout
    rcs = [None] * n
    while None in rcs and time.monotonic() < deadline:
        for k, p in enumerate(procs):
            if rcs[k] is None:
                rcs[k] = p.poll()
        if any(rc not in (None, 0) for rc in rcs):
            break
        time.sleep(0.2)
    for k, p in enumerate(procs):
        if rcs[k] is None:
            p.kill()
            p.wait()
    if rcs != [0] * n:
        reason = "%s worker processes failed in round %d (exit codes %s; timeout %d s; output above)" % (
            args.impl, args.round, rcs, args.timeout)
        print("tf_bench: NOT MEASURED: %s: %s" % (args.label or args.impl, reason), file=sys.stderr)
        append_json(args.json, {"kind": "missing", "system": args.label or args.impl,
                                "reason": reason})
        return 1
    return 0


# --------------------------------------------------------------------------
# One worker
# --------------------------------------------------------------------------

def build_model(keras, image, classes, blocks):
    layers = keras.layers

    def block(x, filters, stride):
        shortcut = x
        y = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
        y = layers.BatchNormalization()(y)
        y = layers.ReLU()(y)
        y = layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        if stride != 1 or shortcut.shape[-1] != filters:
            shortcut = layers.Conv2D(filters, 1, strides=stride, use_bias=False)(shortcut)
            shortcut = layers.BatchNormalization()(shortcut)
        return layers.ReLU()(layers.Add()([y, shortcut]))

    inputs = keras.Input((image, image, 3))
    x = layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    for filters, stride in ((16, 1), (32, 2), (64, 2)):
        x = block(x, filters, stride)
        for _ in range(blocks - 1):
            x = block(x, filters, 1)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(classes)(x)
    return keras.Model(inputs, outputs, name="small_resnet")


def worker(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_threads)
    import keras

    impl = args.impl
    hvd = strategy = None
    if impl == "plait":
        import plait.tensorflow as hvd
    elif impl == "horovod":
        import horovod.tensorflow as hvd
    if hvd is not None:
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
    else:
        rank = int(os.environ["TF_BENCH_RANK"])
        size = int(os.environ["TF_BENCH_SIZE"])
    if impl == "mwms":
        comm = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=comm)
        assert strategy.num_replicas_in_sync == size, strategy.num_replicas_in_sync

    keras.utils.set_random_seed(args.seed)  # the same initial weights on every rank
    scope = strategy.scope() if strategy else None
    if scope:
        scope.__enter__()
    model = build_model(keras, args.image, args.classes, args.blocks)
    opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    opt.build(model.trainable_variables)
    if scope:
        scope.__exit__(None, None, None)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="sum_over_batch_size")
    variables = model.trainable_variables
    n_params = sum(int(np.prod(v.shape)) for v in variables)

    # Synthetic data, different on every rank; a few batches cycled.
    rng = np.random.default_rng(1000 + rank)
    batches = [(tf.constant(rng.standard_normal((args.batch, args.image, args.image, 3),
                                                dtype=np.float32)),
                tf.constant(rng.integers(0, args.classes, args.batch), dtype=tf.int32))
               for _ in range(4)]

    if hvd is not None:
        # Horovod 0.28.1's DistributedGradientTape calls .ref() on every
        # source, which Keras 3 variables lack ('Variable' object has no
        # attribute 'ref'): the gradients are taken with respect to the
        # tf.Variables under them (v.value), for plait too (the same code).
        sources = [v.value for v in variables]

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(loss, sources)
            opt.apply_gradients(zip(grads, variables))
            return loss
    elif strategy is not None:
        @tf.function
        def step(x, y):
            def replica_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True)) / size
                grads = tape.gradient(loss, variables)
                opt.apply_gradients(zip(grads, variables))
                return loss
            per = strategy.run(replica_step, args=(x, y))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per, axis=None)
    else:
        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, variables)
            opt.apply_gradients(zip(grads, variables))
            return loss

    t0 = time.perf_counter()
    for i in range(args.warmup):
        float(step(*batches[i % len(batches)]))
    warm_s = time.perf_counter() - t0
    if impl == "plait":
        hvd.stats_reset()
    times = []
    for i in range(args.steps):
        t = time.perf_counter()
        float(step(*batches[i % len(batches)]))
        times.append(time.perf_counter() - t)
    stats = hvd.stats() if impl == "plait" else None

    h = hashlib.sha256()
    for v in variables:
        h.update(np.ascontiguousarray(np.asarray(v.numpy())).tobytes())
    rec = {"kind": "tf_step", "system": args.label or impl, "impl": impl, "round": args.round,
           "rank": rank, "size": size, "digest": h.hexdigest(),
           "tensorflow": tf.__version__, "keras": keras.__version__,
           "batch": args.batch, "image": args.image, "gradients": len(variables),
           "parameters": n_params, "warmup": args.warmup, "warmup_s": warm_s,
           "steps": args.steps}
    if impl == "horovod":
        import horovod
        rec["version"] = horovod.__version__
        rec["settings"] = {k: v for k, v in os.environ.items() if k.startswith("HOROVOD_")}
    if impl == "plait":
        import plait
        rec["version"] = plait.version()
        rec["transport"] = hvd.transport_name() if hasattr(hvd, "transport_name") else None
        rec["settings"] = {k: v for k, v in os.environ.items()
                           if k.startswith("PLAIT_") or k == "FI_PROVIDER"}
        rec["stats"] = stats
    if rank == 0:
        rec["times_s"] = times
    append_json(args.json, rec)
    if rank == 0:
        print("tf_bench: %s round %d: median %.1f ms per step (%d steps, %d gradient tensors)"
              % (rec["system"], args.round, 1e3 * statistics.median(times), len(times),
                 len(variables)), flush=True)
    if hvd is not None:
        hvd.shutdown()
    return 0


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------

def pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def report(args):
    rows = []
    with open(args.report) as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    sys.exit("tf_bench: %s:%d: not JSON: %s" % (args.report, lineno, e))
    missing = {}
    for r in rows:
        if r.get("kind") == "missing":
            missing.setdefault(r.get("system", "?"), r.get("reason") or "no reason given")
    steps = [r for r in rows if r.get("kind") == "tf_step"]
    present = {r["system"] for r in steps}
    for s in args.expect or []:
        if s not in present:
            missing.setdefault(s, "no results for %s in %s" % (s, args.report))
    out = []
    for s in sorted(missing):
        line = "NOT MEASURED: %s: %s" % (s, missing[s])
        out.append(line)
        print(line, file=sys.stderr)
    if out:
        out.append("")

    systems = [s for s in SYSTEM_ORDER if s in present] + sorted(present - set(SYSTEM_ORDER))
    runs = {}  # (system, round) -> {rank: rec}
    for r in steps:
        runs.setdefault((r["system"], r["round"]), {})[r["rank"]] = r
    any_rec = steps[0] if steps else {}
    if any_rec:
        out.append("Model: ResNet-20-style CNN, %d gradient tensors, %d parameters; "
                   "batch %d of %dx%dx3 per rank; %d ranks; TensorFlow %s, Keras %s; "
                   "%d timed steps per run after %d warm-up steps; time per step on rank 0."
                   % (any_rec["gradients"], any_rec["parameters"], any_rec["batch"],
                      any_rec["image"], any_rec["image"], any_rec["size"],
                      any_rec["tensorflow"], any_rec["keras"], any_rec["steps"],
                      any_rec["warmup"]))
        out.append("")
    base = None
    summary = {}
    for s in systems:
        times, medians, identical, rounds = [], [], [], []
        for (sys_, rnd), ranks in sorted(runs.items()):
            if sys_ != s:
                continue
            r0 = ranks.get(0)
            if r0 and r0.get("times_s"):
                times += r0["times_s"]
                medians.append(statistics.median(r0["times_s"]))
                rounds.append(rnd)
            digests = {rec["digest"] for rec in ranks.values()}
            size = next(iter(ranks.values()))["size"]
            identical.append(len(ranks) == size and len(digests) == 1)
        if not times:
            missing.setdefault(s, "no rank-0 step times")
            continue
        summary[s] = (statistics.median(times), pct(times, 0.1), pct(times, 0.9), medians,
                      identical, len(times))
    if "plait-gloo" in summary:
        base = "plait-gloo"
    elif summary:
        base = next(s for s in systems if s.startswith("plait") and s in summary) \
            if any(s.startswith("plait") for s in summary) else None
    out.append("| contender | median ms/step | p10 - p90 ms | per-round medians ms | "
               "images/s (2 ranks) | %s | ranks end identical |"
               % ("vs %s (median)" % base if base else "ratio"))
    out.append("|---|---|---|---|---|---|---|")
    batch = any_rec.get("batch", 0)
    size = any_rec.get("size", 2)
    for s in systems + sorted(set(missing) - set(systems)):
        if s not in summary:
            out.append("| %s | NOT MEASURED: %s | - | - | - | - | - |"
                       % (s, missing.get(s, "?").replace("|", "/")))
            continue
        med, p10, p90, meds, ident, n = summary[s]
        if s == "local":
            check = "differ, as expected (no allreduce)" if not any(ident) else \
                "identical (?! without allreduce)"
        else:
            check = "yes (%d/%d runs)" % (sum(ident), len(ident)) if all(ident) else \
                "NO: %d of %d runs differ" % (len(ident) - sum(ident), len(ident))
        ratio = "%.2f" % (med / summary[base][0]) if base else "-"
        out.append("| %s | %.1f | %.1f - %.1f | %s | %.0f | %s | %s |"
                   % (s, 1e3 * med, 1e3 * p10, 1e3 * p90,
                      " ".join("%.1f" % (1e3 * m) for m in meds), size * batch / med,
                      ratio, check))
    out.append("")
    for s in systems:
        if s in DESCRIBE:
            out.append("- %s: %s" % (s, DESCRIBE[s]))
    # plait's fusion statistics (rank 0, over the timed steps).
    fus = []
    for (s, rnd), ranks in sorted(runs.items()):
        st = ranks.get(0, {}).get("stats")
        if not st:
            continue
        n = ranks[0]["steps"]
        resp = st.get("responses", 0)
        fus.append("| %s | %d | %.1f | %.1f | %.2f | %d / %d | %.2f MB |"
                   % (s, rnd, st.get("tensors", 0) / n, resp / n,
                      st.get("tensors", 0) / resp if resp else 0.0,
                      st.get("fused_tensors", 0), st.get("fused_responses", 0),
                      st.get("fusion_bytes", 0) / n / 1e6))
    if fus:
        out.append("")
        out.append("plait.stats() on rank 0 over the timed steps:")
        out.append("")
        out.append("| run | round | tensors / step | collectives / step | tensors per collective | "
                   "fused tensors / fused collectives | bytes through the fusion buffer / step |")
        out.append("|---|---|---|---|---|---|---|")
        out += fus
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    bad = [s for s in summary if s != "local" and not all(summary[s][4])]
    if bad:
        print("tf_bench: ranks ended with different weights: %s" % ", ".join(bad), file=sys.stderr)
        return 1
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impl", choices=["plait", "horovod", "mwms", "local"])
    p.add_argument("--label", help="the system name in the results (default: --impl)")
    p.add_argument("--launch", type=int, default=0,
                   help="start this many worker processes here (mwms, local)")
    p.add_argument("--timeout", type=int, default=600, help="--launch: seconds before giving up")
    p.add_argument("--json", help="append results to this JSON-lines file")
    p.add_argument("--round", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--blocks", type=int, default=3, help="residual blocks per stage (3: ResNet-20)")
    p.add_argument("--image", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--intra-threads", type=int, default=1)
    p.add_argument("--inter-threads", type=int, default=2)
    p.add_argument("--report", metavar="JSONL")
    p.add_argument("--expect", action="append", metavar="SYSTEM")
    p.add_argument("--markdown", metavar="FILE")
    args = p.parse_args(argv)
    if args.report:
        return report(args)
    if not args.impl or not args.json:
        p.error("--impl and --json are needed (or --report)")
    if args.launch:
        if args.impl not in ("mwms", "local"):
            p.error("--launch is for mwms and local; plait and horovod run under their launchers")
        return launch(args, argv)
    if args.impl in ("mwms", "local") and "TF_BENCH_RANK" not in os.environ:
        p.error("--impl %s needs --launch 2" % args.impl)
    return worker(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
