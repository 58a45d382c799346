"""pytest plugin loaded into every rank of a soak job (tests/faults/soak/soak.py
runs `python -m pytest -p plait_soak_plugin FILE` with this folder on
PYTHONPATH). It changes no test; it only makes the job observable:

- SIGUSR1 dumps every thread's Python stack (faulthandler) to
  $PLAIT_SOAK_REPORT/rank<N>.pystacks, so the watchdog can show where each
  rank waits before it kills a hung job;
- every test's outcome on this rank is appended, one JSON line as soon as
  it is known, to $PLAIT_SOAK_REPORT/rank<N>.jsonl (a job killed half-way
  still says how far each rank got), with one line of reason for a failure;
- after each test the engine's operation count (plait_stats: tensors and
  responses) is recorded, summed across shutdown and re-init.
"""

import faulthandler
import json
import os
import signal
import sys

_DIR = os.environ.get("PLAIT_SOAK_REPORT")
_RANK = os.environ.get("PLAIT_RANK", "0")
_out = None
_stacks = None
_counts = {"tensors": 0, "responses": 0}
_last = {"tensors": 0, "responses": 0}

if _DIR:
    os.makedirs(_DIR, exist_ok=True)
    _stacks = open(os.path.join(_DIR, "rank%s.pystacks" % _RANK), "w")
    faulthandler.register(signal.SIGUSR1, file=_stacks, all_threads=True)
    _out = open(os.path.join(_DIR, "rank%s.jsonl" % _RANK), "a", buffering=1)


def _reason(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:400]


def _engine_counts():
    """Operations this rank's engine completed so far (summed over lives)."""
    core = sys.modules.get("plait._core")
    if core is None:
        return
    try:
        s = core.stats()
    except Exception:  # noqa: BLE001 -- not initialised now: nothing to add
        return
    for k in _counts:
        now = int(s.get(k, 0))
        if now < _last[k]:          # a new engine life started from zero
            _counts[k] += _last[k]
        _last[k] = now


def _write(record):
    if _out is not None:
        _out.write(json.dumps(record) + "\n")


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if report.when != "call" and outcome == "failed":
            outcome = "error"
        rec = {"test": report.nodeid, "when": report.when, "outcome": outcome}
        if outcome in ("failed", "error"):
            rec["reason"] = _reason(report)
        if outcome == "skipped" and isinstance(report.longrepr, tuple):
            rec["reason"] = str(report.longrepr[2])[:200]
        _write(rec)
    if report.when == "teardown":
        _engine_counts()


def pytest_sessionfinish(session, exitstatus):
    _engine_counts()
    _write({"session": "finished", "exitstatus": int(exitstatus),
            "tensors": _counts["tensors"] + _last["tensors"],
            "responses": _counts["responses"] + _last["responses"]})
