"""Process sets through plait.tensorflow (docs/process-sets.md): every rank
runs this session under plaitrun -np 3 (tests/python/tf/CMakeLists.txt),
which starts plait with two sets known at init and dynamic sets allowed
(HOROVOD_DYNAMIC_PROCESS_SETS=1 in the test's environment):

  A = [0, 1]; B = [1, 2] (excludes rank 0, overlaps A at rank 1).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def plait_job():
    import plait.tensorflow as hvd
    n = int(os.environ["PLAIT_SIZE"])
    assert n == 3, "the TensorFlow process-set suite runs at 3 ranks"
    sets = {"A": hvd.ProcessSet([0, 1]), "B": hvd.ProcessSet([1, 2])}
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
