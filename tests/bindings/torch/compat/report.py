"""The table ci/compat prints, from the rank<N>.json files conftest.py
writes (PLAIT_COMPAT_REPORT) for each run.

    python3 report.py DIR...    each DIR: <impl>-np<N>; a file DIR/not-measured
                                (one line: why) stands for a run that could not be made

A test counts as passed when it passed on every rank, failed when it failed
on any rank, skipped otherwise. Exit status 1 when a measured run failed a
test or left no report.
"""

import json
import os
import sys


def load(d):
    why = os.path.join(d, "not-measured")
    if os.path.exists(why):
        with open(why) as f:
            return None, f.read().strip() or "no reason given"
    ranks = sorted(f for f in os.listdir(d) if f.startswith("rank") and f.endswith(".json")) \
        if os.path.isdir(d) else []
    if not ranks:
        return None, "the run left no report (it crashed or timed out before the end; see its log)"
    reports = []
    for name in ranks:
        with open(os.path.join(d, name)) as f:
            reports.append(json.load(f))
    size = reports[0]["size"]
    if len(reports) != size:
        return None, "only %d of %d ranks left a report (see its log)" % (len(reports), size)
    return reports, None


def combine(reports):
    tests = {}
    for rep in reports:
        for nodeid, t in rep["tests"].items():
            cur = tests.setdefault(nodeid, {"outcome": "passed", "differs": t.get("differs")})
            if t["outcome"] == "failed" and cur["outcome"] != "failed":
                cur["outcome"] = "failed"
                cur["reason"] = "rank %d: %s" % (rep["rank"], t.get("reason", "?"))
            elif t["outcome"] == "skipped" and cur["outcome"] == "passed":
                cur["outcome"] = "skipped"
                cur["reason"] = t.get("reason", "?")
    return tests


def main(dirs):
    rows, details, status = [], [], 0
    for d in dirs:
        label = os.path.basename(os.path.normpath(d))
        reports, why = load(d)
        if reports is None:
            rows.append((label, "NOT MEASURED", "", "", "", why))
            status = 1 if not os.path.exists(os.path.join(d, "not-measured")) else status
            continue
        tests = combine(reports)
        count = {k: sum(1 for t in tests.values() if t["outcome"] == k)
                 for k in ("passed", "failed", "skipped")}
        differs = sorted({t["differs"] for t in tests.values() if t.get("differs")})
        rows.append((label, "torch " + reports[0]["torch"], str(count["passed"]),
                     str(count["failed"]), str(count["skipped"]), ", ".join(differs)))
        if count["failed"]:
            status = 1
        for nodeid in sorted(tests):
            t = tests[nodeid]
            if t["outcome"] != "passed":
                details.append("%s %s %s: %s" % (label, t["outcome"].upper(), nodeid,
                                                  t.get("reason", "")))
    head = ("run", "with", "passed", "failed", "skipped", "differs rows / why not measured")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
    for r in [head] + rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(5)) + "  " + r[5])
    if details:
        print()
        print("\n".join(details))
    for r in rows:
        if r[1] == "NOT MEASURED":
            print()
            print("!!! %s was NOT measured: %s" % (r[0], r[5]))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
