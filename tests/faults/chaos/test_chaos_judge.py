"""The chaos harness's verdicts (tests/faults/chaos/chaos.py), without ranks:
which error texts name which ranks, and what counts as a hang, a crash, a
wrong blame or a late error. A harness that cannot fail proves nothing."""
import io
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos  # noqa: E402


def test_blamed_ranks_reads_the_verdict():
    assert chaos.blamed_ranks("rank 2 was lost: connection closed while reading") == [2]
    assert chaos.blamed_ranks("ranks 1, 3 were lost: silent after a collective failed "
                              "(the transport said: waiting for rank 0)") == [1, 3]
    # the verdict comes first; ranks the transport mentions later do not count
    assert chaos.blamed_ranks("rank 0 was lost: silent (the transport said: rank 2 was lost)") == [0]
    assert chaos.blamed_ranks("allreduce 'x' failed in transport 'ofi': timed out waiting "
                              "for rank 1, 0, which died") == []
    assert chaos.blamed_ranks("grad: rank 10 was lost: x") == [10]
    assert chaos.blamed_ranks(None) == []


def fake_rank(report, exit, shutdown="PLAIT_SUCCESS 0.01"):
    rk = chaos.Rank(1, None, io.BytesIO(b"stderr text"))
    rk.report, rk.exit, rk.shutdown = report, exit, shutdown
    return rk


def args(**kw):
    a = dict(timeout=3.0, margin=5.0, hang_after=42.0, max_workload=300.0, logs=None)
    a.update(kw)
    return types.SimpleNamespace(**a)


TRIAL = {"trial": 0, "victim": 0}
LOST0 = {"result": "PLAIT_ERR_PEER_LOST", "error": "rank 0 was lost: x", "t_err": 102.0}


def verdict(report, exit, **kw):
    return chaos.judge(args(**kw), fake_rank(report, exit), TRIAL, 100.0)


def test_right_blame_in_time_is_clean():
    s = verdict(LOST0, 0)
    assert s["problems"] == [] and s["blamed"] == [0] and s["time_to_error"] == 2.0


def test_every_kind_of_failure_is_caught():
    assert verdict(None, None)["problems"][0].startswith("hang: no error")
    assert verdict(LOST0, None)["problems"][0].startswith("hang: plait_shutdown")
    assert verdict(LOST0, -11)["problems"][0].startswith("crash: killed by signal 11")
    assert verdict(None, 1)["problems"][0].startswith("crash: exit status 1")
    assert verdict(LOST0, 2)["problems"][0].startswith("wrong data")
    assert verdict(LOST0, 3)["problems"][0].startswith("hang: the workload ran")
    wrong = dict(LOST0, error="rank 2 was lost: x")
    assert verdict(wrong, 0)["problems"][0].startswith("blame: PLAIT_ERR_PEER_LOST naming [2]")
    both = dict(LOST0, error="ranks 0, 2 were lost: x")
    assert verdict(both, 0)["problems"][0].startswith("blame:")
    nobody = dict(LOST0, error="allreduce 'big' failed in transport 'gloo': timed out")
    assert "naming no rank" in verdict(nobody, 0)["problems"][0]
    other = dict(LOST0, result="PLAIT_ERR_TRANSPORT")
    assert verdict(other, 0)["problems"][0].startswith("blame: PLAIT_ERR_TRANSPORT")
    late = dict(LOST0, t_err=108.5)
    assert verdict(late, 0)["problems"] == ["late: 8.5 s > PLAIT_TIMEOUT_S 3 + margin 5"]
    early = dict(LOST0, t_err=99.0)
    assert verdict(early, 0)["problems"][0].startswith("early:")


def test_the_worst_problem_names_the_trial():
    assert chaos.trial_outcome([{"problems": []}]) == "ok"
    assert chaos.trial_outcome([{"problems": ["late: x"]}, {"problems": ["blame: y"]}]) == "blame"
    assert chaos.trial_outcome([{"problems": ["blame: y", "hang: z"]}]) == "hang"


def test_plans_replay_from_the_seed():
    import random
    a = chaos.parse(["5", "--ranks", "4"])
    p1, p2 = chaos.plan(a, random.Random(7)), chaos.plan(a, random.Random(7))
    assert p1 == p2 and len(p1) == 15
    assert {t["victim"] for t in p1} <= {0, 1, 2, 3}
    b = chaos.parse(["--bounded"])
    bp = chaos.bounded_plan(b, random.Random(1))
    assert len(bp) == 6
    assert {(t["fault"], t["victim"] == 0) for t in bp} == {
        ("kill", True), ("kill", False), ("stop", True), ("stop", False)}
    assert {t["lang"] for t in bp} == {"c", "python"}


def record(i, outcome, transport="gloo"):
    """A trial's record as run_trial returns it: 'ok', 'late' (one survivor
    late, with the right blame) or 'no-start'."""
    r = {"trial": i, "transport": transport, "lang": "c", "fault": "kill", "victim": 0,
         "moment": 0.5, "outcome": outcome}
    if outcome == "no-start":
        r["why"] = "rank 1: exited 1 plait_init: PLAIT_ERR_TIMEOUT"
        return r
    late = outcome == "late"
    r["survivors"] = [{"rank": k, "result": "PLAIT_ERR_PEER_LOST", "blamed": [0],
                       "time_to_error": 9.5 if late and k == 1 else 2.0,
                       "problems": ["late: 9.5 s > PLAIT_TIMEOUT_S 3 + margin 5"]
                       if late and k == 1 else []} for k in (1, 2)]
    return r


def run_verdict(argv, outcomes):
    a = chaos.parse(argv)
    records = [record(i, o, a.transports[i % len(a.transports)]) for i, o in enumerate(outcomes)]
    text, bad = chaos.summarize(a, records)
    return bad, text


def test_bounded_fails_on_one_trial_that_never_started():
    bad, text = run_verdict(["--bounded"], ["ok"] * 5 + ["no-start"])
    assert bad and "no-start" in text
    # the full run (ci/chaos) only notes it, unless asked
    assert not run_verdict([], ["ok"] * 5 + ["no-start"])[0]
    assert run_verdict(["--fail-no-start"], ["ok"] * 5 + ["no-start"])[0]


def test_bounded_fails_on_a_late_error():
    bad, text = run_verdict(["--bounded"], ["ok"] * 5 + ["late"])
    assert bad and "late: 9.5 s" in text
    assert not run_verdict([], ["ok"] * 5 + ["late"])[0]
    assert run_verdict(["--fail-late"], ["ok"] * 5 + ["late"])[0]


def test_bounded_passes_only_when_every_trial_ran_clean():
    assert not run_verdict(["--bounded"], ["ok"] * 6)[0]
    # and, as before, nothing started at all fails any run
    assert run_verdict([], ["no-start"] * 6)[0]


def fake_matrix(tmp_path, monkeypatch, body):
    """A matrix.sh that prints and exits as `body` says (hosts_matrix.py)."""
    import hosts_matrix
    script = tmp_path / "matrix.sh"
    script.write_text("#!/bin/bash\n" + body + "\n")
    script.chmod(0o755)
    monkeypatch.setattr(hosts_matrix, "MATRIX", str(script))
    worker = tmp_path / "tests" / "host_worker"
    worker.parent.mkdir()
    worker.write_text("")
    worker.chmod(0o755)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libplait-transport-ofi.so").write_text("")
    return hosts_matrix


def test_hosts_matrix_counts_cells_and_fails_a_defect(tmp_path, monkeypatch):
    hm = fake_matrix(tmp_path, monkeypatch, """
if [ "$1" = flap ]; then echo "RESULT | flap | $2 | DEFECT (hang): went on 3, failed 0 | x | y |"; exit 1; fi
echo "RESULT | $1 | $2 | went on | every rank ended 6.0 s after the fault | how |"; exit 0""")
    monkeypatch.setattr(hm, "faults", lambda: ["slow", "flap"])
    said = []
    recs = hm.run(str(tmp_path), 1, said.append)
    assert [r["outcome"] for r in recs] == ["ok", "ok", "fail", "fail"]
    lines, bad = hm.summarize(recs)
    assert bad and "4 cells run, 0 skipped; 2 went on" in lines[0] and "2 FAILED" in lines[0]
    assert any("FAILED: DEFECT (hang)" in x for x in said)


def test_hosts_matrix_without_root_is_a_counted_skip_of_every_cell(tmp_path, monkeypatch):
    hm = fake_matrix(tmp_path, monkeypatch, 'echo "SKIP: needs root to make network '
                     'namespaces"; exit 77')
    monkeypatch.setattr(hm, "faults", lambda: ["slow", "flap", "clock"])
    said = []
    recs = hm.run(str(tmp_path), 2, said.append)
    assert len(recs) == 12 and all(r["outcome"] == "skipped" for r in recs)
    assert said == ["chaos: SKIPPED hosts matrix (all 12 cells): needs root to make network "
                    "namespaces"]
    lines, bad = hm.summarize(recs)
    assert not bad and "0 cells run, 12 skipped" in lines[0]


def test_hosts_matrix_a_cell_without_result_fails(tmp_path, monkeypatch):
    hm = fake_matrix(tmp_path, monkeypatch, 'echo "boom"; exit 0')
    monkeypatch.setattr(hm, "faults", lambda: ["slow"])
    recs = hm.run(str(tmp_path), 1, lambda x: None)
    assert [r["outcome"] for r in recs] == ["fail", "fail"]
    assert hm.summarize(recs)[1]


def test_hosts_matrix_reads_matrix_sh_faults():
    import hosts_matrix
    assert {"oneway", "clock", "walljump", "wallskew"} <= set(hosts_matrix.faults())
