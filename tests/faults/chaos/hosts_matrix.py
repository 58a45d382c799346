"""ci/chaos's across-hosts part: the fault matrix of tests/tools/hosts/matrix.sh
(network-namespace hosts, 2 hosts x 2 ranks) run cell by cell, each cell's
RESULT line kept, and a summary like the trials' (chaos.py --hosts ROUNDS).

A cell that cannot run here (matrix.sh exits 77: not root, no namespaces, no
tc, no libfaketime) is a skip printed as "chaos: SKIPPED hosts matrix ...",
which ci/test's last line counts; a cell that fails (a hang, a crash, wrong
data, wrong blame, a late error, an outcome its fault does not allow) fails
the run.
"""
import os
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
MATRIX = os.path.join(ROOT, "tests", "tools", "hosts", "matrix.sh")
TRANSPORTS = ("gloo", "ofi")
RESULT = re.compile(r"^RESULT \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]*) \|(.*)$", re.M)
SKIP = re.compile(r"^SKIP: (.*)$", re.M)


def faults():
    """The faults matrix.sh knows (its FAULTS line): one source of truth."""
    with open(MATRIX, encoding="utf-8") as f:
        m = re.search(r'^FAULTS="([^"]+)"', f.read(), re.M)
    return m.group(1).split() if m else []


def run_cell(build_dir, fault, transport, limit_s=300):
    """One round of one cell: a record {fault, transport, outcome, status,
    result (its RESULT line's outcome), time, detail, tail}."""
    env = dict(os.environ, HOST_WORKER=os.path.join(build_dir, "tests", "host_worker"))
    t0 = time.monotonic()
    try:
        p = subprocess.run([MATRIX, fault, transport, "1"], env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=limit_s)
        out, rc = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace"), None
    rec = {"fault": fault, "transport": transport, "seconds": round(time.monotonic() - t0, 1),
           "tail": "\n".join(out.strip().splitlines()[-6:])}
    m = RESULT.search(out)
    if m:
        rec.update(result=m.group(3).strip(), time=m.group(4).strip(),
                   detail=m.group(5).strip(" |"))
    if rc == 77:
        s = SKIP.search(out)
        rec.update(outcome="skipped", why=s.group(1) if s else "matrix.sh exited 77")
    elif rc is None:
        rec.update(outcome="fail", why="matrix.sh still ran after %d s (killed)" % limit_s)
    elif rc == 0 and m:
        rec.update(outcome="ok")
    else:
        rec.update(outcome="fail", why=m.group(3).strip() if m else "exit %s, no RESULT line" % rc)
    return rec


def run(build_dir, rounds, say):
    """Every cell, `rounds` rounds; `say` prints a line. Returns the records."""
    if not os.access(os.path.join(build_dir, "tests", "host_worker"), os.X_OK):
        say("chaos: SKIPPED hosts matrix: %s/tests/host_worker was not built" % build_dir)
        return []
    cells = [(f, t) for f in faults() for t in TRANSPORTS]
    if not os.path.exists(os.path.join(build_dir, "lib", "libplait-transport-ofi.so")):
        say("chaos: SKIPPED hosts matrix over ofi: the ofi plugin was not built")
        cells = [c for c in cells if c[1] != "ofi"]
    records = []
    for i in range(rounds):
        for fault, transport in cells:
            rec = run_cell(build_dir, fault, transport)
            rec["round"] = i
            records.append(rec)
            if rec["outcome"] == "skipped" and len(records) == 1 and \
                    re.search(r"root|namespace|'ip'|unshare", rec["why"]):
                # the hosts cannot be made at all: every cell would say the same
                say("chaos: SKIPPED hosts matrix (all %d cells): %s" % (
                    len(cells) * rounds, rec["why"]))
                return [dict(rec, fault=f, transport=t, round=j) for j in range(rounds)
                        for f, t in cells]
            if rec["outcome"] == "skipped":
                say("chaos: SKIPPED hosts matrix %s/%s: %s" % (fault, transport, rec["why"]))
            else:
                say("hosts %s/%s round %d: %s%s (%.0f s)" % (
                    fault, transport, i, rec.get("result", "no result"),
                    "" if rec["outcome"] == "ok" else " -> FAILED: " + rec.get("why", ""),
                    rec["seconds"]))
    return records


def summarize(records):
    """The summary lines and whether a cell failed."""
    ran = [r for r in records if r["outcome"] != "skipped"]
    if not records:
        return ["hosts matrix: not run (see the SKIPPED lines above)"], False
    went_on = sum(1 for r in ran if r.get("result", "").startswith("went on"))
    named = sum(1 for r in ran if r.get("result", "").startswith("failed, named"))
    failed = [r for r in ran if r["outcome"] != "ok"]
    lines = ["hosts matrix (tests/tools/hosts/matrix.sh, 2 hosts x 2 ranks): %d cells run, %d "
             "skipped; %d went on, %d failed naming the right ranks in time, %d FAILED" % (
                 len(ran), len(records) - len(ran), went_on, named, len(failed))]
    for r in failed:
        lines.append("  hosts %s/%s round %d: %s\n%s" % (
            r["fault"], r["transport"], r["round"], r.get("why", ""),
            "\n".join("    " + x for x in r["tail"].splitlines())))
    return lines, bool(failed)
