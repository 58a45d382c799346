#!/usr/bin/env python3
"""ctest's start order in a fresh build: the longest entries first.

ctest -j2 starts tests in the order of their cost: the seconds each took
last time, from BUILD/Testing/Temporary/CTestCostData.txt. A clean clone
has no such file, so every cost is 0 and ctest starts them in the order
they were added: the soak, added late, started after 220 others and then
ran alone for minutes while the other slot idled (RUN_SERIAL entries wait
until nothing else runs, so they could not fill it). ci/test seeds that file
from ci/lib/ctest_costs.txt (seconds per entry, from a loaded run here)
when the build has none; a build that has run ctest keeps its own.

  ctest_costs.py seed BUILD         # write BUILD's cost data unless it has some
  ctest_costs.py model BUILD [--times FILE] [--set NAME=SECONDS ...]
                                    # the modelled ctest -j2 wall time, in the order
                                    # of test registration and in the order of cost
  ctest_costs.py update LOG         # ci/lib/ctest_costs.txt from a ctest console log
  ctest_costs.py self-test          # the model and the seeding on made-up entries

The model replays ctest's scheduling (two slots; an entry starts when its
fixtures' setups are done and its RESOURCE_LOCKs are free; a RUN_SERIAL one
only when nothing runs) with each entry's seconds: on the loaded run the
costs come from (ci/lib/ctest_costs.txt), it gives the measured wall time
(3967 s) for the order of registration.
"""
import argparse
import heapq
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COSTS = os.path.join(HERE, "ctest_costs.txt")
CTEST_LINE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+\s*(?:\*+)?\s*\w+.*?\s([\d.]+) sec", re.M)


def read_costs(path=COSTS):
    """{name: seconds} from a file of 'SECONDS NAME' lines ('#' comments)."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2:
                raise SystemExit("%s:%d: expected 'SECONDS NAME', got %r" % (path, n, line))
            try:
                out[parts[1]] = float(parts[0])
            except ValueError:
                raise SystemExit("%s:%d: %r is not a number of seconds" % (path, n, parts[0]))
    return out


def seed(build):
    """Writes BUILD's CTestCostData.txt from the costs file unless it exists."""
    tmp = os.path.join(build, "Testing", "Temporary")
    data = os.path.join(tmp, "CTestCostData.txt")
    if os.path.exists(data) and os.path.getsize(data) > 0:
        print("ctest_costs: %s has ctest's own costs; kept" % data)
        return 0
    costs = read_costs()
    os.makedirs(tmp, exist_ok=True)
    with open(data, "w") as f:
        for name, s in sorted(costs.items()):
            f.write("%s 1 %g\n" % (name, s))
        f.write("---\n")
    print("ctest_costs: %d costs from %s written to %s (longest entries start first)"
          % (len(costs), os.path.relpath(COSTS), data))
    return 0


def tests_of(build):
    """ctest's entries of BUILD with the properties the scheduling reads."""
    p = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True,
                       text=True, timeout=300, check=False)
    if p.returncode != 0:
        raise SystemExit("ctest --show-only in %s failed: %s" % (build, p.stderr.strip()[-300:]))
    out = []
    for i, t in enumerate(json.loads(p.stdout)["tests"]):
        props = {q["name"]: q["value"] for q in t.get("properties", [])}
        out.append({"name": t["name"], "idx": i, "serial": bool(props.get("RUN_SERIAL")),
                    "locks": set(props.get("RESOURCE_LOCK") or []),
                    "req": set(props.get("FIXTURES_REQUIRED") or []),
                    "setup": set(props.get("FIXTURES_SETUP") or [])})
    return out


def _startable(t, running, done, held, setups):
    if any(s not in done for f in t["req"] for s in setups.get(f, [])) or t["locks"] & held:
        return False
    return not (t["serial"] and running) and not any(r[2]["serial"] for r in running)


def simulate(tests, seconds, by_cost, jobs=2):
    """The modelled wall time of ctest -j JOBS over tests lasting seconds."""
    setups = {}
    for t in tests:
        for f in t["setup"]:
            setups.setdefault(f, []).append(t["name"])
    pending = sorted(tests, key=lambda t: -seconds.get(t["name"], 0)) if by_cost else list(tests)
    running, done, held, now = [], set(), set(), 0.0
    while pending or running:
        while len(running) < jobs:
            t = next((t for t in pending if _startable(t, running, done, held, setups)), None)
            if t is None:
                break
            heapq.heappush(running, (now + seconds.get(t["name"], 0), t["idx"], t))
            held |= t["locks"]
            pending.remove(t)
        if not running:
            raise SystemExit("model: %s can never start" % ", ".join(t["name"] for t in pending))
        now, _, t = heapq.heappop(running)
        done.add(t["name"])
        held -= t["locks"]
    return now


def model(args):
    seconds = read_costs(args.times or COSTS)
    for kv in args.set:
        name, _, s = kv.partition("=")
        seconds[name] = float(s)
    tests = tests_of(args.build)
    missing = [t["name"] for t in tests if t["name"] not in seconds]
    total = sum(seconds.get(t["name"], 0) for t in tests)
    serial = sum(seconds.get(t["name"], 0) for t in tests if t["serial"])
    print("model: %d entries, %.0f s of tests (%.0f s RUN_SERIAL); %d without a time (0 s)%s"
          % (len(tests), total, serial, len(missing), (": " + ", ".join(missing[:8])) if missing else ""))
    for by_cost, what in ((False, "in the order of registration (no cost data)"),
                          (True, "longest first (seeded costs)")):
        print("model: ctest -j2 %s: %.0f s" % (what, simulate(tests, seconds, by_cost)))
    return 0


def update(log):
    with open(log, errors="replace") as f:
        found = CTEST_LINE.findall(f.read())
    if not found:
        raise SystemExit("update: no ctest result lines in %s" % log)
    old = open(COSTS).read().splitlines()
    head = [line for line in old if line.startswith("#")]
    with open(COSTS, "w") as f:
        f.write("\n".join(head) + "\n")
        for name, s in sorted(found, key=lambda x: -float(x[1])):
            f.write("%.2f %s\n" % (float(s), name))
    print("update: %d entries from %s into %s" % (len(found), log, COSTS))
    return 0


def _t(name, idx, serial=False, locks=(), req=(), setup=()):
    return {"name": name, "idx": idx, "serial": serial, "locks": set(locks), "req": set(req),
            "setup": set(setup)}


def self_test():
    import tempfile
    # registration order: the long one last; a serial one waits for both slots
    tests = [_t("a", 0), _t("s", 1, serial=True), _t("b", 2), _t("long", 3)]
    secs = {"a": 1, "s": 2, "b": 1, "long": 10}
    assert simulate(tests, secs, False) == 13, simulate(tests, secs, False)  # a,b; long; s
    assert simulate(tests, secs, True) == 12, simulate(tests, secs, True)  # long | a,b; then s
    # a RESOURCE_LOCK keeps two entries apart; a fixture's setup runs first
    locked = [_t("x", 0, locks=["l"]), _t("y", 1, locks=["l"]), _t("z", 2)]
    assert simulate(locked, {"x": 3, "y": 3, "z": 1}, False) == 6
    fix = [_t("use", 0, req=["f"]), _t("make", 1, setup=["f"])]
    assert simulate(fix, {"use": 1, "make": 2}, False) == 3
    with tempfile.TemporaryDirectory() as d:
        seed(d)
        data = os.path.join(d, "Testing", "Temporary", "CTestCostData.txt")
        lines = open(data).read().splitlines()
        assert lines[-1] == "---" and len(lines) == len(read_costs()) + 1, lines[-3:]
        assert all(len(ln.split()) == 3 and ln.split()[1] == "1" for ln in lines[:-1])
        with open(data, "w") as f:
            f.write("mine 3 1.5\n---\n")
        seed(d)  # a build's own costs are kept
        assert open(data).read() == "mine 3 1.5\n---\n"
        bad = os.path.join(d, "bad.txt")
        with open(bad, "w") as f:
            f.write("# comment\nten soak_bounded\n")
        try:
            read_costs(bad)
            raise AssertionError("a bad line was read")
        except SystemExit as e:
            assert "'ten' is not a number of seconds" in str(e), e
    print("ctest_costs: self-test passed")
    return 0


def main(argv):
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = a.add_subparsers(dest="cmd", required=True)
    sub.add_parser("seed").add_argument("build")
    m = sub.add_parser("model")
    m.add_argument("build")
    m.add_argument("--times", help="'SECONDS NAME' lines (default ci/lib/ctest_costs.txt)")
    m.add_argument("--set", action="append", default=[], metavar="NAME=SECONDS")
    sub.add_parser("update").add_argument("log")
    sub.add_parser("self-test")
    args = a.parse_args(argv)
    if args.cmd == "seed":
        return seed(args.build)
    if args.cmd == "model":
        return model(args)
    if args.cmd == "update":
        return update(args.log)
    return self_test()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
