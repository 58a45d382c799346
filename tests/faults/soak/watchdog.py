"""The soak's per-job watchdog: the processes of one job, their stacks,
and killing all of them.

Every process of a job carries PLAIT_SOAK_JOB=<tag> in its environment
(plaitrun and the ranks inherit it), so the job's processes are found by
that tag, not by a name, and a process that left the job's process group or
was re-parented to init is still found: none is left behind unseen.
"""

import os
import signal
import subprocess
import time


def _environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def tagged(tag):
    """[(pid, env)] of every live process whose environment has
    PLAIT_SOAK_JOB=tag (zombies have no environment and are not listed)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        env = _environ(int(name))
        if env and env.get("PLAIT_SOAK_JOB") == tag:
            found.append((int(name), env))
    return found


def ranks(tag):
    """{rank: pid} of the job's rank processes (PLAIT_RANK set by plaitrun).
    A rank's own children (none today) would share its PLAIT_RANK: the
    lowest pid, the first started, is the rank."""
    out = {}
    for pid, env in sorted(tagged(tag)):
        r = env.get("PLAIT_RANK")
        if r is not None and r.isdigit() and int(r) not in out:
            out[int(r)] = pid
    return out


def _run(cmd, limit):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=limit, check=False)
        return p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return (e.stdout or b"").decode(errors="replace") + "\n(gave up after %d s)\n" % limit
    except OSError as e:
        return "(could not run %s: %s)\n" % (cmd[0], e)


def native_stacks(pid, pyspy):
    """Every thread's native stack of pid: py-spy dump --native (Python
    frames interleaved) when pyspy is a path, else gdb."""
    if pyspy:
        return _run([pyspy, "dump", "--native", "--pid", str(pid)], 90)
    out = _run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                "-ex", "thread apply all bt"], 120)
    keep = [ln for ln in out.splitlines()
            if not ln.startswith(("[New LWP", "warning: ", "[Thread debugging"))]
    return "\n".join(keep) + "\n"


def dump(tag, report_dir, pyspy):
    """Text with every rank's Python stacks (faulthandler on SIGUSR1, see
    plait_soak_plugin.py) and native stacks, rank by rank."""
    rk = ranks(tag)
    if not rk:
        return "(no rank process of the job is alive)\n"
    for pid in rk.values():
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            pass
    time.sleep(2)
    parts = []
    for r in sorted(rk):
        pid = rk[r]
        parts.append("---- rank %d (pid %d): %s" % (r, pid, _cmdline(pid)))
        parts.append("-- Python stacks (faulthandler, SIGUSR1):")
        path = os.path.join(report_dir, "rank%d.pystacks" % r)
        try:
            with open(path) as f:
                parts.append(f.read().rstrip() or "(empty: the rank did not answer SIGUSR1)")
        except OSError:
            parts.append("(none: %s missing; the rank had not loaded the soak plugin)" % path)
        parts.append("-- native stacks (%s):" % ("py-spy dump --native" if pyspy else "gdb"))
        parts.append(native_stacks(pid, pyspy).rstrip())
    return "\n".join(parts) + "\n"


def kill_all(tag, proc):
    """SIGKILL the job's process group and every tagged process, reap the
    launcher; returns the pids still alive afterwards (should be none)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    for _ in range(3):
        for pid, _env in tagged(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if not tagged(tag):
            break
        time.sleep(1)
    return [pid for pid, _ in tagged(tag)]
