"""The driver side of an elastic job run on an engine's nodes through a
start agent (plait.ray.ElasticRayExecutor, plait.spark.run_elastic): what
both need around plaitrun's elastic driver, which does the real work.

    hosts = HostsFile(folder, who)      # the host list the engine keeps
    hosts.write({"hostA": 1})           # refreshed by the caller
    argv = [find_plaitrun(who), ..., "--host-discovery-script", hosts.script(), ...]
    dump_function(folder + "/fn.pkl", fn, args, kwargs)   # sent with each worker
    status, tail = run_streamed(argv, env)
    reason(tail)                        # plaitrun's verdict when it failed
    load_results(folder + "/results")   # the workers' values in rank order

The workers run `python -m plait.common.worker_main` (fn.pkl in, result.pkl
out) inside a plait.common.relay.Relay on their node; the agent writes each
worker's result.pkl here with write_result. Standard library and cloudpickle
only: nothing here imports an engine.
"""
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys
import uuid

STALE_S = 15  # the discovery script fails when the host list is older


class HostsFile:
    """A host list `host:slots` in folder/hosts, written whole (rename) by
    its owner, and the discovery script that prints it for plaitrun; the
    script fails naming who when the list is older than STALE_S (the owner
    stopped refreshing it)."""

    def __init__(self, folder, who):
        self.folder, self.who = folder, who
        self.path = os.path.join(folder, "hosts")

    def write(self, hosts):
        with open(self.path + ".tmp", "w") as f:
            f.write("".join("%s:%d\n" % (h, s) for h, s in hosts.items()))
        os.replace(self.path + ".tmp", self.path)

    def script(self):
        path = os.path.join(self.folder, "discover.sh")
        hosts = shlex.quote(self.path)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n# %s: the engine's hosts and slots\n"
                    "age=$(( $(date +%%s) - $(stat -c %%Y %s) ))\n"
                    "if [ \"$age\" -gt %d ]; then echo \"%s: the host list is "
                    "$age s old: the driver stopped updating it\" >&2; exit 3; fi\n"
                    "exec cat %s\n" % (self.who, hosts, STALE_S, self.who, hosts))
        os.chmod(path, 0o700)
        return path


def find_plaitrun(who):
    """$PLAITRUN, plaitrun next to the libplait plait loads (../bin), or PATH."""
    candidates = [os.environ.get("PLAITRUN")]
    lib = os.environ.get("PLAIT_LIBRARY")
    if lib:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(lib)), "bin", "plaitrun"))
    candidates.append(shutil.which("plaitrun"))
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise RuntimeError("%s: plaitrun not found (set PLAITRUN to its path, or put it on "
                       "PATH): the elastic driver is plaitrun's" % who)


def dump_function(path, fn, args, kwargs):
    """(fn, args, kwargs, this plait's version) pickled into path (0600),
    what plait.common.worker_main reads."""
    try:
        import cloudpickle
    except ImportError:  # Ray ships its own
        from ray import cloudpickle
    import plait
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(cloudpickle.dumps((fn, tuple(args), dict(kwargs), plait.__version__)))
    os.replace(path + ".tmp", path)


def run_streamed(argv, env, keep=60, out=None):
    """Runs plaitrun, its output (the workers' too) copied to out (default
    sys.stdout); (status, its last lines)."""
    out = out or sys.stdout
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    tail = []
    try:
        for raw in proc.stdout:
            out.write(raw.decode("utf-8", "replace"))
            out.flush()
            tail = (tail + [raw.decode("utf-8", "replace").rstrip("\n")])[-keep:]
        return proc.wait(), tail
    except BaseException:  # KeyboardInterrupt: plaitrun stops the workers on SIGTERM
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise


STOPPING = re.compile(r"plaitrun elastic: (.*); stopping")


def reason(tail):
    """plaitrun's own verdict ("...; stopping"), else its last line (and the
    last worker_main complaint)."""
    for line in reversed(tail):
        m = STOPPING.search(line)
        if m:
            return m.group(1)
    said = [line for line in tail if line.startswith("plaitrun")]
    why = said[-1] if said else (tail[-1] if tail else "no output")
    workers = [line for line in tail if "plait.common.worker_main:" in line]
    if workers:
        why += " (%s)" % workers[-1]
    return why


def write_result(job_dir, result):
    """A worker's (rank, value) bytes into job_dir/results/."""
    folder = os.path.join(job_dir, "results")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    name = os.path.join(folder, uuid.uuid4().hex)
    with open(name + ".tmp", "wb") as f:
        f.write(result)
    os.replace(name + ".tmp", name + ".pkl")


def load_results(folder):
    """The values in folder's results, in rank order (ranks unknown last)."""
    found = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".pkl"):
            with open(os.path.join(folder, name), "rb") as f:
                found.append(pickle.load(f))
    found.sort(key=lambda rv: (rv[0] is None, rv[0] if rv[0] is not None else 0))
    return [value for _, value in found]
