"""Process sets through plait.mxnet (docs/process-sets.md): every rank runs
this session under plaitrun -np 3 (tests/python/CMakeLists.txt:
python_mx_psets3), with sets known at init and dynamic sets allowed
(HOROVOD_DYNAMIC_PROCESS_SETS=1 in the test's environment):

  A = [0, 1]; B = [1, 2] (excludes rank 0, overlaps A at rank 1).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session", autouse=True)
def plait_job():
    import plait.mxnet as hvd
    n = int(os.environ["PLAIT_SIZE"])
    sets = {"A": hvd.ProcessSet([0, 1]), "B": hvd.ProcessSet(list(range(1, n)))}
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
