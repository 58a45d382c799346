#!/usr/bin/python3
"""Side-by-side table for ci/bench: medians over interleaved rounds and
ratios against plait, per workload.

    bench/compare.py comparison.jsonl [--markdown OUT.md]

Input: JSON lines written during ci/bench's comparison rounds:
  - {"kind":"comparison","system","workload","median_s",...}: from
    mpi_allreduce and bench/torch_bench.py;
  - {"impl","workload","median_s",...}: from bench/horovod_bench.py
    (workloads fused, large, unfused);
  - plait-bench rows, turned into comparison rows here: a fusion row of the
    uniform-200x64K mix at one threshold -> workload "200x64K", system
    "plait-<transport>"; an allreduce row of 64 MiB -> workload
    "allreduce-64M".
  - {"kind":"missing","system","reason"}: a system that was meant to be
    measured and was not (Horovod not built, Open MPI missing, a run that
    failed): written by ci/bench.
Each input row is one round's median; the table gives the median over rounds,
the spread of the rounds, and each system's time relative to the fastest
plait system of that workload (> 1: slower than plait).

A system that is missing, or named with --expect and has no row at all, is
never left out silently: a "NOT MEASURED: <system>: <reason>" line comes
first (on stdout and stderr) and every table gets a NOT MEASURED row for it.
"""

import argparse
import json
import statistics
import sys


def rows_from(path):
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                sys.exit("compare.py: %s:%d: not JSON: %s" % (path, lineno, e))
            kind = r.get("kind")
            if kind == "missing":
                yield r.get("system", "?"), None, r.get("reason") or "no reason given"
            elif kind is None and "impl" in r:  # bench/horovod_bench.py
                work = {"fused": "200x64K", "large": "allreduce-64M",
                        "unfused": "200x64K-unfused"}.get(r["workload"], r["workload"])
                if r["impl"] == "horovod":
                    system = "horovod"
                else:  # plait.torch through the same script, named by its transport
                    st = r.get("settings", {})
                    transport = st.get("PLAIT_TRANSPORT", "gloo")
                    if transport == "ofi" and st.get("FI_PROVIDER"):
                        transport += "-" + st["FI_PROVIDER"]
                    system = "plait.torch-" + transport
                yield system, work, float(r["median_s"])
            elif kind == "comparison":
                yield r["system"], r["workload"], float(r["median_s"])
            elif kind == "fusion" and r.get("mix", "").startswith("uniform-200x64"):
                yield "plait-" + r["transport"], "200x64K", float(r["step_s_median"])
            elif kind == "collective" and r.get("collective") == "allreduce" and \
                    r.get("bytes") == 64 << 20:
                name = r["transport"]
                system = name if name == "openmpi" else "plait-" + name
                yield system, "allreduce-64M", float(r["time_s_median"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--expect", action="append", default=[], metavar="SYSTEM",
                    help="a system (or prefix: horovod, openmpi, torch) that should have "
                         "rows; reported NOT MEASURED when it has none (repeatable)")
    args = ap.parse_args()
    data = {}
    missing = {}  # system -> reason
    for path in args.files:
        for system, workload, t in rows_from(path):
            if workload is None:
                missing.setdefault(system, t)
            else:
                data.setdefault(workload, {}).setdefault(system, []).append(t)
    measured = {s for systems in data.values() for s in systems}
    for e in args.expect:
        if not any(s == e or s.startswith(e + "-") or s.startswith(e + ".") for s in measured):
            missing.setdefault(e, "no result was recorded for it (its run wrote no rows)")
    if not data and not missing:
        sys.exit("compare.py: no comparison rows in %s" % ", ".join(args.files))
    out = ["NOT MEASURED: %s: %s" % (s, missing[s]) for s in sorted(missing)]
    for line in out:
        print(line, file=sys.stderr)
    if out:
        out.append("")
    for workload in sorted(data):
        systems = data[workload]
        med = {s: statistics.median(v) for s, v in systems.items()}
        plait = [m for s, m in med.items() if s.startswith("plait")]
        base = min(plait) if plait else None
        out.append("### %s" % workload)
        out.append("")
        out.append("| system | median time | rounds | round medians (min - max) | vs best plait |")
        out.append("|---|---|---|---|---|")
        for s in sorted(med, key=med.get):
            v = systems[s]
            ratio = "%.2fx" % (med[s] / base) if base else "-"
            out.append("| %s | %.2f ms | %d | %.2f - %.2f ms | %s |"
                       % (s, 1e3 * med[s], len(v), 1e3 * min(v), 1e3 * max(v), ratio))
        for s in sorted(missing):
            out.append("| %s | NOT MEASURED: %s | - | - | - |" % (s, missing[s].replace("|", "/")))
        out.append("")
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
