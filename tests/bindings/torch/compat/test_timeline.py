"""start_timeline / stop_timeline at run time: the timeline file (Chrome
trace format, written by rank 0) records the operations run between them.
Horovod needs HOROVOD_TIMELINE=DYNAMIC at init (conftest.py sets it)."""

import os
import shutil
import tempfile
import time

import torch


def test_timeline_start_stop(hvd):
    me = hvd.rank()
    d = tempfile.mkdtemp(prefix="compat-timeline-")
    path = os.path.join(d, "timeline-%d.json" % me)
    hvd.start_timeline(path)
    for i in range(3):
        hvd.allreduce(torch.ones(4), op=hvd.Sum, name="timeline.tensor.%d" % i)
    hvd.stop_timeline()
    hvd.barrier()
    if me == 0:
        # The file is written by a background thread: wait for the names.
        text = ""
        for _ in range(100):
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read()
                if "timeline.tensor.2" in text:
                    break
            time.sleep(0.1)
        assert text.lstrip().startswith("["), text[:200]
        assert "timeline.tensor.0" in text and "timeline.tensor.2" in text, text[:500]
    # mark_cycles is accepted; a second start/stop pair works.
    hvd.start_timeline(path + ".2", mark_cycles=True)
    hvd.allreduce(torch.ones(1), name="timeline.again")
    hvd.stop_timeline()
    hvd.barrier()
    shutil.rmtree(d, ignore_errors=True)
