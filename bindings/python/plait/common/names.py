"""Automatic names of unnamed operations ('<kind>.noname.<n>'), consumed only
by submissions the library accepted.

Ranks match an unnamed operation by its number, so every rank must count
exactly the same operations. A number taken by a call that then raised (bad
splits refused in Python on one rank, in C on another) would put the ranks'
counters out of step for good, and every later unnamed operation of that kind
would wait for a partner that never comes. So a number is reserved, the
submission is attempted, and the number is consumed only when the submission
returned; any exception gives it back:

    with AUTO_NAMES.take("alltoall", name, process_set_id) as op_name:
        handle = submit(op_name, ...)      # raises: nothing consumed

Counters are kept per kind and per process set: a set's members issue the
same sequence of operations within the set, ranks outside it issue none, so
a global counter would drift between members and non-members.

The reservation holds a lock until the submission returns (a submission only
enqueues: microseconds), so two threads never take the same number and a
number is never skipped.
"""

import contextlib
import threading

__all__ = ["AutoNames", "AUTO_NAMES"]


class AutoNames:
    """Per (kind, process set) counters of unnamed operations."""

    def __init__(self):
        self._lock = threading.RLock()
        self._next = {}

    @contextlib.contextmanager
    def take(self, kind, name=None, process_set_id=0):
        """Yields '<kind>.<name>' for a named operation (no counter is
        touched), else the next '<kind>.noname.<n>' of (kind, process set),
        consumed only if the body returns without raising."""
        if name is not None:
            yield "%s.%s" % (kind, name)
            return
        key = (kind, int(process_set_id or 0))
        with self._lock:
            n = self._next.get(key, 0)
            yield "%s.noname.%d" % (kind, n)
            self._next[key] = n + 1  # reached only when the body returned

    def peek(self, kind, process_set_id=0):
        """The number the next unnamed operation of kind would take."""
        with self._lock:
            return self._next.get((kind, int(process_set_id or 0)), 0)

    def forget(self, process_set_id):
        """Forgets the counters of one process set: called when the set is
        removed, so a set added later under the same id (ids are reused)
        counts from 0 on all its members, those of the old set included."""
        with self._lock:
            for key in [k for k in self._next if k[1] == int(process_set_id)]:
                del self._next[key]

    def reset(self):
        """Forgets every counter (at shutdown: a new job counts from 0)."""
        with self._lock:
            self._next.clear()


AUTO_NAMES = AutoNames()
