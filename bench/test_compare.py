"""Tests for the comparison reports: bench/compare.py (ci/bench) and
bench/horovod_bench.py --report (ci/bench horovod) never leave a system
out silently. Run: /usr/bin/python3 -m pytest bench/test_compare.py

The records written here are FAKE, made up to exercise the reports. They are
not measurements and must never be copied into results.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "compare.py")
HVD_BENCH = os.path.join(HERE, "horovod_bench.py")


def write(tmp_path, rows):
    path = tmp_path / "cmp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def run(*args):
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout, p.stderr


FAKE = [
    {"kind": "comparison", "system": "openmpi-blocking", "workload": "allreduce-64M",
     "median_s": 0.05},
    {"kind": "collective", "collective": "allreduce", "bytes": 64 << 20, "transport": "gloo",
     "time_s_median": 0.04},
    {"kind": "fusion", "mix": "uniform-200x64K", "transport": "gloo", "step_s_median": 0.02},
]


def test_missing_row_is_loud_and_in_every_table(tmp_path):
    path = write(tmp_path, FAKE + [{"kind": "missing", "system": "horovod",
                                    "reason": "Horovod not available: pip install failed"}])
    md = str(tmp_path / "cmp.md")
    out, err = run(COMPARE, path, "--markdown", md)
    line = "NOT MEASURED: horovod: Horovod not available: pip install failed"
    assert out.startswith(line), out
    assert line in err
    # one NOT MEASURED row in each workload's table
    assert out.count("| horovod | NOT MEASURED: Horovod not available") == 2, out
    assert open(md).read().startswith(line)


def test_expected_system_without_rows_is_reported(tmp_path):
    path = write(tmp_path, FAKE)
    out, _ = run(COMPARE, path, "--expect", "torch", "--expect", "openmpi")
    assert "NOT MEASURED: torch: no result was recorded" in out, out
    assert "NOT MEASURED: openmpi" not in out, "openmpi-blocking has rows"


def test_nothing_missing_says_nothing(tmp_path):
    out, err = run(COMPARE, write(tmp_path, FAKE))
    assert "NOT MEASURED" not in out + err


def test_horovod_bench_report_says_horovod_not_measured(tmp_path):
    rows = [{"impl": "plait", "workload": "fused", "median_s": 0.01, "p10_s": 0.01,
             "p90_s": 0.01, "steps": 3, "round": 1, "version": "0", "torch": "0"},
            {"kind": "missing", "system": "horovod", "reason": "cached build failure"}]
    out, err = run(HVD_BENCH, "--report", write(tmp_path, rows))
    assert out.startswith("Horovod: NOT MEASURED: cached build failure"), out
    assert "Horovod: NOT MEASURED" in err
    assert "| fused | 10.00 ms" in out and out.rstrip().endswith("| NOT MEASURED |"), out


def test_horovod_bench_report_without_horovod_rows_or_reason(tmp_path):
    rows = [{"impl": "plait", "workload": "fused", "median_s": 0.01, "p10_s": 0.01,
             "p90_s": 0.01, "steps": 3, "round": 1, "version": "0", "torch": "0"}]
    out, _ = run(HVD_BENCH, "--report", write(tmp_path, rows))
    assert "Horovod: NOT MEASURED: no horovod rows in" in out, out


def test_tables_per_rank_count_with_latency_plugin_and_memcpy(tmp_path):
    rows = FAKE + [
        {"kind": "latency", "transport": "ofi-shm", "ranks": 3, "bytes": 4096,
         "time_s_median": 80e-6},
        {"kind": "latency", "transport": "openmpi", "ranks": 3, "bytes": 4096,
         "time_s_median": 20e-6},
        {"kind": "transport", "collective": "allreduce", "transport": "ofi-shm", "ranks": 2,
         "bytes": 64 << 20, "time_s_median": 0.03},
        {"kind": "transport", "collective": "memcpy", "transport": "memcpy", "ranks": 2,
         "bytes": 64 << 20, "time_s_median": 0.01},
        {"kind": "transport", "collective": "allreduce", "transport": "gloo", "ranks": 2,
         "bytes": 4096, "time_s_median": 0.001},  # not 64 MiB: not a comparison row
        {"kind": "fusion", "mix": "uniform-200x64K", "transport": "gloo", "ranks": 3,
         "step_s_median": 0.03},
        {"impl": "plait", "workload": "fused", "median_s": 0.025, "ranks": 3,
         "settings": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "shm"}},
    ]
    out, _ = run(COMPARE, write(tmp_path, rows))
    heads = [line for line in out.splitlines() if line.startswith("### ")]
    assert heads == ["### 200x64K, 2 ranks", "### 200x64K, 3 ranks", "### allreduce-64M, 2 ranks",
                     "### latency-4K, 3 ranks"], out
    lat = out.split("### latency-4K, 3 ranks")[1]
    assert "| plait-ofi-shm | 80.00 us | 1 |" in lat and "| openmpi | 20.00 us |" in lat, lat
    assert "| 0.25x |" in lat, lat  # Open MPI 4x faster than plait
    big = out.split("### allreduce-64M, 2 ranks")[1].split("###")[0]
    assert "| plugin-ofi-shm | 30.00 ms |" in big and "| memcpy | 10.00 ms |" in big, big
    three = out.split("### 200x64K, 3 ranks")[1].split("###")[0]
    assert "| plait.torch-ofi-shm-hvdbench | 25.00 ms |" in three, three


def test_missing_scoped_to_a_rank_count_and_expect_per_rank(tmp_path):
    rows = FAKE + [
        {"kind": "fusion", "mix": "uniform-200x64K", "transport": "gloo", "ranks": 3,
         "step_s_median": 0.03},
        {"kind": "comparison", "system": "torch.distributed-async", "workload": "200x64K",
         "ranks": 2, "median_s": 0.08},
        {"kind": "missing", "system": "horovod", "ranks": 3, "reason": "horovodrun failed"}]
    out, err = run(COMPARE, write(tmp_path, rows), "--expect", "torch", "--ranks", "2,3")
    assert "NOT MEASURED: horovod (3 ranks): horovodrun failed" in err, err
    assert "NOT MEASURED: torch (3 ranks): no result was recorded" in out, out
    assert "NOT MEASURED: torch (2 ranks)" not in out, out
    two = out.split("### 200x64K, 2 ranks")[1].split("###")[0]
    three = out.split("### 200x64K, 3 ranks")[1].split("###")[0]
    assert "horovod" not in two and "| horovod | NOT MEASURED: horovodrun failed |" in three


def test_bad_rank_list_is_refused(tmp_path):
    p = subprocess.run([sys.executable, COMPARE, write(tmp_path, FAKE), "--ranks", "2,x"],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "--ranks '2,x' is not a list of rank counts" in p.stderr
