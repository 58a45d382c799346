"""The session fixtures shared by the process-set suites of every binding
(tests/bindings/torch/psets for plait.torch, mx/psets, tf/psets): one plait job per
pytest session, started with the sets known at init

  A = [0, 1]; B = [1, ..., n-1] (excludes rank 0, overlaps A at rank 1);
  C = [n-2, n-1] with 4 ranks or more (disjoint from A),

and every rank meeting after each test, so a test that failed on one rank
leaves the next one in step. A conftest takes them with

    plait_job, hvd, sets, meet_after_each_test = session_fixtures("plait.mxnet")
"""

import importlib
import os

import pytest


def session_fixtures(module_name):
    """The fixtures (plait_job, hvd, sets, the autouse meeting) for the
    binding module_name."""

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

    return plait_job, hvd, sets, meet_after_each_test
