"""The one pytest plugin for sessions that every rank of a plaitrun job runs
(tests/bindings/<framework>/{mp,psets}; tests/bindings/CMakeLists.txt starts
them): every test runs on every rank in the same order and may call
collectives. A failed assertion on one rank makes the others fail too
(mismatch, stall or lost peer), never hang: the launcher sets
PLAIT_TIMEOUT_S and PLAIT_STALL_ABORT_S short.

A conftest takes the fixtures for its binding with one of

    plait_job, hvd, pytest_report_header = job_fixtures("plait.torch", "torch")
    plait_job, hvd, sets, meet_after_each_test, pytest_report_header = \\
        session_fixtures("plait.mxnet", "mxnet")

job_fixtures: one plait job per session (hvd.init() before the first test,
hvd.shutdown() after the last); `hvd` is the binding's module.

session_fixtures (the process-set suites): the job starts with the sets
known at init

  A = [0, 1]; B = [1, ..., n-1] (excludes rank 0, overlaps A at rank 1);
  C = [n-2, n-1] with 4 ranks or more (disjoint from A),

`sets` maps their names to the sets, and every rank meets after each test,
so a test that failed on one rank leaves the next one in step.
"""

import importlib
import os
import sys

import pytest


def _report_header(framework):
    def pytest_report_header(config):
        fw = importlib.import_module(framework)
        return "%s %s (%s), rank %s of %s" % (
            framework, fw.__version__, sys.executable, os.environ.get("PLAIT_RANK", "?"),
            os.environ.get("PLAIT_SIZE", "?"))
    return pytest_report_header


def job_fixtures(module_name, framework):
    """(plait_job, hvd, pytest_report_header) for the binding module_name
    (plait.torch, plait.tensorflow, plait.mxnet) of framework (its import
    name, for the report header)."""

    @pytest.fixture(scope="session", autouse=True)
    def plait_job():
        hvd = importlib.import_module(module_name)
        hvd.init()
        yield hvd
        hvd.shutdown()

    @pytest.fixture
    def hvd(plait_job):
        return plait_job

    return plait_job, hvd, _report_header(framework)


def session_fixtures(module_name, framework):
    """(plait_job, hvd, sets, the autouse meeting, pytest_report_header) for
    the process-set suite of the binding module_name."""

    @pytest.fixture(scope="session", autouse=True)
    def plait_job():
        hvd = importlib.import_module(module_name)
        n = int(os.environ["PLAIT_SIZE"])
        sets = {"A": hvd.ProcessSet([0, 1]), "B": hvd.ProcessSet(list(range(1, n)))}
        if n >= 4:
            sets["C"] = hvd.ProcessSet([n - 2, n - 1])
        hvd.init(process_sets=list(sets.values()))
        yield hvd, sets
        hvd.shutdown()

    @pytest.fixture
    def hvd(plait_job):
        return plait_job[0]

    @pytest.fixture
    def sets(plait_job):
        return plait_job[1]

    @pytest.fixture(autouse=True)
    def meet_after_each_test(plait_job):
        yield
        plait_job[0].barrier()

    return plait_job, hvd, sets, meet_after_each_test, _report_header(framework)
