"""Process sets through plait.torch (docs/process-sets.md): every rank runs
this session under plaitrun -np 3 and -np 4 (tests/python/CMakeLists.txt),
which starts plait with sets known at init and dynamic sets allowed
(HOROVOD_DYNAMIC_PROCESS_SETS=1 in the test's environment):

  A = [0, 1]; B = [1, ..., n-1] (overlaps A at rank 1);
  C = [n-2, n-1] with 4 ranks (disjoint from A; with 3 ranks it would be B).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def plait_job():
    import plait.torch as hvd
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
def _meet_after_each_test(plait_job):
    """Every rank meets after each test, so a test that failed on one rank
    leaves the next one in step."""
    yield
    plait_job[0].barrier()
