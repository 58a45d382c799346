"""Whole jobs started from here: a rank that dies, a rank that hangs, the
torchrun convention beside torch.distributed, and plait used from an
installed tree (cmake --install) and from an offline pip install."""

import glob
import os
import secrets
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from ranks import clean_env, free_ports, plait_env, start_ranks  # noqa: E402

BUILD = os.environ.get("PLAIT_TEST_BUILD_DIR")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


VICTIM = """
import os, signal, sys, time, torch
import plait.torch as hvd
hvd.init()
r = hvd.rank()
for i in range(100000):
    if r == 1 and i == 20:
        os.kill(os.getpid(), signal.%s)
    t0 = time.time()
    try:
        hvd.allreduce(torch.ones(1000), name="step.%%d" %% i)
    except hvd.PlaitError as e:
        print("RAISED %%s after %%.2f s: %%s" %% (type(e).__name__, time.time() - t0, e),
              flush=True)
        sys.exit(0)
"""


@pytest.mark.parametrize("how,timeout_s", [("SIGKILL", 5), ("SIGSTOP", 2)])
def test_dead_or_hung_rank_raises_on_the_others(how, timeout_s):
    n = 3
    procs = start_ranks(VICTIM % how, n, plait_env(n, timeout_s))
    try:
        outs = {}
        for r in (0, 2):
            out, err = procs[r].communicate(timeout=timeout_s * 4 + 30)
            outs[r] = (procs[r].returncode, out, err)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.communicate()
    for r, (rc, out, err) in outs.items():
        assert rc == 0, "rank %d: %s" % (r, err)
        line = next((x for x in out.splitlines() if x.startswith("RAISED")), None)
        assert line is not None, "rank %d printed: %s\n%s" % (r, out, err)
        assert line.startswith("RAISED PeerLostError"), line
        assert "rank 1" in line, line
        waited = float(line.split(" after ")[1].split(" s:")[0])
        # Within the timeout (plus the blame round and scheduling slack).
        assert waited < timeout_s + 3, line


TORCHRUN_JOB = """
import os, torch, torch.distributed as dist
import plait.torch as hvd
dist.init_process_group("gloo")        # the agent's store on MASTER_PORT
hvd.init()                             # plait: MASTER_PORT + 1
r, n = hvd.rank(), hvd.size()
assert (r, n) == (dist.get_rank(), dist.get_world_size()), (r, n)
assert hvd.local_rank() == int(os.environ["LOCAL_RANK"])
x = torch.full((4,), float(r + 1))
y = x.clone()
dist.all_reduce(y)
assert torch.equal(hvd.allreduce(x, op=hvd.Sum), y)
hvd.shutdown()
dist.destroy_process_group()
print("OK", r, n)
"""


def test_torchrun_convention_beside_torch_distributed():
    """torchrun's variables as torchrun sets them, with its agent store
    listening on MASTER_PORT (torchrun itself crashes on Python 3.11 here,
    so this test plays the agent)."""
    import torch.distributed as dist
    n = 2
    port = free_ports(2)
    store = dist.TCPStore("127.0.0.1", port, None, True,  # noqa: F841 - the agent's store
                          timedelta(seconds=60), wait_for_workers=False)
    secret = secrets.token_hex(16)

    def env(r):
        return clean_env(RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r),
                         LOCAL_WORLD_SIZE=str(n), GROUP_RANK="0", ROLE_RANK=str(r),
                         MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                         TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RUN_ID="plait-test",
                         TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_MAX_RESTARTS="0",
                         PLAIT_SECRET=secret, PLAIT_TIMEOUT_S="20")
    procs = start_ranks(TORCHRUN_JOB, n, env)
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    for r, (out, err, rc) in enumerate(results):
        assert rc == 0 and out.strip() == "OK %d %d" % (r, n), err


def _installed_job_check(python_env, plaitrun, python):
    code = textwrap.dedent("""
        import plait, torch
        import plait.torch as hvd
        hvd.init()
        out = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum)
        print("RESULT", hvd.rank(), out.tolist(), plait.library_path)
        hvd.shutdown()
        """)
    p = subprocess.run([plaitrun, "-np", "2", python, "-c", code], env=python_env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [x for x in p.stdout.splitlines() if "RESULT" in x]
    assert len(lines) == 2, p.stdout
    for line in lines:
        assert "[3.0, 3.0, 3.0]" in line, line
    return lines


@pytest.mark.skipif(not BUILD, reason="PLAIT_TEST_BUILD_DIR not set (run through ctest)")
def test_cmake_install_tree(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], check=True,
                   capture_output=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PLAIT_") and k != "PYTHONPATH"}
    # The installed plaitrun points the ranks at the installed package and library.
    lines = _installed_job_check(env, str(prefix / "bin" / "plaitrun"), sys.executable)
    for line in lines:
        assert str(prefix) in line, line
    # Without plaitrun: the package finds the installed library by itself.
    pkg = glob.glob(str(prefix / "lib" / "python3*" / "*-packages"))
    assert pkg, "no Python package under %s" % prefix
    p = subprocess.run([sys.executable, "-c", "import plait; print(plait.library_path)"],
                       env=dict(env, PYTHONPATH=pkg[0]), capture_output=True, text=True)
    assert p.returncode == 0 and str(prefix) in p.stdout, p.stdout + p.stderr
