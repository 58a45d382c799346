#!/usr/bin/python3
"""Side-by-side table for ci/bench: medians over interleaved rounds and
ratios against plait, per workload and rank count.

    bench/compare.py comparison.jsonl [--markdown OUT.md] [--expect SYSTEM]...
                     [--ranks 2,3]

Input: JSON lines written during ci/bench's comparison rounds:
  - {"kind":"comparison","system","workload","ranks","median_s",...}: from
    mpi_allreduce and bench/torch_bench.py;
  - {"impl","workload","ranks","median_s",...}: from bench/horovod_bench.py
    (workloads fused, large, unfused); its plait rows are named
    "plait.torch-<transport>-hvdbench" (the script Horovod runs);
  - plait-bench rows, turned into comparison rows here: a fusion row of the
    uniform-200x64K mix at one threshold -> workload "200x64K", system
    "plait-<transport>"; an allreduce row of 64 MiB -> workload
    "allreduce-64M"; a latency row (plait-bench latency, mpi_allreduce
    --latency) of N KiB -> workload "latency-<N>K", system "plait-<transport>"
    or "openmpi";
  - bench_transport -j rows of 64 MiB -> workload "allreduce-64M", system
    "plugin-<transport>" (the plugin alone, no plait core) or "memcpy";
  - {"kind":"missing","system","reason"[,"ranks"][,"workload"]}: a system that
    was meant to be measured and was not (Horovod not built, Open MPI missing,
    a run that failed): written by ci/bench. With "ranks" or "workload" it
    concerns only those tables.
Rows without "ranks" count as 2 ranks (ci/bench's only rank count before).
Each input row is one round's median; the table gives the median over rounds,
the spread of the rounds, and each system's time relative to the fastest
plait system of that workload and rank count (> 1: slower than plait).

A system that is missing, or named with --expect and has no row at all (at a
rank count of --ranks), is never left out silently: a "NOT MEASURED: <system>:
<reason>" line comes first (on stdout and stderr) and every table it concerns
gets a NOT MEASURED row for it.
"""

import argparse
import json
import statistics
import sys


def size_name(n):
    return "%dM" % (n >> 20) if n >= 1 << 20 and n % (1 << 20) == 0 else "%dK" % (n >> 10)


def plait_name(transport):
    return transport if transport in ("openmpi", "openmpi-mpi4py", "memcpy") else \
        "plait-" + transport


def row_of(r):
    """(system, workload, ranks, seconds) of a measured row, or None."""
    kind, ranks = r.get("kind"), int(r.get("ranks", 2))
    if kind is None and "impl" in r:  # bench/horovod_bench.py
        work = {"fused": "200x64K", "large": "allreduce-64M",
                "unfused": "200x64K-unfused"}.get(r["workload"], r["workload"])
        if r["impl"] == "horovod":
            system = "horovod"
        else:  # plait.torch through the same script, named by its transport
            st = r.get("settings", {})
            transport = st.get("PLAIT_TRANSPORT", "gloo")
            if transport == "ofi" and st.get("FI_PROVIDER"):
                transport += "-" + st["FI_PROVIDER"]
            system = "plait.torch-%s-hvdbench" % transport
        return system, work, ranks, float(r["median_s"])
    if kind == "comparison":
        return r["system"], r["workload"], ranks, float(r["median_s"])
    if kind == "fusion" and r.get("mix", "").startswith("uniform-200x64"):
        return "plait-" + r["transport"], "200x64K", ranks, float(r["step_s_median"])
    if kind == "collective" and r.get("collective") == "allreduce" and r.get("bytes") == 64 << 20:
        return plait_name(r["transport"]), "allreduce-64M", ranks, float(r["time_s_median"])
    if kind == "latency":
        return (plait_name(r["transport"]), "latency-" + size_name(r["bytes"]), ranks,
                float(r["time_s_median"]))
    if kind == "transport" and r.get("bytes") == 64 << 20 and \
            r.get("collective") in ("allreduce", "memcpy"):
        t = r["transport"]
        return ("memcpy" if t == "memcpy" else "plugin-" + t), "allreduce-64M", ranks, \
            float(r["time_s_median"])
    return None


def rows_from(path):
    """Yields ("row", system, workload, ranks, seconds) and
    ("missing", system, workload or None, ranks or None, reason)."""
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                sys.exit("compare.py: %s:%d: not JSON: %s" % (path, lineno, e))
            if r.get("kind") == "missing":
                ranks = r.get("ranks")
                yield ("missing", r.get("system", "?"), r.get("workload"),
                       int(ranks) if ranks is not None else None,
                       r.get("reason") or "no reason given")
                continue
            try:
                got = row_of(r)
            except (KeyError, TypeError, ValueError) as e:
                sys.exit("compare.py: %s:%d: a %s row without a usable %s" % (
                    path, lineno, r.get("kind") or r.get("impl"), e))
            if got:
                yield ("row",) + got


def load(paths):
    """data {(workload, ranks): {system: [seconds]}}, missing [(system,
    workload, ranks, reason)] (first reason per system, workload, ranks)."""
    data, missing, seen = {}, [], set()
    for path in paths:
        for rec in rows_from(path):
            if rec[0] == "row":
                _, system, workload, ranks, t = rec
                data.setdefault((workload, ranks), {}).setdefault(system, []).append(t)
            elif rec[1:4] not in seen:
                seen.add(rec[1:4])
                missing.append(rec[1:])
    return data, missing


def expected_missing(data, expect, ranks_list):
    """A --expect system without rows at a rank count: (system, None, ranks, reason)."""
    out = []
    for e in expect:
        for n in ranks_list or [None]:
            have = {s for (w, r), systems in data.items() if n is None or r == n for s in systems}
            if not any(s == e or s.startswith(e + "-") or s.startswith(e + ".") for s in have):
                out.append((e, None, n, "no result was recorded for it (its run wrote no rows)"))
    return out


def concerns(m, workload, ranks):
    return (m[1] is None or m[1] == workload) and (m[2] is None or m[2] == ranks)


def where(m):
    parts = [x for x in (m[1], "%d ranks" % m[2] if m[2] else None) if x]
    return " (%s)" % ", ".join(parts) if parts else ""


def tables(data, missing):
    out = ["NOT MEASURED: %s%s: %s" % (m[0], where(m), m[3]) for m in missing]
    if out:
        out.append("")
    for workload, ranks in sorted(data, key=lambda k: (k[0], k[1])):
        systems = data[(workload, ranks)]
        med = {s: statistics.median(v) for s, v in systems.items()}
        plait = [m for s, m in med.items() if s.startswith("plait")]
        base = min(plait) if plait else None
        out.append("### %s, %d ranks" % (workload, ranks))
        out.append("")
        out.append("| system | median time | rounds | round medians (min - max) | vs best plait |")
        out.append("|---|---|---|---|---|")
        for s in sorted(med, key=med.get):
            v = systems[s]
            ratio = ("%.2fx" if med[s] >= 0.01 * base else "%.3fx") % (med[s] / base) \
                if base else "-"
            unit, k = ("us", 1e6) if med[s] < 1e-3 else ("ms", 1e3)
            out.append("| %s | %.2f %s | %d | %.2f - %.2f %s | %s |"
                       % (s, k * med[s], unit, len(v), k * min(v), k * max(v), unit, ratio))
        for m in missing:
            if concerns(m, workload, ranks) and m[0] not in med:
                out.append("| %s | NOT MEASURED: %s | - | - | - |" % (m[0], m[3].replace("|", "/")))
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--expect", action="append", default=[], metavar="SYSTEM",
                    help="a system (or prefix: horovod, openmpi, torch) that should have "
                         "rows; reported NOT MEASURED when it has none (repeatable)")
    ap.add_argument("--ranks", default="",
                    help="comma-separated rank counts at which every --expect system must "
                         "have rows (default: at any)")
    args = ap.parse_args()
    try:
        ranks_list = [int(x) for x in args.ranks.split(",") if x]
    except ValueError:
        sys.exit("compare.py: --ranks '%s' is not a list of rank counts" % args.ranks)
    data, missing = load(args.files)
    missing += expected_missing(data, args.expect, ranks_list)
    if not data and not missing:
        sys.exit("compare.py: no comparison rows in %s" % ", ".join(args.files))
    text = tables(data, missing)
    for line in text.splitlines():
        if line.startswith("NOT MEASURED"):
            print(line, file=sys.stderr)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
