"""Ctrl-C on a rank whose collective hangs (issue 32, item 2): the rank
gets KeyboardInterrupt in its wait and the process exits (plait's shutdown
at exit with the operation still in flight), and the other rank is told
instead of waiting for ever. Before the fix the wait slept in C where
Python's handler never ran, and with no stall abort (the default) the
rank never exited."""

import os
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from ranks import plait_env, start_ranks  # noqa: E402

SCRIPT = """
import sys, torch
import plait.torch as hvd
hvd.init()
r = hvd.rank()
print("WAITING", flush=True)
try:
    # Each rank waits on an operation the other never submits.
    hvd.allreduce(torch.ones(4), name="never.%d" % r)
except hvd.PlaitError as e:
    print("RAISED %s: %s" % (type(e).__name__, e), flush=True)
    sys.exit(3)
"""


TRANSPORTS = {"gloo": {"PLAIT_TRANSPORT": "gloo"},
              "ofi_shm": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "shm"},
              "ofi_tcp": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "tcp"}}


@pytest.mark.skipif(not os.environ.get("PLAIT_TEST_BUILD_DIR"),
                    reason="PLAIT_TEST_BUILD_DIR not set (run through ctest)")
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_sigint_ends_a_hung_wait_and_the_process(transport):
    """Over ofi, libfabric's libraries took SIGINT and ended the process with
    status 1 before Python's handler ran (docs/transport-ofi.md, "Signals")."""
    base = plait_env(2, 30)
    build = os.environ["PLAIT_TEST_BUILD_DIR"]
    if transport != "gloo" and not os.path.exists(
            os.path.join(build, "lib", "libplait-transport-ofi.so")):
        pytest.skip("the ofi transport plugin was not built (libfabric-dev missing)")

    def env(r):
        e = base(r)
        e.update(TRANSPORTS[transport])
        return e
    ranks = start_ranks(SCRIPT, 2, env)
    try:
        first = ranks[0].stdout.readline()
        assert first.strip() == "WAITING", first + ranks[0].stderr.read()
        time.sleep(0.5)  # into the wait (a signal before it would raise too)
        ranks[0].send_signal(signal.SIGINT)
        # Generous: a loaded machine; without the fix it never ends.
        out0, err0 = ranks[0].communicate(timeout=120)
        out1, err1 = ranks[1].communicate(timeout=120)
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert "KeyboardInterrupt" in err0, (ranks[0].returncode, out0, err0, out1, err1)
    assert ranks[0].returncode not in (0, 3), (out0, err0)
    # The other rank learns that rank 0 left rather than waiting for ever.
    assert ranks[1].returncode == 3 and "RAISED" in out1, (out1, err1)
