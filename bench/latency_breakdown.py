#!/usr/bin/env python3
"""Where a lone operation's time goes, from the timelines of every rank.

    PLAIT_TIMELINE=/tmp/tl.%r.json plaitrun -np 2 build/bin/plait-bench latency --iters 2000
    bench/latency_breakdown.py /tmp/tl.0.json /tmp/tl.1.json [--name latency.0]

Each rank's trace carries its clock's Unix time at ts 0 (the "plait_clock"
record), so the ranks' events are put on one time axis (one machine: one
clock). For the k-th operation of the tensor (NEGOTIATE begins at its
submission and ends when its response list reached that rank; the transport's
activity is the collective), it prints the median over operations, in us, of:

  submit skew          last rank's submission - first rank's
  list on rank 0       rank 0: last submission -> its list built and sent
  list on rank r       rank r: last submission -> rank 0's list reached it
  queue + copy (r)     list reached rank r -> its transport call began
  collective (r)       rank r's transport call
  entry skew           last rank entering the collective - first rank
  complete->submit (r) rank r: collective ended -> its next submission
                       (handle completed, the waiting thread woken, the
                       benchmark's loop)
  period               one operation to the next, on rank 0

The timeline costs time of its own: these are proportions, not the
benchmark's figures.
"""
import argparse
import json
import statistics
import sys


def load(path, name):
    with open(path) as f:
        events = json.load(f)
    base = None
    tids = set()
    for e in events:
        if e.get("name") == "plait_clock":
            base = e["args"]["unix_time_us_at_ts_0"]
        if e.get("name") == "thread_name" and e.get("args", {}).get("name") == name:
            tids.add(e["tid"])
    if base is None:
        sys.exit("%s: no plait_clock record (not a plait timeline?)" % path)
    if not tids:
        sys.exit("%s: no tensor named %r" % (path, name))
    ops, cur = [], None
    for e in events:
        if e.get("tid") not in tids or e.get("ph") not in ("B", "E"):
            continue
        t = base + e["ts"]
        kind = e["name"]
        if kind == "NEGOTIATE" and e["ph"] == "B":
            cur = {"submit": t}
            ops.append(cur)
        elif cur is None:
            continue
        elif kind == "NEGOTIATE":
            cur["listed"] = t
        elif kind.endswith("ALLREDUCE") and e["ph"] == "B":
            cur["coll_b"] = t
        elif kind.endswith("ALLREDUCE"):
            cur["coll_e"] = t
    return [o for o in ops if len(o) == 4]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("timelines", nargs="+", help="one per rank, rank 0 first")
    ap.add_argument("--name", default="latency.0", help="the tensor (default latency.0)")
    ap.add_argument("--skip", type=int, default=50, help="first operations left out")
    a = ap.parse_args()
    ranks = [load(p, a.name) for p in a.timelines]
    n = min(len(r) for r in ranks)
    if n <= a.skip + 1:
        sys.exit("too few operations in common: %d" % n)
    rows = {}

    def add(key, v):
        rows.setdefault(key, []).append(v)

    for k in range(a.skip, n - 1):
        ops = [r[k] for r in ranks]
        last = max(o["submit"] for o in ops)
        add("submit skew", last - min(o["submit"] for o in ops))
        add("entry skew", max(o["coll_b"] for o in ops) - min(o["coll_b"] for o in ops))
        for i, o in enumerate(ops):
            add("list on rank %d" % i, o["listed"] - last)
            add("queue + copy (%d)" % i, o["coll_b"] - o["listed"])
            add("collective (%d)" % i, o["coll_e"] - o["coll_b"])
            add("complete->submit (%d)" % i, ranks[i][k + 1]["submit"] - o["coll_e"])
        add("period", ranks[0][k + 1]["submit"] - ops[0]["submit"])
    print("# %d ranks, %d operations of %r; medians in us" % (len(ranks), n - 1 - a.skip, a.name))
    for key, v in rows.items():
        print("%-22s %8.1f" % (key, statistics.median(v)))


if __name__ == "__main__":
    main()
