"""Multi-rank pytest session of plait.torch: every rank runs it under plaitrun
(tests/bindings/CMakeLists.txt: python_mp2_<torch>, python_mp3_<torch>); the
fixtures are tests/harness/plaitrun_job.py's."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))

from plaitrun_job import job_fixtures  # noqa: E402

plait_job, hvd, pytest_report_header = job_fixtures("plait.torch", "torch")
