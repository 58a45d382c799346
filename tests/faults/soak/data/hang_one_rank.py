"""A job that hangs on purpose, for soak_watchdog: rank 0 waits in an
allreduce that rank 1 never submits, while rank 1 sleeps in Python (alive,
so no timeout; not waiting on plait, so not a deadlock either). Only the
soak's watchdog ends it; its stacks must show rank 0 inside plait's wait
and rank 1 in time.sleep."""

import time

import plait.torch as hvd
import torch


def test_rank1_never_submits():
    hvd.init()
    if hvd.rank() == 0:
        hvd.allreduce(torch.ones(4), name="soak.hang.only_rank0")
    else:
        while True:
            time.sleep(1)
