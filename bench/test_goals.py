"""Tests for bench/goals.py (ci/bench's goal tables, issue 15): each goal's
PASS/MISS from the figures, NOT MEASURED with the recorded reason, autotune's
settle step from the step times and from its CSV or log.
Run: /usr/bin/python3 -m pytest bench/test_goals.py

The records written here are FAKE, made up to exercise the tables. They are
not measurements and must never be copied into results.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GOALS = os.path.join(HERE, "goals.py")
sys.path.insert(0, HERE)
import goals  # noqa: E402


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def run(*args):
    p = subprocess.run([sys.executable, GOALS, *map(str, args)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def cmp(system, workload, ranks, t):
    return {"kind": "comparison", "system": system, "workload": workload, "ranks": ranks,
            "median_s": t}


def lat(transport, ranks, t):
    return {"kind": "latency", "transport": transport, "ranks": ranks, "bytes": 4096,
            "time_s_median": t}


def big(kind, transport, ranks, t):
    if kind == "plugin":
        return {"kind": "transport", "collective": "allreduce", "transport": transport,
                "ranks": ranks, "bytes": 64 << 20, "time_s_median": t}
    return {"kind": "collective", "collective": "allreduce", "transport": transport,
            "ranks": ranks, "bytes": 64 << 20, "time_s_median": t}


def row(text, *cells):
    """The table line that contains every cell."""
    hits = [line for line in text.splitlines() if all(c in line for c in cells)]
    assert len(hits) == 1, (cells, hits)
    return hits[0]


def test_latency_goal_pass_and_miss(tmp_path):
    c = write(tmp_path / "c.jsonl", [lat("ofi-shm", 2, 80e-6), lat("ofi-shm", 2, 90e-6),
                                     lat("ofi-shm", 2, 85e-6), lat("openmpi", 2, 20e-6),
                                     lat("ofi-shm", 3, 1.1e-3), lat("gloo", 3, 1.2e-3)])
    out = run("--comparison", c)
    assert row(out, "| 2 | plait-ofi-shm |").endswith("| 85.0 us | 4.2x | < 100 us | **PASS** |")
    assert row(out, "| 3 | plait-ofi-shm |").endswith("| < 100 us | **MISS** |")
    assert row(out, "| 3 | plait-gloo |").endswith("| - | - |")  # no goal over gloo
    assert "| 3 | openmpi | NOT MEASURED: openmpi: no result was recorded |" in out


def test_latency_not_measured_with_the_recorded_reason(tmp_path):
    c = write(tmp_path / "c.jsonl", [
        lat("gloo", 2, 1e-3),
        {"kind": "missing", "system": "plait-ofi-shm",
         "reason": "transport ofi:shm cannot start here at 2 ranks: no provider"}])
    out = run("--comparison", c, "--ranks", "2")
    assert row(out, "| 2 | plait-ofi-shm |").endswith(
        "| NOT MEASURED: plait-ofi-shm: transport ofi:shm cannot start here at 2 ranks: "
        "no provider | - | < 100 us | NOT MEASURED |")


def test_step_goals(tmp_path):
    w = "200x64K"
    c = write(tmp_path / "c.jsonl", [
        {"kind": "fusion", "mix": "uniform-200x64K", "transport": "ofi-shm", "ranks": 2,
         "step_s_median": 0.005},
        {"kind": "fusion", "mix": "uniform-200x64K", "transport": "gloo", "ranks": 2,
         "step_s_median": 0.02},
        cmp("plait.torch-ofi-shm", w, 2, 0.008), cmp("openmpi-nonblocking", w, 2, 0.006),
        {"impl": "horovod", "workload": "fused", "ranks": 2, "median_s": 0.012},
        {"kind": "missing", "system": "horovod", "ranks": 3, "reason": "horovodrun failed"},
        {"kind": "fusion", "mix": "uniform-200x64K", "transport": "ofi-shm", "ranks": 3,
         "step_s_median": 0.009},
        cmp("openmpi-nonblocking", w, 3, 0.01)])
    out = run("--comparison", c)
    assert row(out, "| 2 | plait C ahead of Open MPI").endswith(
        "| plait-ofi-shm | 5.00 ms | openmpi-nonblocking | 6.00 ms | 1.20x as fast | **PASS** |")
    assert row(out, "| 2 | plait C >= 2x ahead of Horovod").endswith("| 2.40x as fast | **PASS** |")
    assert row(out, "| 2 | plait.torch ahead of Open MPI").endswith("| 0.75x as fast | **MISS** |")
    assert row(out, "| 2 | plait.torch >= 2x").endswith("| 1.50x as fast | **MISS** |")
    assert row(out, "| 3 | plait C >= 2x ahead of Horovod").endswith(
        "| NOT MEASURED: horovod: horovodrun failed |")
    assert row(out, "| 3 | plait.torch ahead of Open MPI").endswith(
        "| NOT MEASURED: plait.torch: no result was recorded |")


def sweep_rows(transport, ranks, mix, points):
    return [{"kind": "fusion", "mix": mix, "transport": transport, "ranks": ranks,
             "threshold_bytes": thr, "cycle_time_ms": cyc, "fusion_max_tensor_bytes": 0,
             "step_s_median": t} for thr, cyc, t in points]


def tuning_row(transport, ranks, mix, autotune, steps, thr=64 << 20):
    return {"kind": "tuning", "mix": mix, "transport": transport, "ranks": ranks,
            "autotune": autotune, "threshold_bytes": thr, "cycle_time_ms": 1,
            "fusion_max_tensor_bytes": 0, "steps": len(steps),
            "step_s_median": sorted(steps)[len(steps) // 2], "step_s": steps}


def test_autotune_against_the_sweep(tmp_path):
    sweep = write(tmp_path / "fusion-ofi-shm.jsonl",
                  sweep_rows("ofi-shm", 2, "bert-base", [(0, 1, 0.30), (4 << 20, 1, 0.20),
                                                         (64 << 20, 1, 0.29)]) +
                  sweep_rows("ofi-shm", 2, "resnet50", [(0, 1, 0.10), (16 << 20, 5, 0.08)]))
    # BERT: slow for 40 steps, then 0.21 (within 10% of 0.20): settled at step 40.
    bert = [0.4] * 40 + [0.21] * 60
    # ResNet: never better than 0.1 (1.25x the best).
    res = [0.1] * 40
    (tmp_path / "autotune-bert.csv").write_text(
        "step,threshold,cycle_ms,score,settled\n10,1048576,1,5,0\n30,4194304,1,6,0\n"
        "40,4194304,1,7,1\n")
    (tmp_path / "autotune-res.log").write_text(
        "[0]: plait [info] autotune: settled on 16M after 120 steps\n")
    tuning = write(tmp_path / "tuning.jsonl", [
        tuning_row("ofi-shm", 2, "bert-base", True, bert, thr=4 << 20),
        tuning_row("ofi-shm", 2, "bert-base", False, [0.29] * 10),
        tuning_row("ofi-shm", 2, "resnet50", True, res),
        {"kind": "autotune-run", "transport": "ofi-shm", "ranks": 2, "mix": "bert-base",
         "csv": "autotune-bert.csv", "log": "autotune-bert.log"},
        {"kind": "autotune-run", "transport": "ofi-shm", "ranks": 2, "mix": "resnet50",
         "csv": "absent.csv", "log": "autotune-res.log"}])
    out = run("--comparison", write(tmp_path / "c.jsonl", []), "--tuning", tuning,
              "--sweep", sweep, "--ranks", "2")
    assert row(out, "| 2 | ofi-shm | bert-base |").endswith(
        "| 200.00 ms (4 MiB, 1 ms) | 290.00 ms (64 MiB, 1 ms) | 1.45x | 210.00 ms | 1.05x "
        "| 4 MiB, 1 ms | 40 of 100 | step 40 (CSV sample 3 of 3) | **PASS** |")
    assert row(out, "| 2 | ofi-shm | resnet50 |").endswith(
        "| 80.00 ms (16 MiB, 5 ms) | NOT MEASURED | - | 100.00 ms | 1.25x | 64 MiB, 1 ms "
        "| 0 of 40 | 120 steps (log) | **MISS** |")


def test_autotune_refused_is_not_measured_with_its_reason(tmp_path):
    sweep = write(tmp_path / "f.jsonl", sweep_rows("gloo", 3, "mlp-10m", [(0, 1, 0.05)]))
    tuning = write(tmp_path / "t.jsonl", [
        tuning_row("gloo", 3, "mlp-10m", False, [0.06] * 5),
        {"kind": "missing", "system": "autotune", "transport": "gloo", "ranks": 3,
         "reason": "PLAIT_AUTOTUNE=1 over gloo at 3 ranks failed (exit 1): plait_init() "
                   "failed: PLAIT_ERR_UNSUPPORTED: not implemented"}])
    out = run("--comparison", write(tmp_path / "c.jsonl", []), "--tuning", tuning,
              "--sweep", sweep)
    assert ("- NOT MEASURED: autotune (gloo, 3 ranks): PLAIT_AUTOTUNE=1 over gloo at 3 ranks "
            "failed (exit 1): plait_init() failed: PLAIT_ERR_UNSUPPORTED: not implemented") in out
    assert row(out, "| 3 | gloo | mlp-10m |").endswith(
        "| 1.20x | NOT MEASURED (above) | - | - | - | - | NOT MEASURED |")


def test_whole_stack_against_the_plugin(tmp_path):
    w = "allreduce-64M"
    c = write(tmp_path / "c.jsonl", [
        big("plugin", "ofi-shm", 2, 0.040), big("plait", "ofi-shm", 2, 0.042),
        cmp("plait.torch-ofi-shm", w, 2, 0.060),
        {"kind": "transport", "collective": "memcpy", "transport": "memcpy", "ranks": 2,
         "bytes": 64 << 20, "time_s_median": 0.010},
        big("plait", "gloo", 2, 0.1),
        {"kind": "missing", "system": "plugin-gloo", "ranks": 2, "reason": "gloo init failed"}])
    out = run("--comparison", c, "--ranks", "2")
    line = row(out, "| 2 | ofi-shm |")
    assert line.startswith("| 2 | ofi-shm | 6.71 GB/s (10.00 ms) | 1.68 GB/s (40.00 ms) "
                           "| 1.60 GB/s (42.00 ms) | 1.12 GB/s (60.00 ms) | 0.95x | 0.67x |"), line
    assert line.endswith("| C **PASS**, plait.torch **MISS** |"), line
    assert row(out, "| 2 | gloo |").endswith(
        "| - | - | NOT MEASURED: plugin-gloo: gloo init failed |")


def test_settle_step():
    assert goals.settle_step([]) == (None, None)
    assert goals.settle_step([1.0] * 20) == (1.0, 0)
    t, first = goals.settle_step([5.0] * 10 + [1.0] * 30)
    assert t == 1.0 and first == 10
    # fast for a while, slow again at the end: not settled
    t, first = goals.settle_step([3.0] * 30 + [1.0] * 10 + [3.0] * 5)
    assert t == 1.0 and first is None


def test_bad_input_is_named(tmp_path):
    bad = tmp_path / "c.jsonl"
    bad.write_text("{oops\n")
    p = subprocess.run([sys.executable, GOALS, "--comparison", str(bad)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0 and "c.jsonl:1: not JSON" in p.stderr, p.stderr
