"""bench/scale end to end on a few ranks: every rank reports, the figures
are sane (control bytes per peer constant, one record per transport and
rank count), the plot is written, and a failing job is reported, not hung."""

import json
import os
import subprocess
import sys

import pytest

BUILD = os.environ.get("PLAIT_TEST_BUILD_DIR")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "bench", "scale", "scale.py")
pytestmark = pytest.mark.skipif(not BUILD, reason="PLAIT_TEST_BUILD_DIR not set (run through ctest)")


def scale(*args, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return subprocess.run([sys.executable, SCRIPT, "--build-dir", BUILD] + list(args), env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_small_jobs_report_linear_control_bytes(tmp_path):
    # 16 ranks: rank 0 waits on its sockets with epoll from 16 (util/waitset);
    # the star (--fanouts 0): by default 16 ranks are a tree of fan-out 8
    out, png = tmp_path / "s.jsonl", tmp_path / "s.png"
    p = scale("--ranks", "2,16", "--transports", "gloo", "--iters", "5", "--warmup", "2",
              "--fanouts", "0", "--out", str(out), "--plot", str(png))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ranks [2, 16]" in p.stdout and "neg_us/rank" in p.stdout
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["transport"], r["ranks"]) for r in recs] == [("gloo", 2), ("gloo", 16)]
    for r in recs:
        assert "error" not in r, r
        assert r["op_s"] > 0 and r["cpu_s"] >= 0 and r["init_s"] > 0
        # rank 0 answers every peer with the same list; every peer announces
        assert r["control_bytes_rank0"] > 0 and r["control_bytes_rank"] > 0
    per_peer = [r["control_bytes_rank0"] / (r["ranks"] - 1) for r in recs]
    assert abs(per_peer[0] - per_peer[1]) <= 8, per_peer
    try:
        import matplotlib  # noqa: F401
        assert png.exists()
    except ImportError:
        assert "no plot" in p.stdout


def test_a_job_that_cannot_start_is_reported(tmp_path):
    out = tmp_path / "s.jsonl"
    p = scale("--ranks", "2", "--transports", "gloo", "--iters", "2", "--out", str(out),
              "--plait-timeout", "5", "--job-timeout", "60",
              "--rank0-env", "PLAIT_TRANSPORT=nosuch")
    assert p.returncode == 1, p.stdout + p.stderr
    rec = json.loads(out.read_text())
    assert "FAILED" in p.stdout and "nosuch" in rec["error"], rec
