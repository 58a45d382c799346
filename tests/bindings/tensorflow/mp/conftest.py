"""Multi-rank pytest session of plait.tensorflow: every rank runs it under
plaitrun (tests/bindings/tensorflow/CMakeLists.txt: python_tf_mp2,
python_tf_mp3); the fixtures are tests/harness/plaitrun_job.py's."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tfmodes, keras_helpers
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))

from plaitrun_job import job_fixtures  # noqa: E402

plait_job, hvd, pytest_report_header = job_fixtures("plait.tensorflow", "tensorflow")
