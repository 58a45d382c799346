#!/usr/bin/python3
"""MXNet data-parallel training, all-reduce against the parameter server.

    bench/mxnet_bench.py --mxnet-python PY [--horovod-python PY] [--plaitrun P] [options]

One gluon CNN (the model zoo's ResNet-18 v1, 10 classes, on synthetic
32x32 images by default) trained with the same data, the same initial
parameters and the same optimizer (SGD with momentum; the mean gradient of
the global batch) by each contender:

  plait-gloo       plait.mxnet's DistributedTrainer under plaitrun, Gloo
  plait-ofi-shm    the same over libfabric's shm provider
                   (PLAIT_TRANSPORT=ofi FI_PROVIDER=shm)
  horovod          Horovod 0.28.1's horovod.mxnet DistributedTrainer under
                   horovodrun --gloo
  ps               MXNet's own parameter server: gluon.Trainer with kvstore
                   dist_sync (update on the server); a scheduler and one
                   server process on 127.0.0.1 (DMLC_* variables, the
                   scheduler's port chosen free at run time), started here
                   and stopped afterwards, also on failure
  local            kvstore 'local' in ONE process on the whole global batch
                   (RANKS x BATCH samples): the reference, no communication

Every process computes with one thread (OMP_NUM_THREADS=1,
MXNET_CPU_WORKER_NTHREADS=1; --local-threads for the local reference), so the
distributed contenders use RANKS cores and the reference one: perfect scaling
would make a distributed step take 1/RANKS of the local one. Each run trains WARMUP + STEPS steps; a step is forward,
backward, trainer.step and mx.nd.waitall(); its time is the slowest rank's.
The order of the contenders rotates each round. The table gives, over the
measured steps of all rounds, the median time per step with p10/p90,
samples/s (global batch / median), the final loss (mean over ranks of the
last 5 steps' losses; every contender sees the same batches), and whether
the ranks ended with the same trainable parameters (compared bit for bit; a
max |difference| when not; BatchNorm's running statistics are per rank in
every contender and are not compared).

A contender that cannot run is never dropped silently: "NOT MEASURED:
<contender>: <reason>" on stderr when it happens, again above the table, and
a NOT MEASURED row in it. A contender that failed in some rounds but not all
is measured from the rounds that ran, and the failures are listed.

Worker mode (--worker IMPL) is what each rank runs; the driver starts it.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CONTENDERS = ["plait-gloo", "plait-ofi-shm", "horovod", "ps", "local"]
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.abspath(__file__)


# ---------------------------------------------------------------- worker --

def _batches(args, rank):
    """The NB synthetic batches of rank RANK: images N(0,1), labels 0..9."""
    import numpy as np
    rs = np.random.RandomState(args.seed * 1000 + rank)
    return [(rs.standard_normal((args.batch, 3, args.image, args.image)).astype("float32"),
             rs.randint(0, args.classes, size=args.batch).astype("float32"))
            for _ in range(args.nbatches)]


def ps_init(trainer, kv, batch_size):
    """What gluon.Trainer does on its first step with a dist kvstore (init
    every parameter on the server from worker 0, then pull it everywhere),
    minus a race of MXNet 1.9.1 on CPU.

    Trainer._init_params calls kv.broadcast(key) per parameter: worker 0
    pushes the value and meets the others at a barrier, then all pull. Here
    a pull reached the server before worker 0's push of that key, and the
    server aborted with "Check failed: !stored.is_none(): init <key> first"
    (3 runs out of 3, a different key each time; cf. apache/mxnet#7893).
    So: init all keys at once, wait until every pending read of the
    parameters (the init push, answered by the server) is done, barrier,
    pull, and tell the trainer its parameters are initialised. The steps
    are Trainer's own."""
    import mxnet as mx
    trainer._optimizer.rescale_grad = trainer._scale / batch_size  # as step() before _init_kvstore
    trainer._init_kvstore()   # sends the optimizer to the server
    keys = [trainer._param2idx[p.name] for p in trainer._params]
    arrays = [p.data() for p in trainer._params]
    kv.init(keys, arrays)
    from mxnet.base import _LIB, check_call
    for a in arrays:  # worker 0: the init push (a reader of a) has completed
        check_call(_LIB.MXNDArrayWaitToWrite(a.handle))
    kv._barrier()
    kv.pull(keys, out=arrays)
    mx.nd.waitall()
    trainer._params_to_init = []


def worker(args):
    impl = args.worker
    import numpy as np
    import mxnet as mx
    from mxnet import autograd, gluon
    from mxnet.gluon.model_zoo import vision

    # The model first: a worker that cannot build it fails before it joins
    # (its peers, the scheduler and the server then wait until stopped).
    mx.random.seed(args.seed)
    net = vision.get_model(args.model, classes=args.classes)
    net.initialize(mx.init.Xavier(magnitude=2.0))  # deferred: drawn at the first forward

    hvd = kv = None
    if impl in ("plait", "horovod"):
        if impl == "plait":
            import plait.mxnet as hvd
        else:
            import horovod.mxnet as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
    elif impl == "ps":
        kv = mx.kv.create("dist_sync")
        rank, size = kv.rank, kv.num_workers
    elif impl == "local":
        rank, size = 0, 1
    else:
        sys.exit("mxnet_bench.py: unknown --worker %r (plait, horovod, ps, local)" % impl)
    if impl != "local" and size != args.ranks:
        sys.exit("mxnet_bench.py: %s started %d ranks, --ranks says %d" % (impl, size, args.ranks))

    if impl == "local":  # the global batch: every rank's batch, concatenated
        per_rank = [_batches(args, r) for r in range(args.ranks)]
        data = [(np.concatenate([p[i][0] for p in per_rank]), np.concatenate([p[i][1] for p in per_rank]))
                for i in range(args.nbatches)]
    else:
        data = _batches(args, rank)
    data = [(mx.nd.array(x), mx.nd.array(y)) for x, y in data]
    global_batch = args.batch * args.ranks

    # Deferred initialisation by a forward pass in training mode: in
    # inference mode oneDNN reorders the weights in place into its own
    # layout, which MXNet 1.9.1's dist kvstore cannot push ("We can't
    # generate TBlob for MKLDNN data").
    with autograd.train_mode():
        net(data[0][0])
    params = net.collect_params()
    opt = {"learning_rate": args.lr, "momentum": 0.9, "wd": 1e-4}
    if hvd is not None:
        hvd.broadcast_parameters(params, root_rank=0)
        trainer = hvd.DistributedTrainer(params, "sgd", opt)
        step_scale = args.batch           # the trainer averages over ranks
    elif impl == "ps":
        trainer = gluon.Trainer(params, "sgd", opt, kvstore=kv)  # update_on_kvstore
        step_scale = global_batch         # the server sums the workers' gradients
        ps_init(trainer, kv, step_scale)
    else:
        trainer = gluon.Trainer(params, "sgd", opt, kvstore="local")
        step_scale = global_batch
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    times, losses = [], []
    for step in range(args.warmup + args.steps):
        x, y = data[step % len(data)]
        t0 = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(step_scale)
        mx.nd.waitall()
        t = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(t)
        losses.append(float(loss.mean().asscalar()))

    trainable = {name: p.data().asnumpy() for name, p in params.items() if p.grad_req != "null"}
    params_file = os.path.join(args.out_dir, "params-%s-rank%d.npz" % (args.tag, rank))
    np.savez(params_file, **trainable)
    row = {"tag": args.tag, "impl": impl, "rank": rank, "size": size, "batch": args.batch,
           "global_batch": global_batch, "step_s": times, "losses": losses,
           "params_file": params_file, "n_params": int(sum(a.size for a in trainable.values())),
           "mxnet": mx.__version__}
    with open(os.path.join(args.out_dir, "result-%s-rank%d.json" % (args.tag, rank)), "w") as f:
        json.dump(row, f)
    if impl in ("plait", "horovod"):
        hvd.shutdown()


# ---------------------------------------------------------------- driver --

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc, grace=5.0):
    """Ends PROC's process group (started here with start_new_session)."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            pass


class RunFailed(Exception):
    pass


def run_job(cmd, env, timeout, log):
    log.write("$ %s\n" % " ".join(cmd))
    log.flush()
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise RunFailed("no result after %d s (stopped)" % timeout)
    finally:
        stop(proc)
    if rc != 0:
        raise RunFailed("%s exited with status %d" % (os.path.basename(cmd[0]), rc))


def base_env(args, threads):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MXNET_CPU_WORKER_NTHREADS="1",
               PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1")
    for k in [k for k in env if k.startswith(("DMLC_", "PLAIT_TRANSPORT", "FI_PROVIDER"))]:
        del env[k]
    return env


def worker_args(args, impl, tag, out_dir):
    return [SCRIPT, "--worker", impl, "--tag", tag, "--out-dir", out_dir,
            "--ranks", str(args.ranks), "--model", args.model, "--image", str(args.image),
            "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
            "--nbatches", str(args.nbatches), "--lr", str(args.lr), "--seed", str(args.seed)]


def run_contender(args, name, tag, out_dir, log):
    """Runs one contender once; raises RunFailed with a reason."""
    if name.startswith("plait"):
        env = base_env(args, 1)
        env.update(args.plait_env)
        if name == "plait-ofi-shm":
            env.update(PLAIT_TRANSPORT="ofi", FI_PROVIDER="shm")
        else:
            env["PLAIT_TRANSPORT"] = "gloo"
        run_job([args.plaitrun, "-np", str(args.ranks), args.mxnet_python]
                + worker_args(args, "plait", tag, out_dir), env, args.timeout, log)
    elif name == "horovod":
        env = base_env(args, 1)
        env["HOROVOD_FUSION_THRESHOLD"] = str(64 << 20)  # plait's default (Horovod's: 128 MiB)
        horovodrun = os.path.join(os.path.dirname(args.horovod_python), "horovodrun")
        run_job([horovodrun, "-np", str(args.ranks), "-H", "localhost:%d" % args.ranks, "--gloo",
                 args.horovod_python] + worker_args(args, "horovod", tag, out_dir),
                env, args.timeout, log)
    elif name == "ps":
        run_ps(args, tag, out_dir, log)
    elif name == "local":
        env = base_env(args, args.local_threads)
        run_job([args.mxnet_python] + worker_args(args, "local", tag, out_dir), env,
                args.timeout, log)
    else:
        raise RunFailed("unknown contender")


def run_ps(args, tag, out_dir, log):
    """A scheduler, one server and RANKS workers of kvstore dist_sync on
    127.0.0.1; every process is stopped before returning."""
    port = free_port()
    common = base_env(args, 1)
    common.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(port),
                  DMLC_NODE_HOST="127.0.0.1", DMLC_NUM_SERVER="1",
                  DMLC_NUM_WORKER=str(args.ranks))
    procs = []
    try:
        for role in ("scheduler", "server"):
            env = dict(common, DMLC_ROLE=role)
            log.write("$ DMLC_ROLE=%s DMLC_PS_ROOT_PORT=%d %s -c 'import mxnet'\n"
                      % (role, port, args.mxnet_python))
            procs.append(subprocess.Popen([args.mxnet_python, "-c", "import mxnet"], env=env,
                                          stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        workers = []
        for _ in range(args.ranks):
            env = dict(common, DMLC_ROLE="worker")
            cmd = [args.mxnet_python] + worker_args(args, "ps", tag, out_dir)
            log.write("$ DMLC_ROLE=worker %s\n" % " ".join(cmd))
            log.flush()
            p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            procs.append(p)
            workers.append(p)
        deadline = time.monotonic() + args.timeout
        names = ["scheduler", "server"] + ["worker %d" % i for i in range(args.ranks)]
        while any(p.poll() is None for p in workers):
            if time.monotonic() > deadline:
                raise RunFailed("no result after %d s (stopped)" % args.timeout)
            for name, p in zip(names, procs):
                if p.poll() is not None and p.returncode != 0:
                    raise RunFailed("the dist_sync %s exited with status %d" % (name, p.returncode))
            time.sleep(0.2)
        for name, p in zip(names[2:], workers):
            if p.returncode != 0:
                raise RunFailed("the dist_sync %s exited with status %d" % (name, p.returncode))
        # With the workers done, the scheduler and the server end by themselves.
        for p in procs[:2]:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for p in procs:
            stop(p)


def collect(args, name, tag, out_dir):
    """The run's rows: step times (slowest rank per step), losses, params check."""
    import numpy as np
    n = 1 if name == "local" else args.ranks
    rows = []
    for r in range(n):
        path = os.path.join(out_dir, "result-%s-rank%d.json" % (tag, r))
        if not os.path.exists(path):
            raise RunFailed("rank %d wrote no result" % r)
        with open(path) as f:
            rows.append(json.load(f))
    steps = [max(ts) for ts in zip(*[row["step_s"] for row in rows])]
    last = [statistics.mean(row["losses"][-5:]) for row in rows]
    same, maxdiff = True, 0.0
    if n > 1:
        ref = np.load(rows[0]["params_file"])
        for row in rows[1:]:
            other = np.load(row["params_file"])
            if sorted(ref.files) != sorted(other.files):
                raise RunFailed("rank %d has other parameter names than rank 0" % row["rank"])
            for k in ref.files:
                a, b = ref[k], other[k]
                if a.shape != b.shape or not np.array_equal(a, b):
                    same = False
                    if a.shape == b.shape:
                        maxdiff = max(maxdiff, float(np.max(np.abs(a - b))))
                    else:
                        maxdiff = float("inf")
    for row in rows:
        os.unlink(row["params_file"])
    return {"kind": "mxnet-bench", "contender": name, "step_s": steps,
            "final_loss": statistics.mean(last), "ranks": n, "global_batch": rows[0]["global_batch"],
            "params_identical": same, "params_max_diff": maxdiff, "n_params": rows[0]["n_params"],
            "losses_rank0": rows[0]["losses"]}


def pct(v, q):
    s = sorted(v)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def table(args, results, missing, failures, load):
    out = ["NOT MEASURED: %s: %s" % (c, missing[c]) for c in args.contenders if c in missing]
    if out:
        out.append("")
    out.append("MXNet %s, %s, %dx%d images, batch %d per rank (%d global), %d ranks, "
               "%d rounds x %d measured steps (+%d warm-up); load average %s at the start, "
               "%s at the end"
               % (args.mxnet_version, args.model, args.image, args.image, args.batch,
                  args.batch * args.ranks, args.ranks, args.rounds, args.steps, args.warmup,
                  "/".join("%.2f" % x for x in load[0]), "/".join("%.2f" % x for x in load[1])))
    out.append("")
    out.append("| contender | ranks | time per step, median | p10 - p90 | samples/s | "
               "final loss | ranks' parameters | vs best plait |")
    out.append("|---|---|---|---|---|---|---|---|")
    med = {c: statistics.median([t for r in results[c] for t in r["step_s"]]) for c in results}
    plait = [m for c, m in med.items() if c.startswith("plait")]
    base = min(plait) if plait else None
    for c in args.contenders:
        if c in missing:
            out.append("| %s | - | NOT MEASURED: %s | - | - | - | - | - |"
                       % (c, missing[c].replace("|", "/")))
            continue
        if c not in results:
            continue
        rs = results[c]
        ts = [t for r in rs for t in r["step_s"]]
        if rs[0]["ranks"] == 1:
            check = "- (one process)"
        elif all(r["params_identical"] for r in rs):
            check = "identical"
        else:
            check = "DIFFER (max %.3g)" % max(r["params_max_diff"] for r in rs)
        out.append("| %s | %d | %.1f ms | %.1f - %.1f ms | %.1f | %.4f | %s | %s |"
                   % (c, rs[0]["ranks"], 1e3 * med[c], 1e3 * pct(ts, 0.1), 1e3 * pct(ts, 0.9),
                      rs[0]["global_batch"] / med[c],
                      statistics.mean(r["final_loss"] for r in rs), check,
                      "%.2fx" % (med[c] / base) if base else "-"))
    if failures:
        out.append("")
        out.append("Failed runs (measured from the other rounds): "
                   + "; ".join("%s round %d: %s" % f for f in failures))
    return "\n".join(out)


def driver(args):
    missing = {}

    def not_measured(c, reason):
        missing[c] = reason
        print("NOT MEASURED: %s: %s" % (c, reason), file=sys.stderr, flush=True)

    for c, reason in args.not_measured:
        not_measured(c, reason)
    for c in args.contenders:
        if c in missing:
            continue
        if c == "horovod" and not args.horovod_python:
            not_measured(c, "no Horovod python given (--horovod-python)")
        elif c.startswith("plait") and not args.plaitrun:
            not_measured(c, "no plaitrun given (--plaitrun)")
    out_dir = tempfile.mkdtemp(prefix="mxnet-bench-")
    log_path = args.log or os.path.join(out_dir, "runs.log")
    results, failures = {}, []
    load0 = os.getloadavg()
    try:
        with open(log_path, "a") as log:
            for rnd in range(args.rounds):
                live = [c for c in args.contenders if c not in missing]
                k = rnd % len(live) if live else 0
                order = live[k:] + live[:k]
                for c in order:
                    tag = "%s-r%d" % (c, rnd + 1)
                    t0 = time.monotonic()
                    print("== round %d of %d: %s" % (rnd + 1, args.rounds, c), flush=True)
                    try:
                        run_contender(args, c, tag, out_dir, log)
                        row = collect(args, c, tag, out_dir)
                    except RunFailed as e:
                        failures.append((c, rnd + 1, str(e)))
                        print("   %s failed in round %d: %s (log %s)" % (c, rnd + 1, e, log_path),
                              file=sys.stderr, flush=True)
                        continue
                    row["round"] = rnd + 1
                    results.setdefault(c, []).append(row)
                    print("   %.1f ms per step (median), final loss %.4f, ranks' parameters %s, "
                          "%.0f s" % (1e3 * statistics.median(row["step_s"]), row["final_loss"],
                                      "- (one process)" if row["ranks"] == 1
                                      else "identical" if row["params_identical"]
                                      else "differ by up to %.3g" % row["params_max_diff"],
                                      time.monotonic() - t0), flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(dict(row, settings=vars_for_json(args))) + "\n")
    finally:
        for name in os.listdir(out_dir):
            if name.endswith(".npz"):
                os.unlink(os.path.join(out_dir, name))
    load1 = os.getloadavg()
    for c in args.contenders:
        if c not in missing and c not in results:
            why = "; ".join("round %d: %s" % (r, e) for cc, r, e in failures if cc == c)
            not_measured(c, "every run failed (%s; log %s)" % (why or "no run", log_path))
    failures = [f for f in failures if f[0] in results]
    text = table(args, results, missing, failures, (load0, load1))
    print()
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    print("\n(run log: %s)" % log_path)
    return 0 if results else 1


def vars_for_json(args):
    return {k: getattr(args, k) for k in ("model", "image", "batch", "ranks", "steps", "warmup", "local_threads",
                                           "lr", "seed", "rounds")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--tag", help=argparse.SUPPRESS)
    ap.add_argument("--out-dir", help=argparse.SUPPRESS)
    ap.add_argument("--mxnet-python", help="python with mxnet 1.9.1 (and plait's bindings on "
                    "PYTHONPATH) for plait, ps and local")
    ap.add_argument("--horovod-python", help="python of a Horovod 0.28.1 built with MXNet and "
                    "Gloo; its horovodrun sits next to it")
    ap.add_argument("--plaitrun", help="plaitrun, for the plait contenders")
    ap.add_argument("--plait-env", action="append", default=[], metavar="NAME=VALUE",
                    help="environment for the plait ranks (PLAIT_LIBRARY=..., PYTHONPATH=...)")
    ap.add_argument("--contenders", default=",".join(CONTENDERS),
                    help="comma-separated, of %s (default all)" % ", ".join(CONTENDERS))
    ap.add_argument("--not-measured", action="append", default=[], metavar="CONTENDER=REASON",
                    help="a contender known not to run here, reported NOT MEASURED")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--model", default="resnet18_v1", help="a gluon model zoo name")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--image", type=int, default=32, help="image side (pixels)")
    ap.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    ap.add_argument("--steps", type=int, default=15, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="steps per run not measured")
    ap.add_argument("--nbatches", type=int, default=4, help="distinct batches per rank")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--local-threads", type=int, default=1,
                    help="OMP_NUM_THREADS of the local reference (default 1: with 2 on this "
                         "busy 2-core machine OpenMP's barriers made it 2-5x slower)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run before it is stopped")
    ap.add_argument("--json", help="append each run's result as a JSON line here")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--log", help="the runs' output (default: a file in a temporary folder)")
    args = ap.parse_args()
    if args.worker:
        if not args.tag or not args.out_dir:
            sys.exit("mxnet_bench.py: --worker needs --tag and --out-dir")
        worker(args)
        return 0
    for name, lo in (("rounds", 1), ("ranks", 2), ("batch", 1), ("steps", 1), ("warmup", 0),
                     ("nbatches", 1), ("image", 8), ("timeout", 1), ("local_threads", 1)):
        if getattr(args, name) < lo:
            ap.error("--%s must be at least %d (got %d)" % (name, lo, getattr(args, name)))
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = [c for c in args.contenders if c not in CONTENDERS]
    if bad or not args.contenders:
        ap.error("--contenders: unknown %s (known: %s)" % (", ".join(bad) or "(none given)",
                                                            ", ".join(CONTENDERS)))
    nm = []
    for item in args.not_measured:
        c, sep, reason = item.partition("=")
        if not sep or c not in CONTENDERS or not reason:
            ap.error("--not-measured wants CONTENDER=REASON with CONTENDER one of %s (got %r)"
                     % (", ".join(CONTENDERS), item))
        nm.append((c, reason))
    args.not_measured = nm
    env = {}
    for item in args.plait_env:
        k, sep, v = item.partition("=")
        if not sep or not k:
            ap.error("--plait-env wants NAME=VALUE (got %r)" % item)
        env[k] = v
    args.plait_env = env
    if not args.mxnet_python:
        ap.error("--mxnet-python is required (a python with mxnet)")
    try:
        args.mxnet_version = subprocess.run(
            [args.mxnet_python, "-c", "import mxnet; print(mxnet.__version__)"],
            capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        sys.exit("mxnet_bench.py: --mxnet-python %s cannot import mxnet: %s"
                 % (args.mxnet_python, getattr(e, "stderr", "") or e))
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
