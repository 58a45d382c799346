"""soak_watchdog: the soak end to end on a job that hangs on purpose
(data/hang_one_rank.py: rank 0 waits in an allreduce rank 1 never submits,
rank 1 sleeps). The soak must call it a hang, print rank 0's Python stack
in plait's wait and every thread's native stack, rank 1's Python stack
in the test, leave no process behind, and exit 1. Needs a built tree
(PLAIT_TEST_BUILD_DIR) and torch in /usr/bin/python3."""

import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("PLAIT_TEST_BUILD_DIR", "")


@pytest.mark.skipif(not BUILD, reason="PLAIT_TEST_BUILD_DIR is not set (ctest sets it)")
def test_hung_job_is_dumped_and_killed(tmp_path):
    p = subprocess.run(
        [sys.executable, os.path.join(HERE, "soak.py"), "--build-dir", BUILD, "--suites", "none",
         "--transports", "gloo", "--ranks", "2", "--compat-python", "/usr/bin/python3",
         "--extra-file", os.path.join(HERE, "data", "hang_one_rank.py"), "--bound-s", "30",
         "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=540, check=False)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 1, out
    assert re.search(r"extra/hang_one_rank\.py .* -> HANG", out), out
    rank0 = out.split("---- rank 0 ", 1)[1].split("---- rank 1 ", 1)[0]
    rank1 = out.split("---- rank 1 ", 1)[1]
    assert "plait/_core.py" in rank0 and "in wait" in rank0, rank0       # Python
    # native: every thread's frames (gdb "#0 ...", py-spy "Thread N"); rank 0
    # is usually inside plait_wait then, but a wait that wakes to let signals
    # in may be between two calls, so that is not required
    assert re.search(r"-- native stacks[^\n]*:\n.*(#0 |Thread \d+)", rank0, re.S), rank0
    assert re.search(r"hang_one_rank\.py\"?, line \d+", rank1), rank1      # Python
    assert "LEFT BEHIND" not in out, out
    assert out.rstrip().splitlines()[-1].startswith("soak: 0 passed, 1 failed"), out
