"""Tests for bench/mxnet_bench.py (ci/bench mxnet): the parameter-server
contender really trains (scheduler, server and workers started and stopped),
a contender that cannot run is reported NOT MEASURED, and no process of the
benchmark outlives it, also when a run fails. They print no figures and time
nothing. Run: PLAIT_TEST_MXNET_PYTHON=<python with mxnet 1.9.1> /usr/bin/python3
-m pytest bench/test_mxnet_bench.py (ctest's bench_tools passes the MXNet venv
CMake was configured with, -DPLAIT_MXNET_PYTHON).
"""

import os
import subprocess
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "mxnet_bench.py")
MXPY = os.environ.get("PLAIT_TEST_MXNET_PYTHON", "")

needs_mxnet = pytest.mark.skipif(
    not MXPY, reason="PLAIT_TEST_MXNET_PYTHON is not set (configure with -DPLAIT_MXNET_PYTHON)")

# A tiny run: ResNet-18 on 8x8 images, 2 samples per rank, 2 steps.
TINY = ["--rounds", "1", "--steps", "2", "--warmup", "0", "--image", "8", "--batch", "2",
        "--timeout", "240"]


def leftovers(marker):
    """Processes whose environment carries MARKER (every process the
    benchmark starts inherits it)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def run(*args):
    marker = "PLAIT_TEST_MXBENCH_MARKER=%s" % uuid.uuid4().hex
    env = dict(os.environ)
    k, v = marker.split("=")
    env[k] = v
    p = subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True,
                       env=env, timeout=600)
    return p, leftovers(marker)


@needs_mxnet
def test_ps_and_local_train_and_nothing_is_left(tmp_path):
    p, left = run("--mxnet-python", MXPY, "--contenders", "ps,local,horovod",
                  "--not-measured", "horovod=not built in this test", *TINY,
                  "--markdown", str(tmp_path / "t.md"), "--log", str(tmp_path / "runs.log"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert left == [], "processes left running: %s" % left
    rows = {line.split("|")[1].strip(): line for line in p.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| contender")}
    assert set(rows) == {"ps", "local", "horovod"}, p.stdout
    assert "| identical |" in rows["ps"], rows["ps"]      # both workers pulled the same weights
    assert "- (one process)" in rows["local"], rows["local"]
    assert "NOT MEASURED: not built in this test" in rows["horovod"], rows["horovod"]
    assert "NOT MEASURED: horovod: not built in this test" in p.stderr
    assert (tmp_path / "t.md").read_text().strip() in p.stdout
    log = (tmp_path / "runs.log").read_text()
    assert "DMLC_ROLE=scheduler" in log and "DMLC_ROLE=server" in log, log


@needs_mxnet
def test_failed_contender_is_not_measured_and_servers_are_stopped(tmp_path):
    # every worker fails at once (no such model): the scheduler and the server,
    # already started, must be stopped and the row must say why
    p, left = run("--mxnet-python", MXPY, "--contenders", "ps", "--model", "no_such_model",
                  *TINY, "--log", str(tmp_path / "runs.log"))
    assert p.returncode == 1, p.stdout + p.stderr
    assert left == [], "processes left running: %s" % left
    assert "NOT MEASURED: ps: every run failed (round 1: the dist_sync" in p.stderr, p.stderr
    assert "| ps | - | NOT MEASURED: every run failed" in p.stdout, p.stdout


def test_bad_arguments_are_named():
    p = subprocess.run([sys.executable, BENCH, "--contenders", "ps,mpi", "--mxnet-python", "x"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--contenders: unknown mpi" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, BENCH, "--not-measured", "horovod"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--not-measured wants CONTENDER=REASON" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, BENCH, "--mxnet-python", "/nonexistent/python"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "cannot import mxnet" in p.stderr, p.stderr
