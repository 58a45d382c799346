"""Multi-rank pytest session for plait.tensorflow: every rank runs this same
session under plaitrun (tests/bindings/tensorflow/CMakeLists.txt), so every test runs
on every rank in the same order and may call collectives. A failure on one
rank makes the others fail too (mismatch, stall or lost peer), never hang:
PLAIT_TIMEOUT_S and PLAIT_STALL_ABORT_S are set short by ctest.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def plait_job():
    import plait.tensorflow as hvd
    hvd.init()
    yield hvd
    hvd.shutdown()


@pytest.fixture
def hvd(plait_job):
    return plait_job


def pytest_report_header(config):
    import tensorflow as tf
    return "tensorflow %s (%s), rank %s of %s" % (
        tf.__version__, sys.executable, os.environ.get("PLAIT_RANK", "?"),
        os.environ.get("PLAIT_SIZE", "?"))
