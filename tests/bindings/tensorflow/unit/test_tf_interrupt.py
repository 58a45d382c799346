"""A signal during a plait.tensorflow wait (issue 32, item 2): rank 1 waits
in an allreduce that rank 0 never submits, eagerly or in a tf.function, and
gets SIGINT (KeyboardInterrupt) or SIGALRM (a handler that raises). Before
the fix the handler ran only when the wait ended, which here is never (no
stall abort): the rank hung. Now the wait is abandoned, the handler's
exception raises in the waiting thread, the process exits, and rank 0,
waiting too, is told that rank 1 left. After Ctrl-C rank 1 goes on and
submits what rank 0 waits on, which completes on both. A SIGALRM handler that returns gets
a CancelledError naming the signal eagerly, zeros from a tf.function: so
signals other than a KeyboardInterrupt-raising SIGINT act only with
PLAIT_TENSORFLOW_INTERRUPT=all (the SIGALRM cases), and not by default
(test_sigalrm_by_default_leaves_the_wait_alone)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))
from ranks import clean_env, free_ports  # noqa: E402

SCRIPT = """
import os, signal, sys
import tensorflow as tf
import plait.tensorflow as hvd

class Alarm(Exception):
    pass

def on_alarm(signum, frame):
    if os.environ["HANDLER"] == "raises":
        raise Alarm("SIGALRM handler")

signal.signal(signal.SIGALRM, on_alarm)
hvd.init()
r = hvd.rank()

def wait(x):  # each rank waits on an operation the other never submits
    return hvd.allreduce(x, name="never.%d" % r)

def other(x):  # what the other rank waits on
    return hvd.allreduce(x, name="never.%d" % (1 - r))

if os.environ["MODE"] == "function":
    wait, other = tf.function(wait), tf.function(other)
print("WAITING", flush=True)
try:
    out = wait(tf.ones(4))
except KeyboardInterrupt:
    print("KEYBOARDINTERRUPT", flush=True)
    # The rank goes on: it now submits what rank 0 waits on, which must
    # complete (no stale error from the abandoned operation).
    print("THEN %s" % other(tf.ones(4) * 3).numpy().tolist(), flush=True)
    sys.exit(4)
except Alarm:
    print("ALARM", flush=True)
    sys.exit(5)
except tf.errors.OpError as e:
    print("RAISED %s: %s" % (type(e).__name__, e.message), flush=True)
    sys.exit(3)
print("RETURNED %s" % out.numpy().tolist(), flush=True)
"""

# What rank 1 does: its exit status and what it prints.
EXPECT = {("SIGINT", "raises", "eager"): (4, "KEYBOARDINTERRUPT"),
          ("SIGINT", "raises", "function"): (4, "KEYBOARDINTERRUPT"),
          ("SIGALRM", "raises", "eager"): (5, "ALARM"),
          ("SIGALRM", "raises", "function"): (5, "ALARM"),
          # A handler that returns: eagerly the call raises, naming the
          # signal; a tf.function returns zeros (stderr says so).
          ("SIGALRM", "returns", "eager"):
              (3, "RAISED CancelledError: plait: operation 'allreduce.never.1' abandoned: "
                  "interrupted by SIGALRM"),
          ("SIGALRM", "returns", "function"): (0, "RETURNED [0.0, 0.0, 0.0, 0.0]")}


def _env(rank, port, mode, handler, interrupt):
    return clean_env(PLAIT_RANK=str(rank), PLAIT_SIZE="2", PLAIT_LOCAL_RANK=str(rank),
                     PLAIT_LOCAL_SIZE="2", PLAIT_RENDEZVOUS="127.0.0.1:%d" % port,
                     PLAIT_SECRET="tf-interrupt-" + "0" * 24, PLAIT_TIMEOUT_S="30",
                     PLAIT_TRANSPORT=os.environ.get("PLAIT_TRANSPORT", "gloo"), MODE=mode,
                     HANDLER=handler, PLAIT_TENSORFLOW_INTERRUPT=interrupt,
                     PLAIT_TENSORFLOW_LIBRARY=os.environ["PLAIT_TENSORFLOW_LIBRARY"])


@pytest.mark.skipif(not os.environ.get("PLAIT_TENSORFLOW_LIBRARY"),
                    reason="PLAIT_TENSORFLOW_LIBRARY not set (run through ctest)")
@pytest.mark.parametrize("sig,handler,mode", sorted(EXPECT))
def test_signal_ends_a_hung_wait(sig, handler, mode):
    port = free_ports(1)
    ranks = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(SCRIPT)],
                              env=_env(r, port, mode, handler, "1" if sig == "SIGINT" else "all"),
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    try:
        for p in ranks:
            line = p.stdout.readline()
            assert line.strip() == "WAITING", line + p.stderr.read()
        time.sleep(1.0)  # into the wait (a signal before it raises too)
        ranks[1].send_signal(getattr(signal, sig))
        # Generous bounds on a loaded machine; before the fix rank 1 never ends.
        out1, err1 = ranks[1].communicate(timeout=60)
        out0, err0 = ranks[0].communicate(timeout=120)
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.communicate()
    code, word = EXPECT[sig, handler, mode]
    assert ranks[1].returncode == code and word in out1, (ranks[1].returncode, out1, err1)
    if handler == "returns":
        assert "abandoned: interrupted by SIGALRM" in err1, err1
    if sig == "SIGINT":  # rank 1 went on and submitted rank 0's operation
        assert "THEN [2.0, 2.0, 2.0, 2.0]" in out1, (out1, err1)
        assert ranks[0].returncode == 0 and "RETURNED [2.0, 2.0, 2.0, 2.0]" in out0, (
            ranks[0].returncode, out0, err0)
    else:  # rank 0 learns that rank 1 left rather than waiting for ever
        assert ranks[0].returncode == 3 and "RAISED" in out0, (ranks[0].returncode, out0, err0)


def test_interrupt_setting_is_checked():
    """A bad PLAIT_TENSORFLOW_INTERRUPT names the variable and what it takes."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "..", "..", "bindings", "python"))
    from plait.tensorflow import _interrupt
    old = os.environ.get(_interrupt.VARIABLE)
    try:
        os.environ[_interrupt.VARIABLE] = "yes"
        with pytest.raises(ValueError, match="PLAIT_TENSORFLOW_INTERRUPT='yes'"):
            _interrupt.mode()
        os.environ[_interrupt.VARIABLE] = "ALL"
        assert _interrupt.mode() == "all"
    finally:
        if old is None:
            os.environ.pop(_interrupt.VARIABLE, None)
        else:
            os.environ[_interrupt.VARIABLE] = old


def test_only_a_raising_sigint_acts_by_default():
    """By default a SIGALRM or SIGTERM handler (which may return, e.g. a
    graceful stop that sets a flag) never abandons a wait: the abandoned
    operations' zeros would reach the program. SIGINT acts only while its
    handler is Python's default, which raises KeyboardInterrupt."""
    from plait.tensorflow import _interrupt
    old = signal.signal(signal.SIGALRM, lambda *a: None)
    try:
        assert not _interrupt._acts_on(int(signal.SIGALRM), False)
        assert _interrupt._acts_on(int(signal.SIGALRM), True)
        assert _interrupt._acts_on(int(signal.SIGINT), False) == (
            signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        assert not _interrupt._acts_on(int(signal.SIGUSR1), True)
    finally:
        signal.signal(signal.SIGALRM, old)
