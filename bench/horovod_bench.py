#!/usr/bin/env python3
"""plait.torch and horovod.torch measured by the same code.

    plaitrun -np 2 python3 bench/horovod_bench.py --impl plait [--json out.jsonl]
    horovodrun -np 2 -H localhost:2 --gloo python bench/horovod_bench.py --impl horovod
    python3 bench/horovod_bench.py --report out.jsonl      # the table of several runs

Every rank imports `plait.torch` or `horovod.torch` as `hvd` (--impl) and runs
the same workloads through the same calls:

  fused    COUNT float32 tensors of BYTES each (default 200 x 64 KiB: the
           gradients of one backward pass): allreduce_async_ of all, then
           synchronize of all, per step; the library may fuse them.
  large    one float32 tensor of LARGE_BYTES (default 64 MiB): allreduce_.
  unfused  the COUNT tensors again, each allreduce_async_ followed at once by
           its synchronize, so nothing can be fused (the baseline).

Sums (op=Sum), so no library scales the result; each workload's result is
checked once before timing. Each workload runs WARMUP untimed steps, then
STEPS timed ones; a step's time is the slowest rank's (the step times of all
ranks are allgathered after the timed steps). Rank 0 prints the median, 10th
and 90th percentile per step (and, for plait, what its coordinator did:
plait.stats() over the timed steps) and appends one JSON line per workload
to --json:

  {"impl": "plait", "workload": "fused", "median_s": ..., "p10_s": ..., "p90_s": ...,
   "steps": 20, "round": 1, "version": "0.1.0", "torch": "1.13.0a0", ...}

--report reads such lines (several rounds of both implementations, as
ci/bench horovod writes them) and prints the median over rounds of each
round's median, and the ratio plait : Horovod.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

WORKLOADS = ("fused", "large", "unfused")

parser = argparse.ArgumentParser(
    description="plait.torch vs horovod.torch, identical workloads",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--impl", choices=("plait", "horovod"), default="plait",
                    help="which library `hvd` is: plait.torch or horovod.torch")
parser.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated subset of: " + ", ".join(WORKLOADS))
parser.add_argument("--count", type=int, default=200, help="tensors per step (fused, unfused)")
parser.add_argument("--bytes", type=int, default=64 * 1024, help="bytes per tensor (fused, unfused)")
parser.add_argument("--large-bytes", type=int, default=64 * 2**20, help="bytes of the large tensor")
parser.add_argument("--steps", type=int, default=20, help="timed steps (fused, unfused)")
parser.add_argument("--large-steps", type=int, default=10, help="timed steps (large)")
parser.add_argument("--warmup", type=int, default=3, help="untimed steps before each workload")
parser.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads per rank (0: cores / local ranks)")
parser.add_argument("--json", metavar="FILE", help="append one JSON line per workload (rank 0)")
parser.add_argument("--round", type=int, default=0, help="round number recorded in the JSON")
parser.add_argument("--report", metavar="FILE",
                    help="do not run: print the table of the JSON lines in FILE")


def percentiles(xs):
    """(p10, median, p90) of a list of at least one number."""
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=10, method="inclusive")
    return q[0], statistics.median(xs), q[8]


# --------------------------------------------------------------------------
# A rank
# --------------------------------------------------------------------------

def run(args):
    import torch
    if args.impl == "plait":
        import plait.torch as hvd
        import plait
        # plait_fusion_report.py is shared with the examples
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                        "examples"))
        from plait_fusion_report import fusion_report
        version = plait.__version__
    else:
        import horovod
        import horovod.torch as hvd
        version = horovod.__version__

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    threads = args.threads or max(1, (os.cpu_count() or 1) // hvd.local_size())
    torch.set_num_threads(threads)
    wanted = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in wanted if w not in WORKLOADS]
    if unknown:
        raise SystemExit("horovod_bench: unknown workload(s) %s; known: %s"
                         % (", ".join(unknown), ", ".join(WORKLOADS)))

    def log(s=""):
        if rank == 0:
            print(s, flush=True)

    small = [torch.zeros(args.bytes // 4) for _ in range(args.count)]
    large = torch.zeros(args.large_bytes // 4)

    def fused():
        handles = [hvd.allreduce_async_(t, name="bench.fused.%d" % i, op=hvd.Sum)
                   for i, t in enumerate(small)]
        for h in handles:
            hvd.synchronize(h)

    def unfused():
        for i, t in enumerate(small):
            hvd.synchronize(hvd.allreduce_async_(t, name="bench.unfused.%d" % i, op=hvd.Sum))

    def one_large():
        hvd.synchronize(hvd.allreduce_async_(large, name="bench.large", op=hvd.Sum))

    table = {
        "fused": (fused, small, args.steps,
                  "%d x %d KiB float32, allreduce_async_ all, then synchronize all"
                  % (args.count, args.bytes // 1024)),
        "large": (one_large, [large], args.large_steps,
                  "one %d MiB float32 allreduce" % (args.large_bytes // 2**20)),
        "unfused": (unfused, small, args.steps,
                    "%d x %d KiB float32, synchronize after each allreduce_async_"
                    % (args.count, args.bytes // 1024)),
    }

    log("horovod_bench: %s %s, %d ranks on %s (%d cores), Python %s (%s), torch %s, "
        "%d torch thread(s) per rank, load average %s"
        % (args.impl, version, size, platform.node(), os.cpu_count(), platform.python_version(),
           sys.executable, torch.__version__, threads,
           " ".join("%.2f" % x for x in os.getloadavg())))
    settings = {k: v for k, v in sorted(os.environ.items())
                if (k.startswith("PLAIT_" if args.impl == "plait" else "HOROVOD_")
                    or (k == "FI_PROVIDER" and args.impl == "plait"))
                and k in ("FI_PROVIDER", "PLAIT_FUSION_THRESHOLD", "PLAIT_CYCLE_TIME_MS",
                          "PLAIT_TRANSPORT",
                          "PLAIT_CACHE_CAPACITY", "HOROVOD_FUSION_THRESHOLD",
                          "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY", "HOROVOD_CONTROLLER",
                          "HOROVOD_CPU_OPERATIONS")}
    log("settings: %s" % (", ".join("%s=%s" % kv for kv in settings.items()) or "defaults"))

    expect = size * (size + 1) / 2
    for name in wanted:
        fn, bufs, steps, what = table[name]
        # Check the result once, then zero the buffers so that repeated sums
        # cannot overflow (the cost of a sum does not depend on the values).
        for t in bufs:
            t.fill_(rank + 1)
        fn()
        bad = sum(1 for t in bufs if not bool((t == expect).all()))
        if bad:
            raise SystemExit("horovod_bench: %s: wrong sums in %d of %d tensors"
                             % (name, bad, len(bufs)))
        for t in bufs:
            t.zero_()
        for _ in range(args.warmup):
            fn()
        hvd.barrier()
        if args.impl == "plait":
            plait.stats_reset()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        stats = plait.stats() if args.impl == "plait" else None
        # A step lasts until its slowest rank is done.
        every = hvd.allgather(torch.tensor([times], dtype=torch.float64),
                              name="bench.times.%s" % name)
        slowest = every.max(dim=0).values.tolist()
        p10, med, p90 = percentiles(slowest)
        log("%-8s %s: median %.2f ms per step (p10 %.2f, p90 %.2f) over %d steps"
            % (name, what, 1e3 * med, 1e3 * p10, 1e3 * p90, steps))
        if args.impl == "plait" and rank == 0:
            for line in fusion_report(stats, steps):
                log("         plait: " + line)
        if rank == 0 and args.json:
            rec = {"impl": args.impl, "workload": name, "median_s": med, "p10_s": p10,
                   "p90_s": p90, "steps": steps, "round": args.round, "version": version,
                   "torch": torch.__version__, "python": sys.executable, "ranks": size,
                   "count": args.count if name != "large" else 1,
                   "bytes": args.bytes if name != "large" else args.large_bytes,
                   "settings": settings}
            with open(args.json, "a") as f:
                f.write(json.dumps(rec) + "\n")
    hvd.shutdown()
    return 0


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------

def report(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    # {"kind": "missing", "system": "horovod", "reason": ...}: written by
    # ci/bench horovod when an implementation could not be measured.
    missing = {r.get("system"): r.get("reason", "no reason given")
               for r in rows if r.get("kind") == "missing"}
    rows = [r for r in rows if r.get("kind") != "missing"]
    present = {r["impl"] for r in rows}
    for impl in ("plait", "horovod"):
        if impl not in present:
            missing.setdefault(impl, "no %s rows in %s" % (impl, path))
    for impl in sorted(missing):
        line = "%s: NOT MEASURED: %s" % ("Horovod" if impl == "horovod" else impl,
                                         missing[impl])
        print(line)
        print(line, file=sys.stderr)
    if not rows:
        print("horovod_bench: no results in %s" % path)
        return 1
    per = {}            # (workload, impl) -> [round medians]
    by_round = {}       # (workload, impl, round) -> median
    info = {}
    for r in rows:
        per.setdefault((r["workload"], r["impl"]), []).append(r["median_s"])
        by_round[(r["workload"], r["impl"], r["round"])] = r["median_s"]
        info[r["impl"]] = "%s %s (torch %s)" % (r["impl"], r["version"], r["torch"])
    impls = [i for i in ("plait", "horovod") if i in info]
    print("medians over rounds of each round's median time per step; %s"
          % "; ".join(info[i] for i in impls))
    print()
    absent = [i for i in ("plait", "horovod") if i not in info]
    header = "| workload | " + " | ".join("%s (min - max over rounds)" % i for i in impls)
    header += "".join(" | %s" % i for i in absent)
    if len(impls) == 2:
        header += " | plait / Horovod (of the medians) | plait / Horovod per round: median (each)"
    print(header + " |")
    print("|---" * (1 + len(impls) + len(absent) + (2 if len(impls) == 2 else 0)) + "|")
    for w in WORKLOADS:
        cells, meds = [], []
        for i in impls:
            xs = per.get((w, i))
            if not xs:
                cells.append("-")
                meds.append(None)
                continue
            m = statistics.median(xs)
            meds.append(m)
            cells.append("%.2f ms (%.2f - %.2f, %d rounds)"
                         % (1e3 * m, 1e3 * min(xs), 1e3 * max(xs), len(xs)))
        if all(m is None for m in meds):
            continue
        line = "| %s | %s" % (w, " | ".join(cells))
        line += "".join(" | NOT MEASURED" for _ in absent)
        if len(impls) == 2:
            rounds = sorted(k[2] for k in by_round if k[0] == w and k[1] == "plait"
                            and (w, "horovod", k[2]) in by_round)
            paired = [by_round[(w, "plait", k)] / by_round[(w, "horovod", k)] for k in rounds]
            line += " | %s | %s" % (
                "-" if None in meds else "%.2f" % (meds[0] / meds[1]),
                "-" if not paired else "%.2f (%s)" % (statistics.median(paired),
                                                      " ".join("%.2f" % x for x in paired)))
        print(line + " |")
    if len(impls) == 2:
        print()
        print("Ratios of times: below 1 plait is faster, above 1 Horovod is. Per round, the two "
              "ran back to back, so the\nper-round ratios see the same load; trust their median "
              "more on a busy machine.")
    return 0


def main():
    args = parser.parse_args()
    if args.report:
        return report(args.report)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
