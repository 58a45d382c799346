"""The soak harness's own checks, without plait: verdicts from rank
reports (results.py), and the watchdog (watchdog.py) on a fake hung job:
every rank's Python and native stacks are printed, then no process of the
job is left; the jobs --bounded (ctest's soak_bounded) plans."""

import json
import os
import re
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import results  # noqa: E402
import soak  # noqa: E402
import watchdog  # noqa: E402


def _write(d, rank, recs, finished=True):
    with open(os.path.join(d, "rank%d.jsonl" % rank), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
        if finished:
            f.write(json.dumps({"session": "finished", "exitstatus": 0,
                                "tensors": 7 + rank, "responses": 3}) + "\n")


def _t(name, outcome, reason="", when="call"):
    return {"test": "f.py::" + name, "when": when, "outcome": outcome, "reason": reason}


def test_all_pass(tmp_path):
    for r in (0, 1):
        _write(tmp_path, r, [_t("a", "passed"), _t("b", "skipped")])
    s = results.summarise(results.read_ranks(tmp_path), 2, soak.DESYNC)
    assert (s["passed"], s["failed"], s["skipped"], s["ops"]) == (1, 0, 1, 8)
    assert results.verdict(s, 0, False) == "ok"


def test_teardown_error_counts_as_failure(tmp_path):
    for r in (0, 1):
        _write(tmp_path, r, [_t("a", "passed"), _t("a", "error", "boom", when="teardown")])
    s = results.summarise(results.read_ranks(tmp_path), 2, soak.DESYNC)
    assert s["failed"] == 1 and results.verdict(s, 1, False) == "fail"


def test_mismatch_after_a_one_rank_failure_is_a_desync(tmp_path):
    _write(tmp_path, 0, [_t("a", "failed", "ValueError: x"),
                         _t("b", "failed", "plait.MismatchError: allreduce 'x': mismatched shape "
                            "across ranks: [2] on rank 0, [3] on rank 1")])
    _write(tmp_path, 1, [_t("a", "passed"), _t("b", "passed")])
    s = results.summarise(results.read_ranks(tmp_path), 2, soak.DESYNC)
    assert results.verdict(s, 1, False) == "desync"


def test_could_not_meet_alone_is_not_a_desync(tmp_path):
    reason = ("ranks could not meet after the test: PeerLostError: rank 1 reported that a "
              "collective failed in its transport")
    for r in (0, 1):
        _write(tmp_path, r, [_t("a", "error", reason, when="teardown")])
    s = results.summarise(results.read_ranks(tmp_path), 2, soak.DESYNC)
    assert results.verdict(s, 1, False) == "fail"


def test_rank_that_never_finished_fails_the_job(tmp_path):
    _write(tmp_path, 0, [_t("a", "passed")])
    _write(tmp_path, 1, [_t("a", "passed")], finished=False)
    s = results.summarise(results.read_ranks(tmp_path), 2, soak.DESYNC)
    assert s["unfinished"] == [1] and results.verdict(s, 0, False) == "fail"
    # no report at all from a rank (it died at import) is caught too
    s = results.summarise(results.read_ranks(tmp_path), 3, soak.DESYNC)
    assert s["unfinished"] == [1, 2]


def test_hang_wins(tmp_path):
    s = results.summarise(results.read_ranks(tmp_path), 2, soak.DESYNC)
    assert results.verdict(s, -9, True) == "hang"


# A fake job: a launcher (bash) that starts two "ranks", each a Python
# process that loads the soak plugin's SIGUSR1 hook and then blocks for
# ever in a named function, one of them in a thread, so the stacks can be
# recognised.
RANK = r"""
import os, sys, threading, time
sys.path.insert(0, %(here)r)
import plait_soak_plugin  # registers the SIGUSR1 stack dump
def waits_for_ever_rank_%(r)s():
    threading.Event().wait()
t = threading.Thread(target=waits_for_ever_rank_%(r)s, daemon=True)
t.start()
open(os.path.join(os.environ["PLAIT_SOAK_REPORT"], "up%(r)s"), "w").close()
waits_for_ever_rank_%(r)s()
"""


@pytest.fixture
def fake_job(tmp_path):
    tag = uuid.uuid4().hex
    script = " & ".join("PLAIT_RANK=%d %s -c %s" % (r, sys.executable, _q(RANK % {"here": HERE, "r": r}))
                        for r in (0, 1)) + " & wait"
    env = dict(os.environ, PLAIT_SOAK_JOB=tag, PLAIT_SOAK_REPORT=str(tmp_path))
    proc = subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while not all(os.path.exists(tmp_path / ("up%d" % r)) for r in (0, 1)):
        assert time.monotonic() < deadline, "the fake ranks did not start"
        time.sleep(0.2)
    yield tag, proc, tmp_path
    watchdog.kill_all(tag, proc)


def _q(s):
    return "'" + s.replace("'", "'\\''") + "'"


def test_watchdog_finds_ranks_dumps_stacks_and_kills_everything(fake_job):
    tag, proc, d = fake_job
    assert sorted(watchdog.ranks(tag)) == [0, 1]
    text = watchdog.dump(tag, str(d), pyspy=os.environ.get("PLAIT_SOAK_PYSPY", ""))
    for r in (0, 1):
        section = text.split("---- rank %d " % r, 1)[1].split("---- rank", 1)[0]
        # Python stacks of both threads, from faulthandler
        assert section.count("waits_for_ever_rank_%d" % r) >= 2, section
        # native stacks: frames of libc or the interpreter (gdb: "#0 ...")
        assert re.search(r"-- native stacks[^\n]*:\n.*(#0 |libc\.so|PyThread_acquire|futex|pthread_cond)", section,
                         re.S), section
    left = watchdog.kill_all(tag, proc)
    assert left == [] and watchdog.tagged(tag) == [] and proc.poll() is not None


def _suites(args, kinds=("compat-torch1.13", "tf", "mx")):
    """suites() as it would answer, without probing interpreters."""
    folders = {"compat-torch1.13": "tests/bindings/torch/compat", "tf": "tests/bindings/tensorflow/mp",
               "mx": "tests/bindings/mxnet/mp"}
    out = []
    for k in kinds:
        d = os.path.join(soak.ROOT, folders[k])
        fs = sorted(os.path.join(d, f) for f in os.listdir(d) if re.match(r"test_.*\.py$", f))
        out.append((k, "python", fs + [d] if args.whole else fs, {}, []))
    return out


def test_bounded_plans_one_folder_job_per_suite_transport_and_ranks():
    """--bounded: every file of a suite in ONE job per transport and rank
    count (no job per file); compat on every transport at 2 and 3 ranks,
    TF (without its Keras files) on ofi-tcp and MXNet on ofi-shm at 2 ranks."""
    args = soak.parse_args(["--build-dir", "b", "--bounded"])
    tr = [(t, soak.TRANSPORTS[t]) for t in ("gloo", "ofi-shm", "ofi-tcp")]
    jobs = soak.plan(args, _suites(args), tr)
    got = sorted((j[0], os.path.relpath(j[2], soak.ROOT), j[5], j[7]) for j in jobs)
    want = sorted([("compat-torch1.13", "tests/bindings/torch/compat", t, n)
                   for t in ("gloo", "ofi-shm", "ofi-tcp") for n in (2, 3)]
                  + [("tf", "tests/bindings/tensorflow/mp", "ofi-tcp", 2),
                     ("mx", "tests/bindings/mxnet/mp", "ofi-shm", 2)])
    assert got == want
    # the TF job leaves the Keras files to ci/soak; the others run every file
    assert all(j[4] == (["--ignore-glob=*/test_keras_*.py"] if j[0] == "tf" else []) for j in jobs)
    # ci/soak (not bounded) keeps one job per file, and no folder job
    full = soak.parse_args(["--build-dir", "b"])
    jobs = soak.plan(full, _suites(full), tr)
    files = len(_suites(full)[0][2]) + len(_suites(full)[1][2]) + len(_suites(full)[2][2])
    assert len(jobs) == files * 3 * 2 and not any(os.path.isdir(j[2]) for j in jobs)
