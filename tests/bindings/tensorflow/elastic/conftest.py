"""Elastic states, run and Keras callbacks of plait.tensorflow under plaitrun
(tests/bindings/tensorflow/CMakeLists.txt: python_tf_elastic2 on Keras 3,
python_tf_keras2_elastic2 on tf_keras); a fixed-size job: the failures are
raised by the tests, and every reset is a shutdown and init of the same
ranks. The fixtures are tests/harness/plaitrun_job.py's."""

import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "mp"))  # keras_helpers
sys.path.insert(0, os.path.join(here, "..", "..", "..", "harness"))

from plaitrun_job import job_fixtures  # noqa: E402

plait_job, hvd, pytest_report_header = job_fixtures("plait.tensorflow", "tensorflow")

import pytest  # noqa: E402

from plait import _core  # noqa: E402
import plait.common.elastic as common_elastic  # noqa: E402


@pytest.fixture(autouse=True)
def elastic_c_api(monkeypatch):
    """Until include/plait/elastic.h's calls are in this build (lane rdv),
    plait._core's wrappers of them give what the header says they answer
    without a driver: not elastic, no host update. Once they are, nothing is
    replaced."""
    if not hasattr(_core, "elastic_enabled"):
        monkeypatch.setattr(_core, "elastic_enabled", lambda: False, raising=False)
    if not hasattr(_core, "elastic_host_updates"):
        monkeypatch.setattr(_core, "elastic_host_updates", lambda: (0, 0), raising=False)
    if not hasattr(_core, "elastic_removed"):
        monkeypatch.setattr(_core, "elastic_removed", lambda: False, raising=False)


@pytest.fixture
def elastic_job(monkeypatch):
    """run's recovery on this fixed job: plait.common.elastic is told it
    runs under a driver (enabled() True) that never changes the hosts (the
    real plait_elastic_host_updates answers "no update" without one), so a
    HorovodInternalError restores the last commit and resets: shutdown and
    init form the same 2 ranks again. The driver itself is tested end to end
    elsewhere (tests/faults/elastic)."""
    monkeypatch.setattr(common_elastic, "enabled", lambda: True)
