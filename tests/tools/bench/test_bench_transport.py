"""bench/transport/bench_transport end to end: plugins side by side through
the public plugin ABI only (no libplait, no core internals but the core's own
reduction kernels, util/reduce.h, linked from the same objects as libplait's),
a missing plugin named with the paths tried."""

import os
import re
import subprocess

import pytest

BUILD = os.environ.get("PLAIT_TEST_BUILD_DIR")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
pytestmark = pytest.mark.skipif(not BUILD, reason="PLAIT_TEST_BUILD_DIR not set (run through ctest)")


def exe():
    return os.path.join(BUILD, "bin", "bench_transport")


def run(*args, timeout=240):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FI_"))}
    env["PLAIT_PLUGIN_PATH"] = os.path.join(BUILD, "lib")
    return subprocess.run([exe()] + list(args), env=env, capture_output=True, text=True,
                          timeout=timeout)


def have_plugin(name):
    return os.path.exists(os.path.join(BUILD, "lib", "libplait-transport-%s.so" % name))


def rows(out):
    """The table's rows: size -> cells."""
    table = {}
    for line in out.splitlines():
        m = re.match(r"\| (\d+ [KM]iB) \|(.*)\|$", line)
        if m:
            table[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return table


@pytest.mark.parametrize("ranks", [2, 3])
def test_plugins_side_by_side(ranks):
    configs = ["gloo=gloo"] + (["shm=ofi,FI_PROVIDER=shm"] if have_plugin("ofi") else [])
    p = run("-r", "1", "-n", str(ranks), "-s", "4K:16K", *configs)
    assert p.returncode == 0, p.stdout + p.stderr
    table = rows(p.stdout)
    assert set(table) == {"4 KiB", "16 KiB"}, p.stdout
    for size, cells in table.items():
        # per configuration: algorithm, us, GB/s; then memcpy GB/s
        assert len(cells) == 3 * len(configs) + 1, cells
        for c in range(len(configs)):
            algorithm, us, gbs = cells[3 * c:3 * c + 3]
            assert algorithm not in ("", "-"), (size, cells)  # the plugin named it
            assert float(us) > 0 and float(gbs) >= 0, (size, cells)
    assert "failed" not in p.stdout


def test_missing_plugin_is_named():
    p = run("-r", "1", "-s", "4K:4K", "x=nosuch")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "no transport plugin 'nosuch'" in p.stdout, p.stdout
    assert "libplait-transport-nosuch.so" in p.stdout, p.stdout


def test_json_lines_with_memcpy_and_the_failure(tmp_path):
    """-j: one record per configuration and size, memcpy's, and a missing
    record naming the configuration that failed (ci/bench reads them)."""
    import json
    out = tmp_path / "t.jsonl"
    p = run("-r", "1", "-n", "3", "-s", "4K:16K", "-j", str(out), "gloo=gloo", "x=nosuch")
    assert p.returncode == 1, p.stdout + p.stderr
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    got = {(r["kind"], r.get("transport", r.get("system")), r.get("bytes")) for r in recs}
    assert got == {("transport", "gloo", 4096), ("transport", "gloo", 16384),
                   ("transport", "memcpy", 4096), ("transport", "memcpy", 16384),
                   ("missing", "plugin-x", None)}, recs
    for r in recs:
        assert r["ranks"] == 3, r
        if r["kind"] == "transport":
            assert r["time_s_median"] > 0 and r["algbw_GBps"] > 0, r
        else:
            assert "no transport plugin 'nosuch'" in r["reason"], r


def test_crosses_the_plugin_boundary_through_the_public_abi_only():
    # no libplait loaded, no plait_* symbol taken from anywhere
    ldd = subprocess.run(["ldd", exe()], capture_output=True, text=True)
    assert ldd.returncode == 0 and "libplait" not in ldd.stdout, ldd.stdout
    nm = subprocess.run(["nm", "-D", "--undefined-only", exe()], capture_output=True, text=True)
    assert nm.returncode == 0, nm.stderr
    assert not [s for s in nm.stdout.split() if s.startswith("plait_")], nm.stdout
    # and its sources include the public headers only, and the core's kernels
    folder = os.path.join(ROOT, "bench", "transport")
    for name in os.listdir(folder):
        if name.endswith((".c", ".h")):
            with open(os.path.join(folder, name)) as f:
                for inc in re.findall(r'#include "([^"]+)"', f.read()):
                    assert inc.startswith("plait/") or inc == "util/reduce.h" or \
                        os.path.exists(os.path.join(folder, inc)), (name, inc)


def test_reduces_with_the_core_kernels():
    """Goal 6 of issue 37: the plugin alone reduces with the very kernels the stack hands
    the plugin (util/reduce.c, statically linked: plait_kernels), not loops of its own,
    so the whole stack and the plugin alone compare like with like."""
    nm = subprocess.run(["nm", exe()], capture_output=True, text=True)
    assert nm.returncode == 0, nm.stderr
    defined = {f[2] for f in (line.split() for line in nm.stdout.splitlines())
               if len(f) == 3 and f[1] in "tTiW"}
    assert {"plait_reduce", "plait_scale", "plait_divide", "plait_reduce_scale"} <= defined, \
        sorted(s for s in defined if s.startswith("plait_"))
    assert not [s for s in defined if s.startswith("bench_f32_")], "kernels of its own"
    lib = os.path.join(BUILD, "lib", "libplait.so")
    libnm = subprocess.run(["nm", lib], capture_output=True, text=True)
    if ".avx2" in libnm.stdout:  # the core's AVX2 clones: the bench has the same ones
        assert "plait_f32_sum.avx2" in defined, "libplait has AVX2 clones, bench_transport not"
