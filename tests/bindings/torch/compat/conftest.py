"""The Horovod compatibility suite: the same tests against horovod.torch
0.28 and plait.torch (docs/horovod-comparison.md, "The compatibility
suite").

PLAIT_COMPAT_IMPL chooses the module (horovod or plait); the tests then use
only Horovod's API through the `hvd` fixture, as a Horovod user's script
does. Every rank runs the same session in the same order (under horovodrun
or plaitrun; ci/compat runs both), so every test runs on every rank and may
call collectives.

A test whose expected result differs by design between the two carries
@pytest.mark.differs("<row>"), naming its row in docs/horovod-comparison.md,
and asserts each implementation's own documented behaviour (the `impl`
fixture says which one runs).

With PLAIT_COMPAT_REPORT set to a directory, each rank writes
rank<N>.json there: every test's outcome and, for a failure, one line of
reason; ci/compat builds its table from these files.
"""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

IMPL = os.environ.get("PLAIT_COMPAT_IMPL", "plait")
if IMPL == "horovod":
    import horovod.torch as _module
elif IMPL == "plait":
    import plait.torch as _module
else:
    raise pytest.UsageError("PLAIT_COMPAT_IMPL must be horovod or plait, not %r" % IMPL)

# What a script sees before hvd.init(), probed once here (the session calls
# init() below) and checked by test_basics.py.
PROBES = {"is_initialized": _module.is_initialized()}
try:
    PROBES["rank"] = _module.rank()
except Exception as e:  # noqa: BLE001 -- the class is what is checked
    PROBES["rank"] = e

# Horovod needs this at init() for start_timeline() to be allowed; plait
# ignores it.
os.environ.setdefault("HOROVOD_TIMELINE", "DYNAMIC")

# One process set known at init, the ranks but rank 0 (ranks [1] at 2 ranks,
# [1, 2] at 3): its tests are test_process_sets.py. Horovod lists it in
# init(process_sets=...), and so does plait.torch.
_LAUNCH_SIZE = int(os.environ.get("HOROVOD_SIZE") or os.environ.get("PLAIT_SIZE") or "1")
PROCESS_SET = _module.ProcessSet(list(range(1, _LAUNCH_SIZE))) if _LAUNCH_SIZE > 1 else None
_module.init(process_sets=[PROCESS_SET] if PROCESS_SET is not None else None)
RANK = _module.rank()
SIZE = _module.size()
if PROCESS_SET is not None:
    # Horovod registers init's process sets on its background thread: meet
    # once before any test uses the set.
    _module.barrier()
_results = {}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "differs(row): plait differs from Horovod by design; the row of "
        "docs/horovod-comparison.md that says how. The test asserts each one's own behaviour.")
    config.addinivalue_line(
        "markers", "uneven: ranks issue different numbers of operations (join); runs after "
        "the others, since unnamed operations are named by counting operations per rank")
    config.addinivalue_line(
        "markers", "last: runs after every other test (it shuts down and re-initialises)")


def pytest_collection_modifyitems(session, config, items):
    # Tests after which ranks have issued different numbers of operations
    # run after the others: Horovod names an unnamed operation after its
    # handle, a per-process count of every operation, so unnamed operations
    # only match across ranks while every rank has issued as many. Tests
    # that shut the job down and start it again run at the very end.
    def order(item):
        if item.get_closest_marker("last") is not None:
            return 2
        return 1 if item.get_closest_marker("uneven") is not None else 0
    items.sort(key=order)


@pytest.fixture
def hvd():
    return _module


@pytest.fixture(autouse=True)
def _meet_after_each_test(request):
    """After each test every rank meets in one allreduce named after the
    test. A test that fails on one rank before a collective leaves the
    others waiting in it until the stall timeout; they all meet here, so
    the next test starts in step instead of failing too. A rank that
    arrives first may see its meeting time out too (the others were still
    waiting for the stall timeout): it tries again, up to 3 times."""
    yield
    if not _module.is_initialized():
        return
    import torch
    errors = []
    for _ in range(3):
        try:
            _module.allreduce(torch.zeros(1), op=_module.Sum,
                              name="compat.after." + request.node.nodeid)
            return
        except Exception as e:  # noqa: BLE001 -- reported as the test's error
            errors.append("%s: %s" % (type(e).__name__, e))
    pytest.fail("ranks could not meet after the test: " + "; ".join(errors), pytrace=False)


@pytest.fixture
def process_set():
    """The process set of init(process_sets=...) (None in a job of one rank)."""
    return PROCESS_SET


@pytest.fixture
def impl():
    """'horovod' or 'plait': for tests marked differs only."""
    return IMPL


def _reason(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, message)
        text = report.longrepr[2]
    elif crash is not None:
        text = crash.message
    else:
        text = str(report.longrepr)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else "?")[:300]


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed"})
    if report.failed:
        if entry["outcome"] != "failed":
            entry["outcome"] = "failed"
            entry["reason"] = "%s: %s" % (report.when, _reason(report))
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        entry["reason"] = _reason(report)


def pytest_collection_finish(session):
    for item in session.items:
        m = item.get_closest_marker("differs")
        if m is not None:
            _results.setdefault(item.nodeid, {"outcome": "passed"})["differs"] = m.args[0]


def pytest_sessionfinish(session, exitstatus):
    if _module.is_initialized():
        # Every rank reaches here before any exits: horovodrun stops the
        # other ranks as soon as one exits with an error.
        try:
            _module.barrier()
        except Exception:  # noqa: BLE001 -- the report below says what failed
            pass
    out = os.environ.get("PLAIT_COMPAT_REPORT")
    if out:
        os.makedirs(out, exist_ok=True)
        import torch
        with open(os.path.join(out, "rank%d.json" % RANK), "w") as f:
            json.dump({"impl": IMPL, "rank": RANK, "size": SIZE,
                       "torch": torch.__version__, "python": sys.executable,
                       "tests": _results}, f, indent=1, sort_keys=True)
    if _module.is_initialized():
        _module.shutdown()


def pytest_report_header(config):
    import torch
    return "compat: %s (%s), torch %s, rank %d of %d" % (
        IMPL, _module.__file__, torch.__version__, RANK, SIZE)
