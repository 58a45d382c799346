#!/usr/bin/env python3
"""Runs a test command; if it is still running after LIMIT seconds, prints
the stacks of every process of it, kills them all and exits 124.

    hang_watch.py LIMIT -- command [args...]

ctest's own timeout kills a hung test and shows only what it printed, which
says nothing about where it hung. LIMIT is set below ctest's timeout, so a
hang is reported with the native stacks (and Python frames, with py-spy) of
the launcher and every rank: py-spy when PLAIT_SOAK_PYSPY names it (ci/test
sets it), else gdb. The processes are found by a tag in their environment
(PLAIT_SOAK_JOB, as the soak's watchdog finds its jobs), so a rank that left
the process group is found too. Otherwise the command's output and exit
status pass through unchanged.
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "faults", "soak"))
import watchdog  # noqa: E402  (tests/faults/soak/watchdog.py)


def is_python(pid):
    """py-spy reads only Python processes; plaitrun's stacks come from gdb."""
    try:
        return os.path.basename(os.readlink("/proc/%d/exe" % pid)).startswith("python")
    except OSError:
        return False


def usage(why):
    sys.stderr.write("hang_watch.py: %s\nusage: hang_watch.py LIMIT_S -- command [args...]\n"
                     % why)
    return 2


def self_test():
    """Runs itself on commands that end and on one that hangs."""
    import tempfile
    me = [sys.executable, os.path.abspath(__file__)]

    def run(args):
        p = subprocess.run(me + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=60, check=False)
        return p.returncode, p.stdout.decode(errors="replace")

    failures = []

    def expect(what, ok, out):
        if not ok:
            failures.append("%s:\n%s" % (what, out))

    rc, out = run(["30", "--", "sh", "-c", "echo passed-through; exit 3"])
    expect("exit status and output pass through", rc == 3 and "passed-through" in out, out)
    with tempfile.TemporaryDirectory() as d:
        pidfile = os.path.join(d, "pid")
        rc, out = run(["1", "--", "sh", "-c",
                       "sleep 300 & echo $! > %s; wait" % pidfile])
        expect("a hang is reported and stopped",
               rc == 124 and "HANG" in out and "sleep 300" in out
               and "killed after 1 s" in out, out)
        with open(pidfile) as f:
            child = int(f.read())
        alive = os.path.exists("/proc/%d" % child) and "Z" not in _state(child)
        expect("the hung command's child is killed", not alive, out)
    for bad in (["x", "--", "true"], ["0", "--", "true"], ["5", "true"]):
        rc, out = run(bad)
        expect("%s is refused" % bad, rc == 2 and "usage" in out, out)
    for f in failures:
        print("FAIL: " + f)
    print("hang_watch self-test: %d of 6 checks failed" % len(failures))
    return 1 if failures else 0


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 4 or argv[2] != "--":
        return usage("expected a limit, --, and a command")
    try:
        limit = float(argv[1])
    except ValueError:
        return usage("the limit %r is not a number of seconds" % argv[1])
    if not limit > 0:
        return usage("the limit must be > 0 seconds, not %r" % argv[1])
    cmd = argv[3:]
    tag = "hang-watch-%d-%d" % (os.getpid(), time.time_ns())
    env = dict(os.environ, PLAIT_SOAK_JOB=tag)
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        sys.stderr.write("hang_watch.py: cannot run %s: %s\n" % (cmd[0], e))
        return 127
    try:
        return proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        pass
    pyspy = os.environ.get("PLAIT_SOAK_PYSPY", "")
    procs = sorted(watchdog.tagged(tag))
    out = ["hang_watch.py: HANG: %s still runs after %g s; the stacks of its %d process(es) "
           "(%s):" % (" ".join(cmd), limit, len(procs),
                      "py-spy dump --native for Python, gdb for the rest" if pyspy else "gdb")]
    for pid, penv in procs:
        rank = penv.get("PLAIT_RANK")
        out.append("---- pid %d%s: %s" % (pid, " (rank %s)" % rank if rank else "",
                                          watchdog._cmdline(pid)))
        out.append(watchdog.native_stacks(pid, pyspy if is_python(pid) else "").rstrip())
    left = watchdog.kill_all(tag, proc)
    if left:
        out.append("hang_watch.py: still alive after SIGKILL: %s" % left)
    out.append("hang_watch.py: HANG: killed after %g s" % limit)
    sys.stdout.flush()
    print("\n".join(out), flush=True)
    return 124


if __name__ == "__main__":
    sys.exit(main(sys.argv))
