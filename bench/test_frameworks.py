"""Tests for bench/frameworks.py (ci/bench frameworks): the table's figures
(median, images/s, scaling efficiency against one process, plait's fusion
statistics per step, the framework ratios next to the seed study's), a run
that did not happen shown as NOT MEASURED, ranks with different weights or a
model that is not the spec's failing the report, and bad input named with
exit 2. No framework needed: the report and the checks are plain Python.
Run: /usr/bin/python3 -m pytest bench/test_frameworks.py

The records written here are FAKE, made up to exercise the report. They are
not measurements and must never be copied into results.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "frameworks.py")
sys.path.insert(0, HERE)
import frameworks  # noqa: E402
from frameworks_models import SPEC, spec_parameters  # noqa: E402

PARAMS, TENSORS = spec_parameters()


def run(fw, system, step_s, ranks=2, identical=True, stats=None, n_params=PARAMS, rnd=1):
    return {"kind": "run", "framework": fw, "system": system, "round": rnd, "ranks": ranks,
            "batch": SPEC["batch"], "step_s": step_s, "final_loss": 2.3, "identical": identical,
            "n_params": n_params, "n_tensors": TENSORS, "stats": stats, "version": "x"}


SETUP = {"kind": "setup", "ranks": 2, "rounds": 2, "steps": 3, "warmup": 1, "cores": 2,
         "load_before": [1.0, 1.0, 1.0], "load_after": [2.0, 2.0, 2.0]}


def report(tmp_path, records, *extra):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    md = tmp_path / "t.md"
    p = subprocess.run([sys.executable, SCRIPT, "--report", str(path), "--markdown", str(md)]
                       + list(extra), capture_output=True, text=True)
    return p, md.read_text() if md.exists() else ""


def line(md, start):
    hits = [x for x in md.splitlines() if x.startswith(start)]
    assert len(hits) == 1, (start, md)
    return [c.strip() for c in hits[0].strip("|").split("|")]


def test_the_spec_is_the_classic_small_cnn():
    # conv 3x3x32 (320) + conv 3x3x64 (18,496) + dense 9216x128 (1,179,776) + dense 128x10 (1,290)
    assert (PARAMS, TENSORS) == (1199882, 8)


def test_table_efficiency_fusion_and_ratios(tmp_path):
    stats = {"tensors": 80, "responses": 10, "bytes": 48000000, "transport_s": 0.03}
    recs = [SETUP,
            run("torch", "single", [0.10, 0.10, 0.10], ranks=1),
            run("torch", "plait-gloo", [0.20, 0.25, 0.20], stats=stats),
            run("torch", "plait-gloo", [0.25, 0.25, 0.25], stats=stats, rnd=2),
            run("tensorflow", "single", [0.30, 0.30, 0.30], ranks=1),
            run("tensorflow", "plait-gloo", [0.40, 0.40, 0.40], stats=stats),
            run("mxnet", "single", [0.05, 0.05, 0.05], ranks=1),
            {"kind": "missing", "framework": "mxnet", "system": "plait-gloo",
             "reason": "the build failed"}]
    p, md = report(tmp_path, recs)
    assert p.returncode == 0, p.stdout + p.stderr
    row = line(md, "| PyTorch | plait-gloo |")
    # median of 6 steps (0.20 0.20 0.25 0.25 0.25 0.25) = 0.25 s; 2 x 32 / 0.25 = 256 img/s
    assert row[2:5] == ["2", "250.0 ms", "200.0 - 250.0 ms"]
    assert row[5] == "256"
    assert row[6] == "0.40"                  # single 100 ms / 250 ms
    assert row[7] == "identical"
    # 160 tensors, 20 collectives, 96 MB, 60 ms in the transport, in 6 steps
    assert row[8:12] == ["26.7", "3.3", "16.00", "10.0 ms"]
    assert line(md, "| PyTorch | single |")[6:8] == ["1.00", "- (one process)"]
    assert "NOT MEASURED: the build failed" in line(md, "| MXNet | plait-gloo |")[3]
    assert md.startswith("NOT MEASURED: mxnet plait-gloo: the build failed")
    assert line(md, "| seed study |")[1:] == ["2.65x", "1.38x"]
    assert line(md, "| `single` |")[1:] == ["3.00x", "2.00x"]      # 300/100, 100/50
    assert line(md, "| `plait-gloo` |")[1:] == ["1.60x", "-"]       # 400/250; MXNet missing
    assert "1199882 parameters in 8 tensors" in md


def test_one_framework_has_no_ratio_table(tmp_path):
    p, md = report(tmp_path, [SETUP, run("mxnet", "single", [0.1], ranks=1),
                              run("mxnet", "native", [0.2])])
    assert p.returncode == 0, p.stderr
    assert "seed study" not in md and line(md, "| MXNet | native (kvstore dist_sync) |")[6] == "0.50"


def test_ranks_that_differ_fail_the_report(tmp_path):
    p, md = report(tmp_path, [SETUP, run("torch", "single", [0.1], ranks=1),
                              run("torch", "native", [0.2], identical=False)])
    assert p.returncode == 1
    assert line(md, "| PyTorch | native (DDP) |")[7] == "DIFFER"
    assert "torch native" in p.stderr


def test_a_model_that_is_not_the_spec_fails_the_report(tmp_path):
    p, md = report(tmp_path, [SETUP, run("mxnet", "single", [0.1], ranks=1, n_params=123)])
    assert p.returncode == 1
    assert "MODEL DIFFERS" in md and "mxnet single: 123 parameters" in md


def test_the_summary_without_a_single_run_has_no_efficiency():
    rows, missing = frameworks.summarize([run("torch", "horovod", [0.2])])
    assert rows[("torch", "horovod")]["efficiency"] is None and missing == {}


def bad(*argv):
    p = subprocess.run([sys.executable, SCRIPT, "--out", "/nonexistent/never-written"]
                       + list(argv), capture_output=True, text=True)
    assert p.returncode == 2, (argv, p.stdout, p.stderr)
    return p.stderr


def test_bad_input_is_named_exit_2():
    assert "--frameworks: unknown 'jax'" in bad("--frameworks", "torch,jax")
    assert "--systems: unknown 'mpi'" in bad("--systems", "mpi")
    assert "--ranks '1' is not a whole number >= 2" in bad("--ranks", "1")
    assert "--ranks 'two'" in bad("--ranks", "two")
    assert "--rounds '0'" in bad("--rounds", "0")
    assert "--python 'torch'" in bad("--python", "torch")
    assert "--python: unknown 'jax'" in bad("--python", "jax=/usr/bin/python3")
    assert "--not-measured 'torch:mpi'" in bad("--not-measured", "torch:mpi=why")


def test_a_report_of_a_file_that_is_not_json_is_named(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"kind": "setup"}\nnot json\n')
    p = subprocess.run([sys.executable, SCRIPT, "--report", str(path)], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "r.jsonl:2: not JSON" in p.stderr
