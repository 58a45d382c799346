"""The elastic scenarios' own machinery, without plait (ctest elastic_judge):
the final-parameter verdicts, the discovery script each job writes, and the
timestamped line reader (run on a stand-in for plaitrun that prints the lines
the driver and the example print)."""
import array
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import elastic_job  # noqa: E402
from elastic_job import Failed, Job, compare_params  # noqa: E402


def write(path, values):
    with open(path, "wb") as f:
        f.write(array.array("d", values).tobytes())


@pytest.fixture
def params(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    write(tmp_path / "reference", [1.0, -2.0, 3.5])
    return out, str(tmp_path / "reference")


def test_equal_ranks_within_tolerance_pass(params):
    out, ref = params
    for r in range(2):
        write(out / ("params.rank%d" % r), [1.0 + 1e-13, -2.0, 3.5])
    assert compare_params(str(out), ref, 2) == pytest.approx(1e-13, rel=0.1)


def test_ranks_that_differ_fail(params):
    out, ref = params
    write(out / "params.rank0", [1.0, -2.0, 3.5])
    write(out / "params.rank1", [1.0, -2.0, 3.5 + 1e-15])
    with pytest.raises(Failed, match="params.rank1 differs"):
        compare_params(str(out), ref, 2)


def test_off_the_reference_fails(params):
    out, ref = params
    write(out / "params.rank0", [1.0, -2.0, 3.6])
    with pytest.raises(Failed, match="parameter 2 is 3.6"):
        compare_params(str(out), ref, 1)


def test_a_missing_or_extra_rank_fails(params):
    out, ref = params
    write(out / "params.rank0", [1.0, -2.0, 3.5])
    with pytest.raises(Failed, match="expected from the 2 ranks"):
        compare_params(str(out), ref, 2)
    write(out / "params.rank1", [1.0, -2.0, 3.5])
    write(out / "params.rank2", [1.0, -2.0, 3.5])
    with pytest.raises(Failed, match="expected from the 2 ranks"):
        compare_params(str(out), ref, 2)


FAKE_PLAITRUN = """#!/bin/sh
# prints what the driver and the example print; the discovery script is "$3"
echo "plaitrun elastic: epoch 1 formed: 2 workers on 2 hosts (127.0.0.1:1 127.0.0.2:1) in 0.1 s"
echo "[0]: elastic worker 127.0.0.1/0 pid 101: rank 0 of 2, epoch 0, step 0"
echo "[1]: elastic worker 127.0.0.2/0 pid 102: rank 1 of 2, epoch 0, step 0"
echo "[0]: step: epoch 0 batch 1 on 2 workers, 16/384 samples"
"$3" | sed 's/^/hosts: /'
sleep 0.3
echo "[0]: step: epoch 1 batch 4 on 2 workers, 64/384 samples"
exit 3
"""


def fake_job(tmp_path):
    fake = tmp_path / "plaitrun"
    fake.write_text(FAKE_PLAITRUN)
    fake.chmod(0o755)
    job = Job(str(fake), str(tmp_path), ["127.0.0.1:1", "127.0.0.2:1"], [], [], 5)
    # the stand-in sees the discovery script as its third argument
    job.argv = [str(fake), "-", "-", job.script]
    return job


def test_the_reader_stamps_lines_and_finds_workers(tmp_path):
    job = fake_job(tmp_path)
    job.start()
    try:
        i, _, m = job.wait_line(elastic_job.FORMED, 30)
        assert m.group(1) == "1" and m.group(2) == "2"
        _, t, m = job.wait_step(1, 2, 30)
        assert m.group(1) == "1" and t >= 0.3
        assert job.worker_of_rank(1) == ("127.0.0.2/0", 102)
        assert job.workers("127.0.0.1") == {"127.0.0.1/0": 101}
        assert "hosts: 127.0.0.2:1" in job.output()
        with pytest.raises(Failed, match=r"the job ended \(status 3\) before step 0 of epoch 9"):
            job.wait_step(9, 0, 30)
        assert job.finish(30) == 3
    finally:
        job.stop()


def test_the_discovery_script_fails_on_demand(tmp_path):
    job = Job("/bin/false", str(tmp_path), ["127.0.0.1:2"], [], [], 5)
    r = subprocess.run([job.script], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "127.0.0.1:2\n")
    job.set_hosts(["127.0.0.1:2", "127.0.0.3"])
    job.fail_discovery(True)
    r = subprocess.run([job.script], capture_output=True, text=True)
    assert r.returncode == 3 and elastic_job.DISCOVERY_FAILS in r.stderr and r.stdout == ""
    job.fail_discovery(False)
    r = subprocess.run([job.script], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "127.0.0.1:2\n127.0.0.3\n")


def test_a_line_that_never_comes_times_out(tmp_path):
    job = fake_job(tmp_path)
    job.argv = ["/bin/sleep", "5"]
    job.start()
    try:
        with pytest.raises(Failed, match="waited 1 s in vain for epoch 7"):
            job.wait_line("epoch 7", 1, 0, "epoch 7")
    finally:
        job.stop()
