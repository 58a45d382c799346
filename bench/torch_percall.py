#!/usr/bin/env python3
"""plait.torch's per-call cost: the submission of an in-place allreduce
(allreduce_async_, the DistributedOptimizer's call) and the synchronize of
one that has already finished, in microseconds per call, at 1 rank.

Each step submits N named contiguous CPU tensors (64 KiB float32 each),
waits (poll, untimed) until plait has finished them all, then synchronizes
them; the figures are the medians over the steps of each step's time per
call, and the median over rounds of those.

    bench/torch_percall.py [--before REV] [--rounds 5] [--steps 60] [--tensors 200]

With --before REV (e.g. main, a commit), the bindings of REV (git archive of
bindings/python) are measured against this tree's, in alternating rounds of
the same run, with the same libplait (PLAIT_LIBRARY: the build's), so the
two columns differ only in the Python layer. Prints what ran, on what, and
both columns side by side.

Environment: PLAIT_LIBRARY and PLAIT_PLUGIN_PATH as for any plait.torch
script (default: build/lib of this tree); PLAIT_TRANSPORT (default ofi when
its plugin loads, else gloo; ofi/shm at 1 rank was the transport of the
figures in docs/design.md).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args):
    import torch
    import plait.torch as hvd
    hvd.init()
    ts = [torch.ones(16384) for _ in range(args.tensors)]
    names = ["percall.%d" % i for i in range(args.tensors)]
    submit, sync = [], []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        hs = [hvd.allreduce_async_(t, name=n, op=hvd.Sum) for t, n in zip(ts, names)]
        t1 = time.perf_counter()
        while not hvd.poll(hs[-1]) or not all(hvd.poll(h) for h in hs):
            time.sleep(0.0005)
        t2 = time.perf_counter()
        for h in hs:
            hvd.synchronize(h)
        t3 = time.perf_counter()
        if step >= args.warmup:
            submit.append((t1 - t0) / len(ts) * 1e6)
            sync.append((t3 - t2) / len(ts) * 1e6)
    import plait
    out = {"submit_us": statistics.median(submit), "sync_us": statistics.median(sync),
           "transport": plait.transport_name(), "torch": torch.__version__}
    hvd.shutdown()
    print("PERCALL " + json.dumps(out))


def run_one(bindings, args, env):
    env = dict(env, PYTHONPATH=bindings)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(args.steps),
           "--tensors", str(args.tensors), "--warmup", str(args.warmup)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    for line in p.stdout.splitlines():
        if line.startswith("PERCALL "):
            return json.loads(line[len("PERCALL "):])
    raise SystemExit("torch_percall: the worker with %s failed:\n%s" % (bindings, p.stderr[-3000:]))


def environment():
    env = dict(os.environ)
    lib = os.path.join(ROOT, "build", "lib")
    env.setdefault("PLAIT_LIBRARY", os.path.join(lib, "libplait.so"))
    env.setdefault("PLAIT_PLUGIN_PATH", lib)
    env.setdefault("OMP_NUM_THREADS", "1")
    if "PLAIT_TRANSPORT" not in env:
        ofi = os.path.join(env["PLAIT_PLUGIN_PATH"].split(":")[0], "libplait-transport-ofi.so")
        env["PLAIT_TRANSPORT"] = "ofi" if os.path.exists(ofi) else "gloo"
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="a git revision whose bindings to measure side by side")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tensors", type=int, default=200)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    env = environment()
    variants = [("after (this tree)", os.path.join(ROOT, "bindings", "python"))]
    tmp = None
    if args.before:
        tmp = tempfile.TemporaryDirectory(prefix="percall-")
        archive = subprocess.run(["git", "-C", ROOT, "archive", args.before, "bindings/python"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp.name], input=archive, check=True)
        variants.insert(0, ("before (%s)" % args.before,
                            os.path.join(tmp.name, "bindings", "python")))
    results = {label: [] for label, _ in variants}
    info = None
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for label, path in order:
            info = run_one(path, args, env)
            results[label].append(info)
    print("plait.torch per-call cost, 1 rank, transport %s, torch %s, python %s, %s, %d cpus"
          % (info["transport"], info["torch"], platform.python_version(), platform.machine(),
             os.cpu_count()))
    print("%d rounds (alternating order) x %d steps x %d tensors of 64 KiB; medians in us"
          % (args.rounds, args.steps, args.tensors))
    print("(median over rounds; best round beside it: on a shared machine the rounds"
          " another job disturbed read high)")
    print("%-24s %12s %14s %12s %12s   %s" % ("bindings", "submit (us)", "sync done (us)",
                                            "best submit", "best sync",
                                            "per round: submit / sync"))
    for label, _ in variants:
        rs = results[label]
        print("%-24s %12.2f %14.2f %12.2f %12.2f   %s" % (
            label, statistics.median(x["submit_us"] for x in rs),
            statistics.median(x["sync_us"] for x in rs),
            min(x["submit_us"] for x in rs), min(x["sync_us"] for x in rs),
            ", ".join("%.2f/%.2f" % (x["submit_us"], x["sync_us"]) for x in rs)))
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
