"""The ofi progress loop's yield window on a crowded host, end to end
(plugins/ofi/engine/crowding.h): real ranks under plaitrun, pinned with
taskset so that the host's ranks outnumber their CPUs (2 ranks on 1 CPU) or
fit them (2 on 2). What each rank's plugin chose is its own INFO line
("progress: ... a wait yields for N us"), printed from the value the wait
loop uses; PLAIT_OFI_YIELD_US always wins over "auto"; PLAIT_TRANSPORT=auto
logs ranks per CPU beside its choice, and an explicit PLAIT_TRANSPORT is
never overridden. Run through ctest (ofi_yield)."""

import os
import shutil
import subprocess

import pytest

BUILD = os.environ.get("PLAIT_TEST_BUILD_DIR")
pytestmark = pytest.mark.skipif(not BUILD, reason="PLAIT_TEST_BUILD_DIR not set (run through ctest)")


def job(cpus, ranks=2, **env):
    """plaitrun RANKS plait-bench (a few 4 KiB allreduces) on CPUs cpus; (status, output)."""
    if not shutil.which("taskset"):
        pytest.skip("taskset not found (util-linux)")
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < len(cpus):
        pytest.skip("needs %d CPUs, this process may use %d" % (len(cpus), len(allowed)))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FI_"))}
    e.update(PLAIT_LOG_LEVEL="info", PLAIT_PLUGIN_PATH=os.path.join(BUILD, "lib"),
             FI_PROVIDER="shm", PLAIT_TIMEOUT_S="30")
    e.update(env)
    cpu_list = ",".join(str(allowed[i]) for i in cpus)
    p = subprocess.run(["taskset", "-c", cpu_list, os.path.join(BUILD, "bin", "plaitrun"), "-np",
                        str(ranks), os.path.join(BUILD, "bin", "plait-bench"), "allreduce",
                        "--min", "4K", "--max", "4K", "--iters", "3", "--quiet"],
                       env=e, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def ofi_ok(out, rc):
    if rc != 0 and "ofi" in out and ("probe" in out or "fi_getinfo" in out):
        pytest.skip("ofi/shm cannot start here: " + out.strip().splitlines()[-1])


def test_oversubscribed_host_yields_less():
    rc, out = job([0], PLAIT_TRANSPORT="ofi")
    ofi_ok(out, rc)
    assert rc == 0, out
    assert ("progress: 2 ranks on this host, 1 CPU: oversubscribed; a wait yields for 300 us "
            "before sleeping (PLAIT_OFI_YIELD_US=auto)") in out, out


def test_ranks_that_fit_yield_2ms():
    rc, out = job([0, 1], PLAIT_TRANSPORT="ofi")
    ofi_ok(out, rc)
    assert rc == 0, out
    assert ("progress: 2 ranks on this host, 2 CPUs: not oversubscribed; a wait yields for "
            "2000 us before sleeping (PLAIT_OFI_YIELD_US=auto)") in out, out


def test_explicit_yield_wins_over_auto():
    rc, out = job([0], PLAIT_TRANSPORT="ofi", PLAIT_OFI_YIELD_US="2000")
    ofi_ok(out, rc)
    assert rc == 0, out
    assert ("1 CPU: oversubscribed; a wait yields for 2000 us before sleeping "
            "(PLAIT_OFI_YIELD_US=2000)") in out, out
    rc, out = job([0, 1], PLAIT_TRANSPORT="ofi", PLAIT_OFI_YIELD_US="0")
    ofi_ok(out, rc)
    assert rc == 0, out
    assert ("2 CPUs: not oversubscribed; a wait yields for 0 us before sleeping "
            "(PLAIT_OFI_YIELD_US=0)") in out, out


def test_bad_yield_is_named_not_hung():
    rc, out = job([0], PLAIT_TRANSPORT="ofi", PLAIT_OFI_YIELD_US="soon")
    assert rc != 0, out
    assert "PLAIT_OFI_YIELD_US='soon' is not valid" in out, out


def test_auto_logs_ranks_per_cpu_and_explicit_transport_wins():
    rc, out = job([0], PLAIT_TRANSPORT="auto")
    ofi_ok(out, rc)
    assert rc == 0, out
    assert "ranks per CPU: 2 ranks on this host, 1 CPU: oversubscribed" in out, out
    assert "transport auto: ofi (shm;" in out, out  # measured fastest there too (docs)
    assert "a wait yields for 300 us" in out, out
    rc, out = job([0], PLAIT_TRANSPORT="gloo")
    assert rc == 0, out
    assert "transport auto" not in out and "ranks per CPU" not in out, out
    assert "progress:" not in out, out
    assert "transport gloo" in out, out
