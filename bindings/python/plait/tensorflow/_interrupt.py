"""Ctrl-C and other signals during a plait.tensorflow wait.

Every wait of plait.tensorflow is inside TensorFlow (TFE_Execute eagerly,
the executor in a tf.function), which blocks the main thread until the op's
kernel calls done(): Python would run a signal handler only once the
operation ends. So, at init, plait.tensorflow points signal.set_wakeup_fd at
a pipe (only when the program has not set a wakeup fd itself, and only from
the main thread). Python's C-level handler writes the signal's number there
even while the main thread is blocked; a daemon thread blocked reading the
pipe then asks the op library to end every pending plait kernel with
Cancelled "plait: operation '<name>' abandoned: interrupted by SIGINT"
(plait_tf_abandon_pending). They end with an OK status and outputs of
zeros: an error status would make TensorFlow construct its Python exception
while the handler is pending, the handler would run inside that constructor
and pybind11 would replace its exception with a RuntimeError. The blocking
TensorFlow call returns, and the main thread runs the program's handler at
its next bytecode: KeyboardInterrupt for Ctrl-C. When the handler returns
instead, an eager call raises tf.errors.CancelledError "plait: operation
'<name>' abandoned: interrupted by SIGALRM" (raise_if_abandoned); a
tf.function returns the zeros (the op library says so on stderr). Zeros
must never reach a program that goes on, so by default only SIGINT while its
handler is Python's default (KeyboardInterrupt, which always raises before
the program sees the outputs) abandons anything;
PLAIT_TENSORFLOW_INTERRUPT=all extends it to SIGINT, SIGTERM, SIGHUP and
SIGALRM with any Python handler (for programs whose handlers raise, e.g.
pytest-timeout), and =0 turns it off.

plait still completes the abandoned operations; the op library keeps their
tensors referenced until it does (docs/tensorflow.md, "Ctrl-C and other
signals during a wait").
"""

import ctypes
import os
import signal
import threading

# The signals whose handlers usually end what the program is doing. Others
# (SIGCHLD, SIGWINCH, SIGUSR1, SIGPROF, ...) leave a wait alone: their
# handlers typically return, and an abandoned collective cannot be resumed.
SIGNALS = frozenset(int(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                     signal.SIGALRM))

MODES = ("0", "1", "all")
VARIABLE = "PLAIT_TENSORFLOW_INTERRUPT"

_lock = threading.Lock()
_installed = None  # (read fd, write fd, thread) once installed
_take = None  # plait_tf_take_abandoned once installed
_buffer = None


def forget():
    """Drops what a signal abandoned before an eager call starts (its handler
    raised, or it was in a tf.function): raise_if_abandoned then speaks of
    that call only."""
    if _take is not None:
        _take(None, 0)


def raise_if_abandoned():
    """Raises tf.errors.CancelledError naming the operations a signal
    abandoned since the last call (eager calls only: the handler did not
    raise, and their outputs are zeros)."""
    if _take is None:
        return
    with _lock:
        if not _take(_buffer, len(_buffer)):
            return
        message = _buffer.value.decode("utf-8", "replace")
    import tensorflow as tf
    raise tf.errors.CancelledError(None, None, message)


def mode():
    """PLAIT_TENSORFLOW_INTERRUPT: '1' (default), '0' or 'all'; anything else
    is a ValueError naming the variable."""
    value = os.environ.get(VARIABLE, "1").strip().lower()
    if value not in MODES:
        raise ValueError("plait.tensorflow: %s=%r: expected 0 (off), 1 (Ctrl-C while its "
                         "handler raises KeyboardInterrupt: the default) or all (SIGINT, "
                         "SIGTERM, SIGHUP, SIGALRM with any Python handler)"
                         % (VARIABLE, os.environ.get(VARIABLE)))
    return value


def _acts_on(number, everything):
    """Whether signal number ends the pending waits: its handler must raise
    before the program can see the abandoned operations' zeros."""
    if number not in SIGNALS:
        return False
    handler = signal.getsignal(number)
    if number == signal.SIGINT and handler is signal.default_int_handler:
        return True
    return everything and callable(handler)


def _watch(fd, abandon, everything):
    while True:
        try:
            data = os.read(fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        for number in sorted(set(data)):
            if _acts_on(number, everything):
                why = "interrupted by %s" % signal.Signals(number).name
                abandon(why.encode())


def install(library_path):
    """Starts the watcher; True when installed (now or before). Does nothing
    off the main thread, when PLAIT_TENSORFLOW_INTERRUPT=0, or when the
    program has a wakeup fd of its own (it is put back)."""
    global _installed, _take, _buffer
    with _lock:
        if _installed is not None:
            return True
        how = mode()
        if how == "0":
            return False
        if threading.current_thread() is not threading.main_thread():
            return False
        lib = ctypes.CDLL(library_path)
        abandon = lib.plait_tf_abandon_pending
        abandon.argtypes = [ctypes.c_char_p]
        abandon.restype = ctypes.c_int
        take = lib.plait_tf_take_abandoned
        take.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        take.restype = ctypes.c_int
        r, w = os.pipe()
        os.set_blocking(w, False)  # set_wakeup_fd requires it
        try:
            old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:  # not the main interpreter's main thread
            os.close(r)
            os.close(w)
            return False
        if old != -1:  # the program's own: leave it in place
            signal.set_wakeup_fd(old)
            os.close(r)
            os.close(w)
            return False
        thread = threading.Thread(target=_watch, args=(r, abandon, how == "all"), daemon=True,
                                  name="plait-tf-signals")
        thread.start()
        _installed = (r, w, thread)
        _buffer = ctypes.create_string_buffer(4096)
        _take = take
        return True
