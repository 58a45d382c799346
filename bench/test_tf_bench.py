"""Tests for bench/tf_bench.py --report (ci/bench tensorflow): a contender that
did not run is never left out silently, ranks that ended with different
weights fail the report, and plait's fusion statistics are shown.
Run: /usr/bin/python3 -m pytest bench/test_tf_bench.py (no TensorFlow needed:
the report is plain Python).

The records written here are FAKE, made up to exercise the report. They are
not measurements and must never be copied into results.
"""

import json
import os
import subprocess
import sys

TF_BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_bench.py")


def rec(system, rnd, rank, digest, times=None, stats=None):
    r = {"kind": "tf_step", "system": system, "impl": system.split("-")[0], "round": rnd,
         "rank": rank, "size": 2, "digest": digest, "tensorflow": "2.21.0", "keras": "3.15.1",
         "batch": 16, "image": 32, "gradients": 65, "parameters": 272474, "warmup": 5,
         "warmup_s": 1.0, "steps": 4}
    if rank == 0:
        r["times_s"] = times or [0.1, 0.2, 0.3, 0.4]
    if stats:
        r["stats"] = stats
    return r


def report(tmp_path, rows, *extra):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    md = tmp_path / "t.md"
    p = subprocess.run([sys.executable, TF_BENCH, "--report", str(path), "--markdown", str(md),
                        *extra], capture_output=True, text=True)
    return p, md.read_text() if md.exists() else ""


def test_identical_ranks_table_and_fusion_stats(tmp_path):
    stats = {"tensors": 260, "responses": 8, "fused_tensors": 256, "fused_responses": 4,
             "fusion_bytes": 4_000_000}
    rows = [rec("plait-gloo", 1, 0, "a", [0.1, 0.2, 0.3, 0.4], stats), rec("plait-gloo", 1, 1, "a"),
            rec("mwms", 1, 0, "b", [0.2, 0.4, 0.6, 0.8]), rec("mwms", 1, 1, "b"),
            rec("local", 1, 0, "c"), rec("local", 1, 1, "d")]
    p, md = report(tmp_path, rows, "--expect", "plait-gloo", "--expect", "mwms")
    assert p.returncode == 0, p.stderr
    assert "NOT MEASURED" not in p.stdout
    lines = {}  # the first table: one line per contender
    for l in p.stdout.splitlines():
        if l.startswith("| "):
            lines.setdefault(l.split("|")[1].strip(), l)
    assert "250.0 | 130.0 - 370.0" in lines["plait-gloo"], lines["plait-gloo"]
    assert "| 2.00 |" in lines["mwms"] and "yes (1/1 runs)" in lines["mwms"], lines["mwms"]
    assert "differ, as expected" in lines["local"]
    # 260 tensors / 4 steps, 8 collectives / 4 steps, 32.5 tensors per collective
    assert "| plait-gloo | 1 | 65.0 | 2.0 | 32.50 | 256 / 4 | 1.00 MB |" in p.stdout
    assert md.strip() == p.stdout.strip()


def test_missing_and_expected_contenders_are_loud(tmp_path):
    rows = [{"kind": "missing", "system": "horovod", "reason": "the build failed"},
            rec("plait-gloo", 1, 0, "a"), rec("plait-gloo", 1, 1, "a")]
    p, md = report(tmp_path, rows, "--expect", "plait-gloo", "--expect", "horovod",
                   "--expect", "mwms")
    assert p.returncode == 0, p.stderr
    for s, why in (("horovod", "the build failed"), ("mwms", "no results for mwms")):
        assert "NOT MEASURED: %s: %s" % (s, why) in p.stderr
        assert "NOT MEASURED: %s: %s" % (s, why) in p.stdout
        assert any(l.startswith("| %s | NOT MEASURED: %s" % (s, why)) for l in md.splitlines())


def test_ranks_that_differ_fail_the_report(tmp_path):
    rows = [rec("horovod", 1, 0, "a"), rec("horovod", 1, 1, "b"),
            rec("horovod", 2, 0, "c"), rec("horovod", 2, 1, "c")]
    p, _ = report(tmp_path, rows)
    assert p.returncode == 1
    assert "NO: 1 of 2 runs differ" in p.stdout
    assert "different weights: horovod" in p.stderr


def test_a_run_missing_a_rank_is_not_identical(tmp_path):
    p, _ = report(tmp_path, [rec("mwms", 1, 0, "a")])
    assert p.returncode == 1
    assert "NO: 1 of 1 runs differ" in p.stdout
