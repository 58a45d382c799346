"""Multi-rank pytest session of plait.mxnet: every rank runs this session
under plaitrun (tests/bindings/CMakeLists.txt: python_mx_mp2, python_mx_mp3)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session", autouse=True)
def plait_job():
    import plait.mxnet as hvd
    hvd.init()
    yield hvd
    hvd.shutdown()


@pytest.fixture
def hvd(plait_job):
    return plait_job


def pytest_report_header(config):
    import mxnet
    return "mxnet %s (%s), rank %s of %s" % (
        mxnet.__version__, sys.executable, os.environ.get("PLAIT_RANK", "?"),
        os.environ.get("PLAIT_SIZE", "?"))
