#!/usr/bin/env python3
"""Autotune's choice against the sweep's best, timed side by side (ci/bench,
section 4; docs/performance.md, goal (c)).

The sweep (section 3) and the autotune run (section 4) are minutes apart,
and on a shared machine the same setting's step time moves by 1.5x in that
time, so their ratio says more about the machine than about the tuner.
ci/bench therefore times, after each settled autotune run, the setting it
chose, the sweep's best point and the defaults again, in interleaved rounds;
bench/goals.py takes "autotune / best" from those rounds.

  recheck.py points --sweep F --tuning F --transport L --ranks N --mix M
      prints "role threshold max_tensor cycle_ms" lines: autotune (the
      settings of the last autotune row of that mix), best (the sweep's
      fastest point), defaults ("- - -": plait-bench --job-settings); exits 1
      with the reason on stderr when either is missing
  recheck.py tag --json F --role R --round K
      prints plait-bench's last JSON row of F as a "recheck" row
"""
import argparse
import json
import sys


def rows(path):
    try:
        with open(path) as fh:
            return [json.loads(l) for l in fh if l.strip()]
    except OSError:
        return []


def points(a):
    key = lambda r: (r.get("transport"), r.get("ranks"), r.get("mix"))
    want = (a.transport, a.ranks, a.mix)
    sweep = [r for r in rows(a.sweep) if r.get("kind") == "fusion" and not r.get("autotune")
             and key(r) == want]
    tuned = [r for r in rows(a.tuning) if r.get("kind") == "fusion" and r.get("autotune")
             and key(r) == want]
    if not sweep or not tuned:
        print("recheck.py: no %s for %s, %d ranks, %s" % (
            "sweep row" if not sweep else "autotune row", a.transport, a.ranks, a.mix),
            file=sys.stderr)
        return 1
    best = min(sweep, key=lambda r: r["step_s_median"])
    for role, r in (("autotune", tuned[-1]), ("best", best)):
        print("%s %d %d %g" % (role, r["threshold_bytes"], r.get("fusion_max_tensor_bytes") or 0,
                               r["cycle_time_ms"]))
    print("defaults - - -")
    return 0


def tag(a):
    got = rows(a.json)
    if not got:
        print("recheck.py: %s has no row" % a.json, file=sys.stderr)
        return 1
    r = dict(got[-1])
    r.update(kind="recheck", role=a.role, round=a.round)
    print(json.dumps(r, sort_keys=True))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("points")
    q.add_argument("--sweep", required=True)
    q.add_argument("--tuning", required=True)
    q.add_argument("--transport", required=True)
    q.add_argument("--ranks", type=int, required=True)
    q.add_argument("--mix", required=True)
    t = sub.add_parser("tag")
    t.add_argument("--json", required=True)
    t.add_argument("--role", required=True)
    t.add_argument("--round", type=int, required=True)
    a = p.parse_args(argv)
    return points(a) if a.cmd == "points" else tag(a)


if __name__ == "__main__":
    sys.exit(main())
