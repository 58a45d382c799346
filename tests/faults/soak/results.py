"""What one soak job did, read from its ranks' reports
(plait_soak_plugin.py writes rank<N>.jsonl), and the verdict on it."""

import glob
import json
import os
import re

ORDER = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def read_ranks(report_dir):
    """{rank: {"tests": {nodeid: (outcome, reason)}, "finished": bool,
    "tensors": int, "responses": int}} from the job's report folder."""
    out = {}
    for path in glob.glob(os.path.join(report_dir, "rank*.jsonl")):
        m = re.search(r"rank(\d+)\.jsonl$", path)
        r = {"tests": {}, "finished": False, "tensors": 0, "responses": 0}
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if "session" in rec:
                    r["finished"] = True
                    r["tensors"], r["responses"] = rec.get("tensors", 0), rec.get("responses", 0)
                    continue
                old = r["tests"].get(rec["test"])
                if old is None or ORDER[rec["outcome"]] > ORDER[old[0]]:
                    r["tests"][rec["test"]] = (rec["outcome"], rec.get("reason", ""))
        out[int(m.group(1))] = r
    return out


def summarise(ranks, np, desync_rx):
    """Counts over the job's tests (a test failed when it failed on any
    rank, skipped when skipped on every rank) and the failures by rank."""
    names = set()
    for r in ranks.values():
        names.update(r["tests"])
    passed = failed = skipped = 0
    failures = []  # (test, rank, reason)
    desync = False
    for name in sorted(names):
        outcomes = {k: r["tests"].get(name, ("missing", "")) for k, r in ranks.items()}
        bad = {k: v for k, v in outcomes.items() if v[0] in ("failed", "error")}
        if bad:
            failed += 1
            for k, (_, reason) in sorted(bad.items()):
                failures.append((name, k, reason))
                if desync_rx.search(reason):
                    desync = True
        elif all(v[0] == "skipped" for v in outcomes.values()):
            skipped += 1
        else:
            passed += 1
    unfinished = sorted(set(range(np)) - {k for k, r in ranks.items() if r["finished"]})
    ops = max([r["tensors"] for r in ranks.values()] or [0])
    return {"passed": passed, "failed": failed, "skipped": skipped, "failures": failures,
            "desync": desync, "unfinished": unfinished, "ops": ops}


def verdict(s, rc, hung):
    """hang, desync, fail or ok."""
    if hung:
        return "hang"
    if s["desync"]:
        return "desync"
    if s["failed"] or rc != 0 or s["unfinished"] or s["passed"] + s["skipped"] == 0:
        return "fail"
    return "ok"


def table(jobs, skips):
    """The closing table: per transport, jobs by verdict, tests, operations."""
    rows = {}
    for j in jobs:
        t = rows.setdefault(j["transport"], {"jobs": 0, "ok": 0, "hang": 0, "desync": 0,
                                             "fail": 0, "tests": 0, "ops": 0, "s": 0.0})
        t["jobs"] += 1
        t[j["verdict"]] += 1
        t["tests"] += j["passed"] + j["failed"] + j["skipped"]
        t["ops"] += j["ops"]
        t["s"] += j["seconds"]
    lines = ["%-9s %5s %5s %5s %7s %5s %7s %9s %8s" % (
        "transport", "jobs", "ok", "hangs", "desyncs", "fails", "tests", "ops", "seconds")]
    tot = {k: 0 for k in ("jobs", "ok", "hang", "desync", "fail", "tests", "ops", "s")}
    for name in sorted(rows):
        t = rows[name]
        for k in tot:
            tot[k] += t[k]
        lines.append("%-9s %5d %5d %5d %7d %5d %7d %9d %8.0f" % (
            name, t["jobs"], t["ok"], t["hang"], t["desync"], t["fail"], t["tests"], t["ops"], t["s"]))
    lines.append("%-9s %5d %5d %5d %7d %5d %7d %9d %8.0f" % (
        "all", tot["jobs"], tot["ok"], tot["hang"], tot["desync"], tot["fail"], tot["tests"],
        tot["ops"], tot["s"]))
    lines.append("(ops: operations completed by the busiest rank of each job, from plait_stats)")
    for what, why in skips:
        lines.append("skipped: %s: %s" % (what, why))
    return "\n".join(lines)
