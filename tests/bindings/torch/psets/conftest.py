"""Process sets through plait.torch (docs/process-sets.md): every rank runs
this session under plaitrun -np 3 and -np 4 (tests/bindings/CMakeLists.txt),
which starts plait with sets known at init and dynamic sets allowed
(HOROVOD_DYNAMIC_PROCESS_SETS=1 in the test's environment):

  A = [0, 1]; B = [1, ..., n-1] (overlaps A at rank 1);
  C = [n-2, n-1] with 4 ranks (disjoint from A; with 3 ranks it would be B).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# tests/harness: the fixtures shared by every binding's process-set suite
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))

from plaitrun_job import session_fixtures  # noqa: E402

plait_job, hvd, sets, meet_after_each_test, pytest_report_header = session_fixtures(
    "plait.torch", "torch")
