"""bench/latency_breakdown.py on two ranks' timelines written here, whose
clocks start at different Unix times: each phase's median comes out as built
in, on one time axis, and a trace without the tensor is refused by name."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "latency_breakdown.py")


def trace(path, base_us, ops, rank):
    """ops: per operation (submit, listed, coll_b, coll_e) in Unix us."""
    ev = [{"name": "plait_clock", "ph": "M", "pid": rank, "tid": 0,
           "args": {"unix_time_us_at_ts_0": base_us}},
          {"name": "thread_name", "ph": "M", "pid": rank, "tid": 1, "args": {"name": "lat"}}]
    for s, l, b, e in ops:
        for name, ph, t in (("NEGOTIATE", "B", s), ("NEGOTIATE", "E", l), ("QUEUE", "B", l),
                            ("QUEUE", "E", b), ("OFI_ALLREDUCE", "B", b),
                            ("OFI_ALLREDUCE", "E", e)):
            ev.append({"name": name, "ph": ph, "ts": t - base_us, "pid": rank, "tid": 1})
    with open(path, "w") as f:
        json.dump(ev, f)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def test_phases_on_one_clock(tmp_path):
    r0, r1 = [], []
    for k in range(20):
        t = 1_000_000 + 100 * k
        # rank 1 submits 10 us after rank 0; rank 0's list 30 us after that
        r0.append((t, t + 40, t + 41, t + 61))
        r1.append((t + 10, t + 45, t + 47, t + 50))
    trace(tmp_path / "0.json", 5_000, r0, 0)
    trace(tmp_path / "1.json", 900_000, r1, 1)
    p = run(str(tmp_path / "0.json"), str(tmp_path / "1.json"), "--name", "lat", "--skip", "2")
    assert p.returncode == 0, p.stderr
    got = {}
    for line in p.stdout.splitlines()[1:]:
        key, value = line.rsplit(None, 1)
        got[key.strip()] = float(value)
    assert got["submit skew"] == 10.0
    assert got["list on rank 0"] == 30.0
    assert got["list on rank 1"] == 35.0
    assert got["collective (0)"] == 20.0
    assert got["collective (1)"] == 3.0
    assert got["entry skew"] == 6.0
    assert got["complete->submit (0)"] == 39.0
    assert got["period"] == 100.0


def test_unknown_tensor_is_named(tmp_path):
    trace(tmp_path / "0.json", 0, [(1, 2, 3, 4)] * 3, 0)
    p = run(str(tmp_path / "0.json"), "--name", "nosuch")
    assert p.returncode != 0
    assert "no tensor named 'nosuch'" in p.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
