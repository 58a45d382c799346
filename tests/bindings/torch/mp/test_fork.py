"""A process forked after hvd.init() (a DataLoader worker, a helper) is not
part of the job: when it exits, the atexit handler plait registered (its
shutdown) leaves the parents' job intact, and an operation in it fails at
once with an error naming the fork, never a hang (issue 16, item 2)."""

import atexit
import os
import time

import torch


def _wait(pid, limit_s):
    """The child's exit code, or None when it had to be killed after limit_s."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def _allreduce_ok(hvd, name):
    n = hvd.size()
    x = torch.arange(4, dtype=torch.float32) + hvd.rank()
    got = hvd.allreduce(x, op=hvd.Sum, name=name)
    assert got.tolist() == [n * (n - 1) / 2 + n * i for i in range(4)]


def test_child_exit_runs_atexit_and_the_job_goes_on(hvd):
    _allreduce_ok(hvd, "fork.before_exit")
    pid = os.fork()
    if pid == 0:
        atexit._run_exitfuncs()  # what the child's interpreter does on exit
        os._exit(0)
    assert _wait(pid, 30) == 0, "the forked child hung or failed in its exit handlers"
    for i in range(3):
        _allreduce_ok(hvd, "fork.after_exit.%d" % i)


def test_child_operation_fails_at_once(hvd):
    pid = os.fork()
    if pid == 0:
        code = 2  # the operation ran: it should not have
        try:
            hvd.allreduce(torch.ones(2), name="fork.child")
        except Exception as e:  # plait's error type, whichever the binding raises
            code = 0 if "fork" in str(e) else 3
        os._exit(code)
    code = _wait(pid, 20)
    assert code is not None, "the forked child's allreduce hung (killed after 20 s)"
    assert code == 0, "the forked child's allreduce did not fail naming the fork (%d)" % code
    _allreduce_ok(hvd, "fork.after_child_op")
