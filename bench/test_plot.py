"""Tests for bench/plot.py. Run: /usr/bin/python3 -m pytest bench/test_plot.py

The records written here are FAKE, made up to exercise the plotting code.
They are not measurements and must never be copied into results.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "plot.py")
PNGS = ["fusion-threshold.png", "bandwidth.png", "breakdown.png"]
MIX_BYTES = {"resnet50": (161, 102228128), "bert-base": (199, 437928960),
             "uniform-64k": (200, 13107200)}


def fake_records():
    """Plausible-looking FAKE records for every kind plot.py knows, plus one
    it does not."""
    recs = [{"kind": "memcpy", "bytes": 1 << 26, "GBps": 9.5}]
    for transport, ranks, peak, lat in (("gloo", 2, 0.9, 40e-6),
                                        ("ofi", 2, 3.5, 8e-6),
                                        ("ofi", 4, 2.0, 15e-6)):
        for p in range(10, 28, 2):
            n = 1 << p
            t = lat + n / (peak * 1e9)
            recs.append({
                "kind": "collective", "collective": "allreduce",
                "transport": transport, "ranks": ranks, "bytes": n,
                "dtype": "float32", "time_s_median": t, "time_s_p10": t * 0.95,
                "time_s_p90": t * 1.2, "algbw_GBps": n / t / 1e9,
                "busbw_GBps": n / t / 1e9 * 2 * (ranks - 1) / ranks,
                "algorithm": "ring"})
    for mix, (tensors, total) in MIX_BYTES.items():
        for cyc in (1.0, 5.0):
            for thr in (0, 1 << 16, 1 << 20, 1 << 22, 1 << 24, 1 << 26):
                chunks = tensors if thr == 0 else max(1, -(-total // thr))
                neg = 2e-4 * min(chunks, tensors) / 10 + cyc * 1e-4
                tr = total / 0.9e9 + chunks * 60e-6
                cp = 0.0 if thr == 0 else total / 6e9
                step = neg + tr + 2 * cp + cyc * 5e-4
                recs.append({
                    "kind": "fusion", "mix": mix, "transport": "gloo",
                    "ranks": 2, "threshold_bytes": thr, "cycle_time_ms": cyc,
                    "tensors_per_step": tensors, "bytes_per_step": total,
                    "step_s_median": step, "step_s_p10": step * 0.96,
                    "step_s_p90": step * 1.1,
                    "tensors_per_response": tensors / chunks,
                    "fusion_fill": 0.0 if thr == 0 else min(1.0, total / chunks / thr),
                    "negotiate_s": neg, "copy_in_s": cp, "transport_s": tr,
                    "copy_out_s": cp})
    recs.append({"kind": "comparison", "note": "ignored by plot.py"})
    return recs


def write_jsonl(path, recs, extra_lines=()):
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
        for line in extra_lines:
            f.write(line + "\n")
    return str(path)


def run_plot(*args):
    return subprocess.run([sys.executable, PLOT, *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_writes_three_pngs(tmp_path):
    src = write_jsonl(tmp_path / "fake.jsonl", fake_records(), extra_lines=[""])
    out = tmp_path / "png"
    r = run_plot(src, "--out-dir", out)
    assert r.returncode == 0, r.stderr
    written = r.stdout.split()
    assert written == [str(out / name) for name in PNGS]
    for path in written:
        with open(path, "rb") as f:
            head = f.read(8)
        assert head == b"\x89PNG\r\n\x1a\n"
        assert os.path.getsize(path) > 10000
    assert "ignored 1 record(s) of kind 'comparison'" in r.stderr


def test_only_collectives_writes_bandwidth_only(tmp_path):
    recs = [r for r in fake_records() if r["kind"] in ("collective",)]
    out = tmp_path / "png"
    r = run_plot(write_jsonl(tmp_path / "c.jsonl", recs), "--out-dir", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(out / "bandwidth.png")]
    assert "no fusion records" in r.stderr


@pytest.mark.parametrize("line, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"bytes": 4}', "record has no string field 'kind'"),
    ('{"kind": "memcpy", "bytes": 4}', "memcpy record has no field 'GBps'"),
    ('{"kind": "memcpy", "bytes": 4, "GBps": "fast"}',
     "memcpy field 'GBps' must be a number"),
    ('{"kind": "memcpy", "bytes": 4.5, "GBps": 1}',
     "memcpy field 'bytes' must be a whole number"),
    ('{"kind": "memcpy", "bytes": 4, "GBps": 0}', "memcpy field 'GBps' must be > 0"),
])
def test_refuses_malformed_line(tmp_path, line, message):
    good = fake_records()
    src = write_jsonl(tmp_path / "bad.jsonl", good, extra_lines=[line])
    out = tmp_path / "png"
    r = run_plot(src, "--out-dir", out)
    assert r.returncode == 2
    assert "%s:%d: %s" % (src, len(good) + 1, message) in r.stderr, r.stderr
    assert r.stdout == ""
    assert not out.exists()


def test_refuses_fusion_record_without_breakdown(tmp_path):
    rec = next(r for r in fake_records() if r["kind"] == "fusion")
    del rec["copy_out_s"]
    src = write_jsonl(tmp_path / "bad.jsonl", [rec])
    r = run_plot(src, "--out-dir", tmp_path / "png")
    assert r.returncode == 2
    assert "%s:1: fusion record has no field 'copy_out_s'" % src in r.stderr


def test_nothing_to_plot(tmp_path):
    src = write_jsonl(tmp_path / "x.jsonl", [{"kind": "comparison"}])
    r = run_plot(src, "--out-dir", tmp_path / "png")
    assert r.returncode == 2
    assert "nothing to plot" in r.stderr


def test_missing_file(tmp_path):
    r = run_plot(tmp_path / "absent.jsonl", "--out-dir", tmp_path / "png")
    assert r.returncode == 2
    assert "cannot read" in r.stderr


def test_shebang_names_debian_python():
    with open(PLOT) as f:
        assert f.readline().strip() == "#!/usr/bin/python3"
    assert os.access(PLOT, os.X_OK)


def test_mixes_are_current():
    """The committed mixes are what make_mixes.py writes (totals asserted
    there)."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "mixes", "make_mixes.py"),
                        "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_says_so_when_matplotlib_is_missing(tmp_path):
    fake = tmp_path / "shadow" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    src = write_jsonl(tmp_path / "fake.jsonl", fake_records())
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "shadow"))
    r = subprocess.run([sys.executable, PLOT, src, "--out-dir", str(tmp_path / "png")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2
    assert "python3-matplotlib" in r.stderr
