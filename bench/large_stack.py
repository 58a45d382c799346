#!/usr/bin/env python3
"""One large allreduce through the whole stack as a fraction of the plugin alone,
for one or more builds side by side (e.g. main before a change and the change).

    python3 bench/large_stack.py --build before=/path/build-a --build after=build/dev \
        [--rounds 5] [--bytes 64M] [--np 2] [--torch-python PY] [--mix bench/mixes/bert-base.txt]

Each round runs, for every transport (gloo, ofi/shm, ofi/tcp) and every build,
in turn (so load on a shared machine hits all alike):
  - the plugin alone: bench_transport (bench/transport), float32 sum in place;
  - C: plait-bench allreduce of one tensor (out of place), sum and average;
  - plait.torch: bench/torch_bench.py --only b (allreduce_ in place), sum and
    average, with PLAIT_LIBRARY set to the build's libplait.so (skipped
    without --torch-python);
  - with --mix: plait-bench fusion with PLAIT_FUSION_THRESHOLD=0 over ofi/shm
    (time per step of that gradient mix, average allreduces, unfused).
Then it prints the median over the rounds of each measurement (each is itself
a median over iterations), and each stack figure divided by the same build's
plugin-alone time for that transport ("fraction": 1.0 is the plugin's speed).

A build is a CMake build folder with bin/bench_transport, bin/plait-bench,
bin/plaitrun and lib/libplait.so (its plugins beside it); --build
LABEL=DIR,VAR=value,... also sets VAR for everything that build runs (e.g.
GLIBC_TUNABLES=glibc.malloc.hugetlb=1: the benchmarks' own buffers in
transparent huge pages, as the plugins' buffers are).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

TRANSPORTS = [("gloo", {"PLAIT_TRANSPORT": "gloo"}),
              ("ofi/shm", {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "shm"}),
              ("ofi/tcp", {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "tcp"})]
HERE = os.path.dirname(os.path.abspath(__file__))


def size_arg(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    if not m:
        raise argparse.ArgumentTypeError("'%s' is not a size such as 64M" % text)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def run(cmd, env, what):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=900)
    if p.returncode:
        print("large_stack: %s failed (status %d):\n%s" % (what, p.returncode, p.stdout[-3000:]),
              file=sys.stderr)
        return None
    return p.stdout


def plugin_alone(b, label, tenv, nbytes, np_):
    build, benv = b
    spec = label + "=" + ",".join([tenv["PLAIT_TRANSPORT"]] +
                                  ["%s=%s" % kv for kv in tenv.items() if kv[0] != "PLAIT_TRANSPORT"])
    size = "%dM" % (nbytes >> 20)
    out = run([os.path.join(build, "bin", "bench_transport"), "-r", "1", "-n", str(np_), "-o",
               "allreduce", "-s", "%s:%s" % (size, size), spec], dict(os.environ, **benv),
              "bench_transport %s" % label)
    m = out and re.search(r"^\| %d MiB \| [^|]* \| ([0-9.]+) \|" % (nbytes >> 20), out, re.M)
    return float(m.group(1)) * 1e-6 if m else None


def json_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def c_stack(b, tenv, nbytes, np_, op, iters):
    build, benv = b
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "c.jsonl")
        env = dict(os.environ, **tenv, **benv)
        r = run([os.path.join(build, "bin", "plaitrun"), "-np", str(np_),
                 os.path.join(build, "bin", "plait-bench"), "allreduce", "--min", str(nbytes),
                 "--max", str(nbytes), "--op", op, "--iters", str(iters), "--warmup", "2",
                 "--json", out, "--quiet"], env, "plait-bench %s" % op)
        return json_lines(out)[-1]["time_s_median"] if r is not None else None


def torch_stack(b, tenv, nbytes, np_, python, iters):
    build, benv = b
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.jsonl")
        env = dict(os.environ, PLAIT_LIBRARY=os.path.join(build, "lib", "libplait.so"), **tenv,
                   **benv)
        r = run([python, os.path.join(HERE, "torch_bench.py"), "--np", str(np_), "--only", "b",
                 "--rounds", "1", "--large-bytes", str(nbytes), "--large-iters", str(iters),
                 "--warmup", "1", "--json", out], env, "torch_bench")
        if r is None:
            return {}
        return {rec["workload"]: rec["median_s"] for rec in json_lines(out)
                if rec["system"] == "plait.torch"}


def fusion_step(b, np_, mix, steps):
    build, benv = b
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "f.jsonl")
        env = dict(os.environ, PLAIT_TRANSPORT="ofi", FI_PROVIDER="shm", **benv)
        r = run([os.path.join(build, "bin", "plaitrun"), "-np", str(np_),
                 os.path.join(build, "bin", "plait-bench"), "fusion", "--mix", mix,
                 "--thresholds", "0", "--steps", str(steps), "--warmup", "1", "--json", out,
                 "--quiet"], env, "plait-bench fusion")
        return json_lines(out)[-1]["step_s_median"] if r is not None else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", action="append", required=True, metavar="LABEL=DIR")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bytes", type=size_arg, default=64 << 20)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5, help="timed iterations per measurement")
    ap.add_argument("--torch-python", help="python with torch (plait.torch rows)")
    ap.add_argument("--mix", help="gradient mix for the unfused ofi/shm step time")
    ap.add_argument("--steps", type=int, default=5, help="fusion steps per measurement")
    ap.add_argument("--transports", default="gloo,ofi/shm,ofi/tcp")
    args = ap.parse_args()
    builds = []
    for spec in args.build:
        label, rest = spec.split("=", 1)
        bdir, *assigns = rest.split(",")
        builds.append((label, (bdir, dict(a.split("=", 1) for a in assigns))))
    transports = [t for t in TRANSPORTS if t[0] in args.transports.split(",")]
    res = {}

    def note(key, v):
        if v is not None:
            res.setdefault(key, []).append(v)

    for rnd in range(args.rounds):
        for label, tenv in transports:
            for bl, bdir in builds:
                note((bl, label, "plugin alone"), plugin_alone(bdir, label, tenv, args.bytes, args.np))
                for op in ("sum", "average"):
                    note((bl, label, "C " + op), c_stack(bdir, tenv, args.bytes, args.np, op,
                                                         args.iters))
                if args.torch_python:
                    t = torch_stack(bdir, tenv, args.bytes, args.np, args.torch_python, args.iters)
                    for wl, v in t.items():
                        note((bl, label, "torch " + ("average" if "average" in wl else "sum")), v)
        for bl, bdir in builds:
            if args.mix:
                note((bl, "ofi/shm", "mix step"), fusion_step(bdir, args.np, args.mix, args.steps))
        print("round %d of %d done" % (rnd + 1, args.rounds), file=sys.stderr, flush=True)

    med = {k: statistics.median(v) for k, v in res.items()}
    print("\n%d MiB float32 allreduce, %d ranks, median of %d rounds (ms; fraction = plugin alone "
          "/ stack)\n" % (args.bytes >> 20, args.np, args.rounds))
    kinds = ["plugin alone", "C sum", "C average", "torch sum", "torch average"]
    print("| transport | variant | " + " | ".join("%s ms | %s fraction" % (b, b)
                                                    for b, _ in builds) + " |")
    print("|---|---|" + "---:|---:|" * len(builds))
    for label, _ in transports:
        for kind in kinds:
            cells = []
            for bl, _ in builds:
                v, base = med.get((bl, label, kind)), med.get((bl, label, "plugin alone"))
                cells.append("%.1f | %s" % (v * 1e3, "%.2f" % (base / v) if base else "-")
                             if v else "- | -")
            print("| %s | %s | %s |" % (label, kind, " | ".join(cells)))
    if args.mix:
        print("\n%s, unfused (PLAIT_FUSION_THRESHOLD=0), ofi/shm, time per step (median of %d "
              "rounds): %s" % (os.path.basename(args.mix), args.rounds, ", ".join(
                  "%s %.1f ms" % (bl, med[(bl, "ofi/shm", "mix step")] * 1e3)
                  for bl, _ in builds if (bl, "ofi/shm", "mix step") in med)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
