"""plait.torch.elastic's multi-rank session: every rank runs it under
plaitrun -np 2, without the elastic driver (tests/bindings/CMakeLists.txt:
python_elastic2_<torch>); the fixtures are tests/harness/plaitrun_job.py's.
The end-to-end runs under the driver are tests/faults/elastic/."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))

from plaitrun_job import job_fixtures  # noqa: E402

plait_job, hvd, pytest_report_header = job_fixtures("plait.torch", "torch")
